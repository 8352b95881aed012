import AuthCoordinator
import Foundation

/// The one call an app makes from `application(_:open:options:)`: routes a URL to the Inside
/// SDK, the payment SDK, and (for the URL-opening flow) the auth-code provider. Universal links
/// (`application(_:continue:restorationHandler:)`) go to ``handleUniversalLink(_:)``.
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
/// **Universal links.** Recent AlipaySDK versions can return through a universal link on the
/// app's associated domain instead of the URL scheme. A router created with a
/// ``UniversalLinkPrefix`` reads the links inside it in ``handleUniversalLink(_:)`` (auth
/// results matched like `safepay` ones) and passes each to the `universalLink` hook, AlipaySDK's
/// `handleOpenUniversalLink(_:standbyCallback:)`; links outside it are
/// ``URLDisposition/notOurs``.
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
  private let universalLinkPrefix: UniversalLinkPrefix?
  private let universalLink: (@Sendable (URL) -> Void)?

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
  ///   - universalLinkPrefix: The app's universal-link prefix for Alipay results (the link it
  ///     passes to AlipaySDK as `fromUniversalLink:`); `nil` (the default) claims no universal
  ///     link. See ``handleUniversalLink(_:)``.
  ///   - universalLink: Receives every universal link inside `universalLinkPrefix`; pass
  ///     AlipaySDK's `handleOpenUniversalLink(_:standbyCallback:)` (see
  ///     ``handleUniversalLink(_:)``). Without it such links are ``URLDisposition/unhandled``.
  public init(
    appSchemes: Set<String>,
    accountConnect: (@Sendable (URL) -> Void)? = nil,
    payment: (@Sendable (URL) -> Void)? = nil,
    universalLinkPrefix: UniversalLinkPrefix? = nil,
    universalLink: (@Sendable (URL) -> Void)? = nil
  ) {
    self.provider = nil
    self.appSchemes = Set(appSchemes.map { $0.lowercased() })
    self.accountConnect = accountConnect
    self.payment = payment
    self.universalLinkPrefix = universalLinkPrefix
    self.universalLink = universalLink
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
  ///   - universalLinkPrefix: The app's universal-link prefix for Alipay results (the link it
  ///     passes to AlipaySDK as `fromUniversalLink:`); `nil` (the default) claims no universal
  ///     link. Auth results are read from links inside it (see ``handleUniversalLink(_:)``).
  ///   - universalLink: Receives every universal link inside `universalLinkPrefix`, auth results
  ///     included; pass AlipaySDK's `handleOpenUniversalLink(_:standbyCallback:)` (see
  ///     ``handleUniversalLink(_:)``).
  public init(
    provider: AlipayAuthCodeProvider,
    appSchemes: Set<String>,
    accountConnect: (@Sendable (URL) -> Void)? = nil,
    payment: (@Sendable (URL) -> Void)? = nil,
    universalLinkPrefix: UniversalLinkPrefix? = nil,
    universalLink: (@Sendable (URL) -> Void)? = nil
  ) {
    self.provider = provider
    self.appSchemes = Set(appSchemes.map { $0.lowercased() })
    self.accountConnect = accountConnect
    self.payment = payment
    self.universalLinkPrefix = universalLinkPrefix
    self.universalLink = universalLink
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
    self.universalLinkPrefix = nil
    self.universalLink = nil
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
      return route(parsed, of: url, to: payment)
    }
  }

  /// Routes one universal link the app was opened with (`userActivity.webpageURL` of an
  /// `NSUserActivityTypeBrowsingWeb` activity). Never crashes, whatever the URL.
  ///
  /// Only links inside the router's ``UniversalLinkPrefix`` are Alipay's; every other link
  /// (and every link, for a router created without a prefix) is ``URLDisposition/notOurs``, so
  /// the app routes it as before. A link inside the prefix is read like a `safepay` URL:
  ///
  /// | link inside the prefix | disposition | what happens |
  /// |---|---|---|
  /// | auth result | ``URLDisposition/authResult(_:)`` | matched to pending requests, then to the universal-link hook |
  /// | malformed auth result | ``URLDisposition/authResult(_:)`` | reported malformed, then to the universal-link hook |
  /// | payment result, or nothing this library reads | ``URLDisposition/payment`` | to the universal-link hook (reported malformed when unreadable) |
  /// | any of the above, without the hook (or provider) it needs | ``URLDisposition/unhandled`` | nothing |
  ///
  /// An auth result is the same JSON as a `safepay` URL's, in the link's query (the whole
  /// query, or the value of any query item), with the same result codes and the same matching:
  /// only `target_id` or `state` equal to a pending request's id completes it. *(inferred:
  /// AlipaySDK's header documents the universal-link return only for payments, and documents
  /// no link format; this library reads the `safepay` query format from it.)* Like a `safepay`
  /// URL, every link inside the prefix reaches the universal-link hook, so AlipaySDK still sees
  /// its payment results.
  ///
  /// ```swift
  /// // iOS only: UIKit and AlipaySDK.
  /// func application(_ application: UIApplication, continue userActivity: NSUserActivity,
  ///                  restorationHandler: @escaping ([any UIUserActivityRestoring]?) -> Void)
  ///   -> Bool {
  ///   guard userActivity.activityType == NSUserActivityTypeBrowsingWeb,
  ///     let url = userActivity.webpageURL
  ///   else { return false }
  ///   return router.handleUniversalLink(url).isHandled || myLinks.handle(url)
  /// }
  /// ```
  ///
  /// - Parameter url: The activity's `webpageURL`.
  /// - Returns: What was done with it.
  @discardableResult
  public func handleUniversalLink(_ url: URL) -> URLDisposition {
    let text = url.absoluteString
    guard let universalLinkPrefix, universalLinkPrefix.contains(urlString: text) else {
      return .notOurs
    }
    guard provider != nil else { return forward(url, to: universalLink) }
    return route(SafepayCallback.parse(text), of: url, to: universalLink)
  }

  /// Reads an auth result from a parsed callback, then hands the URL to `hook` (the payment
  /// hook for `safepay` URLs, the universal-link hook for universal links).
  private func route(
    _ parsed: Result<SafepayCallback, SafepayCallback.ParseFailure>, of url: URL,
    to hook: (@Sendable (URL) -> Void)?
  ) -> URLDisposition {
    guard let provider else { return forward(url, to: hook) }
    let match: CallbackMatch
    switch parsed {
    case .success(let callback) where callback.kind == .payment:
      return forward(url, to: hook)
    case .success(let callback):
      match = provider.deliver(callback)
    case .failure(.malformedAuth):
      match = provider.rejectMalformed()
    case .failure(.unreadable):
      provider.rejectMalformed()
      return forward(url, to: hook)
    }
    hook?(url)
    return .authResult(match)
  }

  private func toPayment(_ url: URL) -> URLDisposition {
    forward(url, to: payment)
  }

  private func forward(_ url: URL, to hook: (@Sendable (URL) -> Void)?) -> URLDisposition {
    guard let hook else { return .unhandled }
    hook(url)
    return .payment
  }
}
