import AuthCoordinator
import Foundation

/// The one call an app makes from `application(_:open:options:)`: routes a URL to the Inside
/// SDK, the payment SDK, and (for the URL-opening flow) the auth-code provider.
///
/// "The app's scheme" is one of the router's `appSchemes` (case-insensitive); "`safepay`" means
/// the host is exactly `safepay`.
///
/// | URL | disposition | what happens |
/// |---|---|---|
/// | app's scheme, host `<label>.inside.com` | ``URLDisposition/accountConnect`` | to the account-connect hook |
/// | app's scheme, `safepay`, auth result | ``URLDisposition/authResult(_:)`` | matched to pending requests, then to the payment hook |
/// | app's scheme, `safepay`, malformed auth result | ``URLDisposition/authResult(_:)`` | reported malformed, then to the payment hook |
/// | app's scheme, `safepay`, payment result | ``URLDisposition/payment`` | to the payment hook |
/// | app's scheme, `safepay`, unreadable | ``URLDisposition/payment`` | reported, then to the payment hook |
/// | any other URL whose host contains `safepay` | ``URLDisposition/payment`` | to the payment hook, unread |
/// | any of the above, without the hook or provider it needs | ``URLDisposition/unhandled`` | nothing |
/// | anything else | ``URLDisposition/notOurs`` | nothing |
///
/// **Every URL whose host contains `safepay` reaches the payment hook**, as the vendor guide's
/// payment section ("接入支付") requires: `if ([url.host containsString:@"safepay"])
/// [[AlipaySDK defaultService] processOrderWithPaymentResult:url standbyCallback:nil];`. The
/// router may also read an auth result from it, but only from a URL with the app's scheme and
/// the exact host `safepay`, and only when it was created with an ``AlipayAuthCodeProvider``: a
/// lookalike host (`evil-safepay.example`) or another scheme never completes a request.
///
/// **Hooks.** A hook the router was created without does nothing, so a URL that only it would
/// have handled is reported as ``URLDisposition/unhandled`` (`isHandled == false`) and the app
/// can route it elsewhere. Hooks run synchronously on the caller's thread.
///
/// ```swift
/// // iOS only
/// let router = AlipayCallbackRouter(
///   appSchemes: ["demoapp"],
///   accountConnect: { url in insideSDKHandle(url) },
///   payment: { url in
///     AlipaySDK.defaultService().processOrder(withPaymentResult: url, standbyCallback: nil)
///   })
/// func application(_ app: UIApplication, open url: URL,
///                  options: [UIApplication.OpenURLOptionsKey: Any] = [:]) -> Bool {
///   router.handle(url).isHandled
/// }
/// ```
public final class AlipayCallbackRouter: Sendable {
  private let provider: AlipayAuthCodeProvider?
  private let appSchemes: Set<String>?
  private let accountConnect: (@Sendable (URL) -> Void)?
  private let payment: (@Sendable (URL) -> Void)?

  /// Creates a router for the Inside SDK flow (``InsideAuthCodeProvider``): it reads no auth
  /// result, passes account-connect URLs on the app's schemes to `accountConnect` and every URL
  /// whose host contains `safepay` to `payment`.
  ///
  /// - Parameters:
  ///   - appSchemes: The app's URL schemes (its `CFBundleURLTypes` entries, such as `demoapp`);
  ///     compared case-insensitively.
  ///   - accountConnect: Receives Inside SDK URLs (the app's scheme, a host ending in the labels
  ///     `inside.com`); pass the SDK's URL handler. Without it such URLs are
  ///     ``URLDisposition/unhandled``.
  ///   - payment: Receives every URL whose host contains `safepay`; pass
  ///     `AlipaySDK.defaultService().processOrder(withPaymentResult:standbyCallback:)`. Without
  ///     it such URLs are ``URLDisposition/unhandled``.
  public init(
    appSchemes: Set<String>,
    accountConnect: (@Sendable (URL) -> Void)? = nil,
    payment: (@Sendable (URL) -> Void)? = nil
  ) {
    self.provider = nil
    self.appSchemes = Set(appSchemes.map { $0.lowercased() })
    self.accountConnect = accountConnect
    self.payment = payment
  }

  /// Creates a router for the URL-opening flow (``AlipayAuthCodeProvider``) that reads auth
  /// results and account-connect URLs only on the app's own URL schemes.
  ///
  /// - Parameters:
  ///   - provider: The provider whose pending requests auth results complete.
  ///   - appSchemes: The app's URL schemes, the ones Alipay calls back on (its
  ///     `CFBundleURLTypes` entries, such as `demoapp`); compared case-insensitively. A URL with
  ///     another scheme is never read as an auth result nor passed to `accountConnect`. An empty
  ///     set reads no auth result at all.
  ///   - accountConnect: Receives Inside SDK URLs (the app's scheme, a host ending in the
  ///     labels `inside.com`); pass the SDK's URL handler.
  ///   - payment: Receives every URL whose host contains `safepay`, auth results included; pass
  ///     `AlipaySDK.defaultService().processOrder(withPaymentResult:standbyCallback:)`.
  public init(
    provider: AlipayAuthCodeProvider,
    appSchemes: Set<String>,
    accountConnect: (@Sendable (URL) -> Void)? = nil,
    payment: (@Sendable (URL) -> Void)? = nil
  ) {
    self.provider = provider
    self.appSchemes = Set(appSchemes.map { $0.lowercased() })
    self.accountConnect = accountConnect
    self.payment = payment
  }

  /// Creates a router that does not check the URL scheme: an auth result on any scheme with the
  /// host `safepay` is read.
  ///
  /// - Parameters:
  ///   - provider: The provider whose pending requests auth results complete.
  ///   - accountConnect: Receives Inside SDK URLs (a host ending in the labels `inside.com`).
  ///   - payment: Receives every URL whose host contains `safepay`.
  @available(
    *, deprecated,
    message: "pass appSchemes: so that only callbacks on the app's own URL scheme are read"
  )
  public init(
    provider: AlipayAuthCodeProvider,
    accountConnect: (@Sendable (URL) -> Void)? = nil,
    payment: (@Sendable (URL) -> Void)? = nil
  ) {
    self.provider = provider
    self.appSchemes = nil
    self.accountConnect = accountConnect
    self.payment = payment
  }

  /// Routes one URL the app was opened with. Never crashes, whatever the URL.
  ///
  /// - Parameter url: The URL from `application(_:open:options:)` or `scene(_:openURLContexts:)`.
  /// - Returns: What was done with it.
  @discardableResult
  public func handle(_ url: URL) -> URLDisposition {
    switch SafepayCallback.classify(url.absoluteString, appSchemes: appSchemes) {
    case .notOurs:
      return .notOurs
    case .accountConnect:
      guard let accountConnect else { return .unhandled }
      accountConnect(url)
      return .accountConnect
    case .paymentPassThrough:
      return toPayment(url)
    case .safepay(let parsed):
      guard let provider else { return toPayment(url) }
      let match: CallbackMatch
      switch parsed {
      case .success(let callback) where callback.kind == .payment:
        return toPayment(url)
      case .success(let callback):
        match = provider.deliver(callback)
      case .failure(.malformedAuth):
        match = provider.rejectMalformed()
      case .failure(.unreadable):
        provider.rejectMalformed()
        return toPayment(url)
      }
      payment?(url)
      return .authResult(match)
    }
  }

  private func toPayment(_ url: URL) -> URLDisposition {
    guard let payment else { return .unhandled }
    payment(url)
    return .payment
  }
}
