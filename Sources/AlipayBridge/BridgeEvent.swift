import AuthCoordinator

/// Something the Alipay callback bridge did, for logs and metrics.
///
/// Events never carry an auth code or an access token. Request ids taken from an unmatched
/// callback are clipped to 64 characters.
///
/// ```swift
/// for await event in provider.events {
///   if case .callbackRejected(let reason, _) = event {
///     log.warning("callback rejected: \(reason)")
///   }
/// }
/// ```
public enum BridgeEvent: Sendable, Hashable {
  /// The authorization URL of `requestID` was opened (the user is on the way to Alipay).
  case opened(requestID: String)
  /// The opener could not open the authorization URL of `requestID` (Alipay not installed, or
  /// `alipay`/`alipays` missing from `LSApplicationQueriesSchemes`).
  case openFailed(requestID: String)
  /// A callback matched the pending request `requestID` and completed it.
  case callbackMatched(requestID: String)
  /// A callback completed nothing, for `reason`; `requestID` is the id it named, if any.
  case callbackRejected(reason: RejectReason, requestID: String?)
  /// The app became active again and no callback followed within the grace period: the
  /// pending request `requestID` failed as abandoned.
  case abandonedAfterReturn(requestID: String)

  /// Why a callback completed nothing.
  public enum RejectReason: String, Sendable, Hashable, CustomStringConvertible {
    /// The callback names no request id (no `target_id`, no `state`). Such a callback never
    /// completes a request, even when exactly one is pending.
    case missingRequestID
    /// The callback names `target_id` and `state` with different values.
    case conflictingRequestIDs
    /// The request id matches no pending or recently finished request (forged, or from another
    /// launch of the app).
    case unknownRequestID
    /// The request was already completed by an earlier callback.
    case duplicate
    /// The request had already ended without a callback (cancelled, timed out, abandoned,
    /// failed to open).
    case late
    /// The callback could not be read.
    case malformed

    /// The reason's name.
    public var description: String { rawValue }
  }
}
