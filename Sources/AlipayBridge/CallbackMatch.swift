import AuthCoordinator

/// What became of a callback handed to ``AlipayAuthCodeProvider``.
public enum CallbackMatch: Sendable, Hashable {
  /// The callback completed the pending request `requestID` (with an auth code or an error).
  case matched(requestID: String)
  /// The callback completed nothing, for `reason`; the pending requests keep waiting.
  case rejected(reason: BridgeEvent.RejectReason, requestID: String?)

  /// Whether the callback completed a request.
  public var isMatched: Bool {
    if case .matched = self { return true }
    return false
  }
}
