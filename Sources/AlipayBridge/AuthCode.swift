import AuthCoordinator

/// A one-time authorization code returned by Alipay, to be exchanged for a token.
///
/// The code is single use: it is never persisted, never logged, and never exchanged twice.
/// Its `description` does not show the code.
public struct AuthCode: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible {
  /// The code itself (`auth_code`).
  public var value: String
  /// The Alipay app id the code was issued for (`app_id`), when the callback carried one.
  public var appID: String?
  /// The Alipay user id (`user_id`), when the callback carried one.
  public var userID: String?

  /// Creates an auth code.
  ///
  /// - Parameters:
  ///   - value: The code.
  ///   - appID: The app id, if known.
  ///   - userID: The Alipay user id, if known.
  public init(_ value: String, appID: String? = nil, userID: String? = nil) {
    self.value = value
    self.appID = appID
    self.userID = userID
  }

  /// `AuthCode(<redacted N bytes>, appID: ...)`.
  public var description: String {
    "AuthCode(<redacted \(value.utf8.count) bytes>\(appID.map { ", appID: \($0)" } ?? ""))"
  }

  /// The same as ``description``.
  public var debugDescription: String { description }
}

extension AuthCode: CustomReflectable {
  /// A reflection that replaces the code, so `dump(code)` does not reveal it.
  public var customMirror: Mirror {
    Mirror(
      self,
      children: [
        "value": "<redacted \(value.utf8.count) bytes>", "appID": appID as Any,
        "userID": userID as Any,
      ],
      displayStyle: .struct)
  }
}
