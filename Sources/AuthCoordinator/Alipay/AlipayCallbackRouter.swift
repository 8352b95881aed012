import Foundation

/// The one call an app makes from `application(_:open:options:)`: routes a URL to the Inside
/// SDK, the auth-code provider, or the payment SDK.
///
/// "The app's scheme" is one of the router's `appSchemes` (case-insensitive); "`safepay`" means
/// the host is exactly `safepay`.
///
/// | URL | disposition | what happens |
/// |---|---|---|
/// | app's scheme, host `<label>.inside.com` | ``URLDisposition/accountConnect`` | to the account-connect hook |
/// | app's scheme, `safepay`, auth result | ``URLDisposition/authResult(_:)`` | matched to pending requests |
/// | app's scheme, `safepay`, payment result | ``URLDisposition/payment`` | to the payment hook |
/// | app's scheme, `safepay`, unreadable | ``URLDisposition/payment`` | reported, then to the payment hook |
/// | any other URL whose host contains `safepay` | ``URLDisposition/payment`` | to the payment hook, unread |
/// | anything else | ``URLDisposition/notOurs`` | nothing |
///
/// An auth result is read only from a URL with the app's scheme and the exact host `safepay`:
/// a lookalike host (`evil-safepay.example`) or another scheme never completes a request. Such
/// URLs still go to the payment hook, following the vendor's rule that every URL whose host
/// contains `safepay` belongs to the payment SDK, which is the authority on its own URLs.
///
/// A `safepay` URL this library cannot read still goes to the payment hook (the vendor SDK is
/// the authority on its own payment URLs), after a
/// ``BridgeEvent/callbackRejected(reason:requestID:)`` with reason
/// ``BridgeEvent/RejectReason/malformed``. An auth result that is recognisably an auth result
/// but malformed (no `ResultStatus`, conflicting repeated fields) completes nothing and goes
/// nowhere else. Hooks run synchronously on the caller's thread.
///
/// ```swift
/// // iOS only
/// let router = AlipayCallbackRouter(provider: provider, appSchemes: ["demoapp"])
/// func application(_ app: UIApplication, open url: URL,
///                  options: [UIApplication.OpenURLOptionsKey: Any] = [:]) -> Bool {
///   router.handle(url).isHandled
/// }
/// ```
public final class AlipayCallbackRouter: Sendable {
  private let provider: AlipayAuthCodeProvider
  private let appSchemes: Set<String>?
  private let accountConnect: @Sendable (URL) -> Void
  private let payment: @Sendable (URL) -> Void

  /// Creates a router that reads auth results and account-connect URLs only on the app's own
  /// URL schemes.
  ///
  /// - Parameters:
  ///   - provider: The provider whose pending requests auth results complete.
  ///   - appSchemes: The app's URL schemes, the ones Alipay calls back on (its
  ///     `CFBundleURLTypes` entries, such as `demoapp`); compared case-insensitively. A URL with
  ///     another scheme is never read as an auth result nor passed to `accountConnect`. An empty
  ///     set reads no auth result at all.
  ///   - accountConnect: Receives Inside SDK URLs (the app's scheme, a host ending in the
  ///     labels `inside.com`); pass the SDK's URL handler.
  ///   - payment: Receives `safepay` payment results and every other URL whose host contains
  ///     `safepay`; pass
  ///     `AlipaySDK.defaultService().processOrder(withPaymentResult:standbyCallback:)`.
  public init(
    provider: AlipayAuthCodeProvider,
    appSchemes: Set<String>,
    accountConnect: @escaping @Sendable (URL) -> Void = { _ in },
    payment: @escaping @Sendable (URL) -> Void = { _ in }
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
  ///   - payment: Receives `safepay` payment results and every other URL whose host contains
  ///     `safepay`.
  @available(
    *, deprecated,
    message: "pass appSchemes: so that only callbacks on the app's own URL scheme are read"
  )
  public init(
    provider: AlipayAuthCodeProvider,
    accountConnect: @escaping @Sendable (URL) -> Void = { _ in },
    payment: @escaping @Sendable (URL) -> Void = { _ in }
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
    case .paymentPassThrough:
      payment(url)
      return .payment
    case .accountConnect:
      accountConnect(url)
      return .accountConnect
    case .safepay(.success(let callback)) where callback.kind == .payment:
      payment(url)
      return .payment
    case .safepay(.success(let callback)):
      return .authResult(provider.deliver(callback))
    case .safepay(.failure(.malformedAuth)):
      return .authResult(provider.rejectMalformed())
    case .safepay(.failure(.unreadable)):
      provider.rejectMalformed()
      payment(url)
      return .payment
    }
  }
}
