import AlipayBridge
import AuthCoordinator
import Foundation

// The platform-neutral code of Sources/AlipayBridge/Documentation.docc/IntegratingInAnIOSApp.md, compiled here so the guide cannot rot.
// Each region between `// snippet: NAME` and `// end-snippet` must appear verbatim in the guide
// under `<!-- snippet: NAME -->` (IntegrationGuideSnippetsTests checks it). The iOS-only parts
// of the guide (UIKit, the mPaaS SDK) cannot be compiled on Linux and are marked there.

// snippet: wiring-inside
/// Everything account connect needs for the vendor guide's Inside SDK flow, built once at launch
/// and kept by the app delegate.
final class InsideAccountConnect: Sendable {
  let provider: InsideAuthCodeProvider
  let router: AlipayCallbackRouter
  let coordinator: AuthCoordinator

  /// - Parameters:
  ///   - storeURL: Where models persist (Application Support, excluded from backups).
  ///   - tokenEndpoint: Your server's endpoint that exchanges an auth code (see "Server side").
  ///   - refreshEndpoint: Your server's endpoint that refreshes the token without the user, or
  ///     answers 401 `authorization_required` (see "Server side"); `nil` bounces the user to
  ///     Alipay at every expiry.
  ///   - containerScheme: The mPaaS container scheme, the guide's `PortalScheme`
  ///     (`ANXAccountOpenAuthModel.scheme`).
  ///   - makeAuthURL: Your auth URL for the signed-in user (`ANXAccountOpenAuthModel.authURL`,
  ///     the guide's "接入方提供 AuthURL").
  ///   - resultCodeKey: The string value of the SDK's `ANXProductConfigResultCodeKey`.
  ///   - resultKey: The string value of the SDK's `ANXProductConfigResultKey`.
  ///   - startInside: Starts `ANXInsideService` with an `ANXAccountOpenAuthModel` built from the
  ///     request and calls the completion from the SDK's completion block (iOS, section 4).
  ///   - appSchemes: Your app's URL schemes (`CFBundleURLTypes`).
  ///   - accountConnectURL: The Inside SDK's URL handler (hosts `<label>.inside.com`).
  ///   - paymentURL: AlipaySDK's `processOrder(withPaymentResult:standbyCallback:)`; receives
  ///     every URL whose host contains `safepay`, as the guide requires.
  ///   - notifySDK: Tells the Inside SDK about a logout or unbind
  ///     (`ANXMCAccountStatusChangeModel`); called after the coordinator cleared the account.
  init(
    storeURL: URL,
    tokenEndpoint: URL,
    refreshEndpoint: URL?,
    containerScheme: String,
    makeAuthURL: @escaping @Sendable (_ mcUid: String) async throws -> String,
    resultCodeKey: String = InsideResult.defaultCodeKey,
    resultKey: String = InsideResult.defaultResultKey,
    startInside: @escaping InsideAuthCodeProvider.Starter,
    appSchemes: Set<String>,
    accountConnectURL: @escaping @Sendable (URL) -> Void = { _ in },
    paymentURL: @escaping @Sendable (URL) -> Void = { _ in },
    notifySDK: @escaping @Sendable (AccountStatusChange) async -> Void
  ) {
    provider = InsideAuthCodeProvider(
      scheme: containerScheme, codeKey: resultCodeKey, resultKey: resultKey,
      authURL: { request in try await makeAuthURL(request.key.mcUid) },
      start: startInside)
    router = AlipayCallbackRouter(
      appSchemes: appSchemes, accountConnect: accountConnectURL, payment: paymentURL)
    let exchanger = HTTPTokenExchanger(endpoint: tokenEndpoint, encoding: .postForm)
    var configuration = AuthCoordinator.Configuration(authorizationTimeout: .seconds(300))
    configuration.maxForcedAuthorizations = 3
    coordinator = AuthCoordinator(
      store: FileTokenStore(url: storeURL),
      authorizer: Self.authorizer(
        AlipayAuthorizer(provider: provider, exchanger: exchanger), refreshEndpoint),
      configuration: configuration,
      onAccountStatusChange: notifySDK)
  }

  /// Your server first (silently), Alipay only when the server says the user must authorize.
  static func authorizer(_ bounce: AlipayAuthorizer, _ refreshEndpoint: URL?) -> any Authorizer {
    guard let refreshEndpoint else { return bounce }
    return SilentFirstAuthorizer(
      silent: HTTPTokenRefresher(endpoint: refreshEndpoint), interactive: bounce)
  }
}
// end-snippet

// snippet: wiring
/// The alternative URL flow (inferred from Alipay's public auth API, not from the vendor guide):
/// the app opens a signed Alipay auth URL itself and reads the `safepay` callback.
final class AccountConnect: Sendable {
  let provider: AlipayAuthCodeProvider
  let router: AlipayCallbackRouter
  let coordinator: AuthCoordinator

