import Foundation
import SyncPrimitives

/// Why the coordinator asks for a new model.
public enum AuthorizationReason: String, Sendable, Hashable, CustomStringConvertible {
  /// Nothing was cached or stored for the key.
  case missing
  /// The cached model expired (or is within the refresh leeway of expiring).
  case expired
  /// A caller rejected the token it was given (an API's 401; a container's `NeedRefreshToken`).
  case forcedRefresh
  /// The cached model is still valid but inside the advisory window of a
  /// ``SilentRefreshPolicy``: a background refresh nobody waits for (yet). The request never
  /// allows interaction; an authorizer that can only involve the user throws (an error with
  /// code ``AuthCoordinatorError/Code-swift.struct/interactionRequired``, say) and the model is
  /// served until the leeway.
  case refreshAhead

  /// The reason's name.
  public var description: String { rawValue }
}

/// One authorization the coordinator asks an ``Authorizer`` for.
public struct AuthorizationRequest: Sendable {
  /// The account to authorize.
  public let key: AccountKey
  /// Why the model is needed.
  public let reason: AuthorizationReason
  /// A unique id for this authorization, fit to be sent as `target_id` or `state` and matched
  /// against the callback: a random UUID, made when first read (a silent authorizer that never
  /// reads it spares the flight a system call), the same on every read.
  public var requestID: String {
    identity.withLock { id in
      if let id { return id }
      let made = UUID().uuidString
      id = made
      return made
    }
  }
  private let identity: LockedState<String?>
  /// The model this authorization replaces, as the store held it when the flight began (or
  /// memory, when the store could not be read): expired, rejected by a forced refresh, or `nil`
  /// when there is none. An authorizer that holds a ``AuthModel/refreshToken`` does a
  /// refresh-token grant with it.
  public let replacing: AuthModel?
  /// Whether the authorizer may involve the user (send them to another app, show a page).
  /// `false` in a coordinator configured with
  /// ``AuthCoordinator/Configuration/allowsInteraction`` off (an app extension): the authorizer
  /// refreshes silently or throws an error with code
  /// ``AuthCoordinatorError/Code-swift.struct/interactionRequired``.
  public let allowsInteraction: Bool

  /// Tells the coordinator that the exchange began (the state machine ignores repeats).
  let exchangeBegan: (@Sendable () -> Void)?
  /// Tells the coordinator that the authorizer is about to involve the user (a
  /// ``SilentFirstAuthorizer`` left its silent stage; the state machine ignores repeats).
  let interactionBegan: (@Sendable () -> Void)?
  /// The coordinator's estimate of the servers' clocks (a request made with the public
  /// initializer has one of its own).
  let serverClock: ServerClockEstimate

  /// How far the server's clock is ahead of this process's (`server − local`, negative when
  /// it is behind), as the coordinator estimates it from the `Date` headers its authorizer
  /// reported (``noteServerDate(_:at:)``); `nil` before any.
  public var serverClockOffset: Duration? { serverClock.offset }

  /// Reports that the server's clock read `serverDate` (its reply's `Date` header) when this
  /// process's read `localDate`: the coordinator keeps a bounded estimate of the offset (the
  /// median of the last five reports, each within ±12 hours), in its statistics
  /// (``AuthCoordinator/Statistics/serverClockOffset``).
  ///
  /// ```swift
  /// if let header = response.value(forHTTPHeaderField: "Date"), let date = parseHTTPDate(header) {
  ///   request.noteServerDate(date, at: Date())
  /// }
  /// ```
  ///
  /// - Parameters:
  ///   - serverDate: The server's time.
  ///   - localDate: This process's wall-clock time when the reply arrived.
  public func noteServerDate(_ serverDate: Date, at localDate: Date) {
    serverClock.note(serverDate: serverDate, localDate: localDate)
  }

  /// `serverDate`, a time on the server's clock (an absolute expiry it stated, such as an
  /// `expires_at` or a JWT's `exp`), on this process's clock: corrected by
  /// ``serverClockOffset``, unchanged when there is no estimate. Never apply it to an expiry
  /// computed here from a relative lifetime (`expires_in`): that one is on this clock already.
  ///
  /// - Parameter serverDate: A date on the server's clock.
  /// - Returns: The same instant on this process's clock.
  public func localDate(forServerDate serverDate: Date) -> Date {
    serverClock.localDate(forServerDate: serverDate)
  }

  /// Creates a request, for calling an authorizer directly (in tests, for example).
  ///
  /// - Parameters:
  ///   - key: The account.
  ///   - reason: Why a model is needed.
  ///   - requestID: A unique id for this authorization.
  ///   - replacing: The model being replaced, if any.
  ///   - allowsInteraction: Whether the user may be involved.
  public init(
    key: AccountKey, reason: AuthorizationReason, requestID: String,
    replacing: AuthModel? = nil, allowsInteraction: Bool = true
  ) {
    self.init(
      key: key, reason: reason, requestID: requestID, replacing: replacing,
      allowsInteraction: allowsInteraction, exchangeBegan: nil,
      serverClock: ServerClockEstimate())
  }

