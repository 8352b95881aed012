// Minimal stand-ins for the two library types the parser sources mention but the fuzz target
// does not exercise. Keep them in step with Sources/TokenStore/AccountKey.swift and
// Sources/AuthCoordinator/Alipay/AuthCode.swift (only the members used here).

/// Stand-in for `AccountKey` (used by an `AuthCoordinatorError` helper).
public struct AccountKey {
  public var mcUid: String
}

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
