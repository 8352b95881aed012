import Foundation

/// The one call an app makes from `application(_:open:options:)`: routes a URL to the Inside
/// SDK, the auth-code provider, or the payment SDK.
///
/// | URL | disposition | what happens |
/// |---|---|---|
/// | host has `.inside.com` | ``URLDisposition/accountConnect`` | to the account-connect hook |
/// | `safepay`, auth result | ``URLDisposition/authResult(_:)`` | matched to pending requests |
/// | `safepay`, payment result | ``URLDisposition/payment`` | to the payment hook |
/// | `safepay`, unreadable | ``URLDisposition/payment`` | reported, then to the payment hook |
/// | anything else | ``URLDisposition/notOurs`` | nothing |
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
/// func application(_ app: UIApplication, open url: URL,
///                  options: [UIApplication.OpenURLOptionsKey: Any] = [:]) -> Bool {
///   router.handle(url).isHandled
/// }
/// ```
public final class AlipayCallbackRouter: Sendable {
  private let provider: AlipayAuthCodeProvider
  private let accountConnect: @Sendable (URL) -> Void
  private let payment: @Sendable (URL) -> Void

  /// Creates a router.
  ///
  /// - Parameters:
  ///   - provider: The provider whose pending requests auth results complete.
  ///   - accountConnect: Receives Inside SDK URLs (hosts containing `.inside.com`); pass the
  ///     SDK's URL handler.
  ///   - payment: Receives `safepay` payment results; pass
  ///     `AlipaySDK.defaultService().processOrder(withPaymentResult:standbyCallback:)`.
  public init(
    provider: AlipayAuthCodeProvider,
    accountConnect: @escaping @Sendable (URL) -> Void = { _ in },
    payment: @escaping @Sendable (URL) -> Void = { _ in }
  ) {
    self.provider = provider
    self.accountConnect = accountConnect
    self.payment = payment
  }

  /// Routes one URL the app was opened with. Never crashes, whatever the URL.
  ///
  /// - Parameter url: The URL from `application(_:open:options:)` or `scene(_:openURLContexts:)`.
  /// - Returns: What was done with it.
  @discardableResult
  public func handle(_ url: URL) -> URLDisposition {
    switch SafepayCallback.classify(url.absoluteString) {
    case .notOurs:
      return .notOurs
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
