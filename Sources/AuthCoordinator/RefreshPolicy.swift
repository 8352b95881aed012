/// Whether a request accepts the cached model.
public enum RefreshPolicy: Sendable, Hashable {
  /// Serve the cached model while it is valid; authorize otherwise.
  case ifNeeded
  /// A caller's token was rejected (an API answered 401; a mini-program container said
  /// `NeedRefreshToken = YES`): do not serve it again.
  ///
  /// Name the rejected token when you know it. With `nil`, the token cached at the time of the
  /// call is the rejected one (or, on a cold start, the one the store holds).
  case force(rejecting: String?)

  /// Reads a mini-program container's `extendParams` dictionary.
  ///
  /// `NeedRefreshToken`, `needReAuth` and `needOpenAuth` (keys in any case) ask for a refresh
  /// when their value is `true`, a non-zero number, or the string `YES`, `true` or `1` in any case.
  ///
  /// ```swift
  /// let policy = RefreshPolicy(extendParams: ["NeedRefreshToken": "YES"])
  /// // policy == .force(rejecting: nil)
  /// ```
  ///
  /// - Parameters:
  ///   - extendParams: The dictionary the container passed to `authModelForMode:extendParams:`.
  ///   - rejectedToken: The token the app gave the container last time, if it knows it.
  public init(extendParams: [AnyHashable: Any]?, rejectedToken: String? = nil) {
    self = Self.asksForRefresh(extendParams) ? .force(rejecting: rejectedToken) : .ifNeeded
  }

  /// The `extendParams` keys that mean "the token is rejected", lowercased.
  static let refreshKeys: Set<String> = ["needrefreshtoken", "needreauth", "needopenauth"]

  static func asksForRefresh(_ params: [AnyHashable: Any]?) -> Bool {
    guard let params else { return false }
    for (key, value) in params {
      guard let name = key.base as? String, refreshKeys.contains(name.lowercased()) else {
        continue
      }
      if isYes(value) { return true }
    }
    return false
  }

  static func isYes(_ value: Any) -> Bool {
    switch value {
    case let flag as Bool: return flag
    case let number as Int: return number != 0
    case let number as Double: return number != 0
    case let text as String:
      switch text.trimmingCharacters(in: .whitespaces).lowercased() {
      case "yes", "true", "1": return true
      default: return false
      }
    case let text as Substring: return isYes(String(text))
    default:
      // NSNumber and other bridged values on Apple platforms.
      if let described = (value as? CustomStringConvertible)?.description {
        return ["yes", "true", "1"].contains(described.lowercased())
      }
      return false
    }
  }
}

import Foundation