  /// - Parameters:
  ///   - storeURL: Where models persist (Application Support, excluded from backups).
  ///   - tokenEndpoint: Your server's endpoint that exchanges an auth code (see "Server side").
  ///   - refreshEndpoint: Your server's endpoint that refreshes the token without the user, or
  ///     answers 401 `authorization_required` (see "Server side"); `nil` bounces the user to
  ///     Alipay at every expiry.
  ///   - signAuthURL: Asks your server for the signed Alipay auth URL carrying `requestID` as
  ///     `target_id` (auth_V2) or `state` (OAuth).
  ///   - open: Opens a URL: `UIApplication.shared.open(url)` on iOS.
  ///   - appSchemes: Your app's URL schemes (`CFBundleURLTypes`), the ones Alipay calls back on;
  ///     auth results on any other scheme are never read.
  ///   - accountConnectURL: The Inside SDK's URL handler (hosts `<label>.inside.com`).
  ///   - paymentURL: AlipaySDK's `processOrder(withPaymentResult:standbyCallback:)`.
  ///   - notifySDK: Tells the Inside SDK about a logout or unbind
  ///     (`ANXMCAccountStatusChangeModel`); called after the coordinator cleared the account.
  init(
    storeURL: URL,
    tokenEndpoint: URL,
    refreshEndpoint: URL?,
    signAuthURL: @escaping @Sendable (_ requestID: String) async throws -> URL,
    open: @escaping @Sendable (URL) async -> Bool,
    appSchemes: Set<String>,
    accountConnectURL: @escaping @Sendable (URL) -> Void = { _ in },
    paymentURL: @escaping @Sendable (URL) -> Void = { _ in },
    notifySDK: @escaping @Sendable (AccountStatusChange) async -> Void
  ) {
    provider = AlipayAuthCodeProvider(
      authURL: { request in try await signAuthURL(request.requestID) },
      open: open)
    router = AlipayCallbackRouter(
      provider: provider, appSchemes: appSchemes, accountConnect: accountConnectURL,
      payment: paymentURL)
    let exchanger = HTTPTokenExchanger(endpoint: tokenEndpoint, encoding: .postForm)
    var configuration = AuthCoordinator.Configuration(authorizationTimeout: .seconds(300))
    configuration.maxForcedAuthorizations = 3
    coordinator = AuthCoordinator(
      store: FileTokenStore(url: storeURL),
      authorizer: InsideAccountConnect.authorizer(
        AlipayAuthorizer(provider: provider, exchanger: exchanger), refreshEndpoint),
      configuration: configuration,
      onAccountStatusChange: notifySDK)
  }
}
// end-snippet

// snippet: container-bridge
/// What the delegate hands the mini-program container.
enum ContainerAnswer: Sendable, Equatable {
  /// Fill `NBIAuthModel.uid`, `.token` and `.extraInfo["mcUid"]` from it.
  case model(AuthModel)
  /// Set `NBIAuthModel.errorMsg` to it.
  case failure(errorMsg: String)
}

/// The platform-neutral half of the `authModelForMode:extendParams:callback:` delegate: one
/// container call in, exactly one answer out, on every path.
final class ContainerAuthBridge: @unchecked Sendable {
  private let coordinator: AuthCoordinator
  private let currentUser: @Sendable () -> String?
  private let lock = NSLock()
  /// The token last handed to the container per account (memory only), so that a
  /// NeedRefreshToken names exactly the token the container rejected.
  private var handedOut: [AccountKey: String] = [:]

  /// - Parameters:
  ///   - coordinator: The app's coordinator.
  ///   - currentUser: The signed-in host-app user id (`mcUid`), or `nil`.
  init(coordinator: AuthCoordinator, currentUser: @escaping @Sendable () -> String?) {
    self.coordinator = coordinator
    self.currentUser = currentUser
  }

  /// Answers one container call; `reply` runs exactly once, on an arbitrary thread.
  func answer(
    mode: AuthMode,
    extendParams: [AnyHashable: Any]?,
    reply: @escaping @Sendable (ContainerAnswer) -> Void
  ) {
    guard let mcUid = currentUser() else {
      let code = AuthCoordinatorError.Code.signedOut.rawValue
      reply(.failure(errorMsg: "\(code): no host-app user is signed in"))
      return
    }
    let key = AccountKey(mcUid: mcUid, mode: mode)
    // Read the container's dictionary now: it is not Sendable.
    let refresh = RefreshPolicy(
      extendParams: extendParams, rejectedToken: lock.withLock { handedOut[key] })
    Task {
      let answer: ContainerAnswer
      do {
        let model = try await coordinator.authModel(for: key, refresh: refresh)
        lock.withLock { handedOut[key] = model.accessToken }
        answer = .model(model)
      } catch {
        answer = .failure(errorMsg: Self.errorMsg(for: error))
      }
      reply(answer)
    }
  }

  /// `errorMsg` for the container: the stable code, then the message (neither holds a secret).
  static func errorMsg(for error: any Error) -> String {
    switch error {
    case let error as AuthCoordinatorError:
      return error.message.isEmpty
        ? error.code.rawValue : "\(error.code.rawValue): \(error.message)"
    case is CancellationError:
      return "cancelled"
    default:
      return AuthCoordinatorError.Code.authorizationFailed.rawValue
    }
  }
}
// end-snippet

// snippet: account-status
/// What both wirings above share.
protocol AccountConnectWiring: Sendable {
  var coordinator: AuthCoordinator { get }
}

extension InsideAccountConnect: AccountConnectWiring {}
extension AccountConnect: AccountConnectWiring {}

extension AccountConnectWiring {
  /// The host app's user logged out. In-flight requests fail with `signed_out`, memory and
  /// store are cleared, then `notifySDK` runs. Call it before showing the login screen.
  func userLoggedOut(mcUid: String) async {
    await coordinator.accountStatusChanged(.logout(mcUid: mcUid))
  }

  /// The user unbound Alipay in the app's settings.
  func userUnboundAlipay(mcUid: String) async {
    await coordinator.accountStatusChanged(.unbind(mcUid: mcUid))
  }

  /// Switching user is a logout of the previous user; the new user's first request bounces
  /// to Alipay (their own key, nothing shared).
  func userSwitched(from previous: String) async {
    await coordinator.accountStatusChanged(.logout(mcUid: previous))
  }
}
// end-snippet