  /// What ``confirmAnotherTokenRequest()`` runs: the coordinator's guard of the flight's
  /// grant, set for a flight that holds a lease.
  var confirmation: (@Sendable () async throws -> Void)?

  init(
    key: AccountKey, reason: AuthorizationReason, requestID: String?, replacing: AuthModel?,
    allowsInteraction: Bool, exchangeBegan: (@Sendable () -> Void)?,
    interactionBegan: (@Sendable () -> Void)? = nil, serverClock: ServerClockEstimate
  ) {
    self.interactionBegan = interactionBegan
    self.serverClock = serverClock
    self.key = key
    self.reason = reason
    self.identity = LockedState(requestID)
    self.replacing = replacing
    self.allowsInteraction = allowsInteraction
    self.exchangeBegan = exchangeBegan
  }

  /// Runs an interactive authorizer's code exchange under the exchange deadline instead of the
  /// authorization one.
  ///
  /// Call it once the authorizer holds what it exchanges (for example, an auth code the user
  /// brought back from another app): from then on the flight is bounded by
  /// ``AuthCoordinator/Configuration/exchangeTimeout`` counted from this call. For a silent
  /// authorizer (``Authorizer/isInteractive`` `false`) it changes nothing: its flight keeps
  /// ``AuthCoordinator/Configuration/authorizationTimeout`` to the end, so a service never moves
  /// to another deadline by calling it.
  ///
  /// ```swift
  /// let code = try await provider.authCode(for: request)
  /// return try await request.exchange { try await exchanger.exchange(code, for: request) }
  /// ```
  ///
  /// - Parameter body: The exchange.
  /// - Returns: What `body` returns.
  /// - Throws: What `body` throws.
  public func exchange<T>(_ body: () async throws -> T) async throws -> T {
    exchangeBegan?()
    return try await body()
  }

  /// Asks the coordinator whether the authorizer may send another token request in this
  /// authorization: call it before a second one (a fallback grant after a refused refresh).
  ///
  /// Under a cross-process lease, the coordinator's guard runs before the first token request
  /// only (rule 16): the flight's grant is renewed, and a token request leaves only with
  /// enough of it left. A first request that took long (a pause, a slow server) may have let
  /// the grant lapse; another process may hold the lease since, or the key back off after a
  /// failure (rules 26 and 29), or the user sign out in another process (rule 19). This runs
  /// the same guard again, and asks the lease whether the grant is still current. Without a
  /// lease, or for a
  /// request made with the public initializer, it returns at once.
  ///
  /// ```swift
  /// } catch let refused as AuthCoordinatorError where refused.code == .invalidGrant {
  ///   try await request.confirmAnotherTokenRequest()   // the grant may have lapsed meanwhile
  ///   return try await login(for: request)
  /// }
  /// ```
  ///
  /// - Throws: An ``AuthCoordinatorError`` with code
  ///   ``AuthCoordinatorError/Code-swift.struct/leaseLost`` (transient) when the flight no
  ///   longer holds its grant, or too little of it for a token request, or
  ///   ``AuthCoordinatorError/Code-swift.struct/signedOut`` when the user signed out in
  ///   another process since the grant was taken.
  public func confirmAnotherTokenRequest() async throws {
    try await confirmation?()
  }

  /// Runs the part of an authorization that involves the user (a bounce to another app, a
  /// consent page), after the authorizer tried without them.
  ///
  /// An authorizer that tries silently first (``Authorizer/announcesInteraction``, as
  /// ``SilentFirstAuthorizer`` does) calls it when its silent stage said the user must act.
  /// Until then, the coordinator treats the flight as a silent one: a transient failure of the
  /// silent stage is retried and remembered as ``SilentRefreshPolicy`` says (so an outage of
  /// the refresh endpoint never sends the user anywhere, and makes one request per back-off
  /// step); from this call on, it is an interactive one (no retries, no remembered failure, the
  /// exchange deadline once the authorizer calls ``exchange(_:)``). Calling it from an
  /// authorizer that does not announce interaction changes nothing.
  ///
  /// ```swift
  /// guard request.allowsInteraction else { throw needsUser }
  /// return try await request.interact { try await bounce.authorize(request) }
  /// ```
  ///
  /// - Parameter body: The interactive part.
  /// - Returns: What `body` returns.
  /// - Throws: What `body` throws.
  public func interact<T>(_ body: () async throws -> T) async throws -> T {
    interactionBegan?()
    return try await body()
  }
}
