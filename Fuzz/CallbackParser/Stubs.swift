// A minimal stand-in for the one bridge type the parser sources mention but the fuzz target does
// not compile. Keep it in step with Sources/AlipayBridge/AuthCode.swift (only the members used
// here). The core's stand-ins are in Core/Stubs.swift.

/// Stand-in for `AuthCode`: the parsers build one on success.
public struct AuthCode: Sendable, Hashable {
  public var value: String
  public var appID: String?
  public var userID: String?

  public init(_ value: String, appID: String? = nil, userID: String? = nil) {
    self.value = value
    self.appID = appID
    self.userID = userID
  }
}
