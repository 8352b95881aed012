import AuthCoordinator

/// The `ResultStatus` of a `safepay` callback, as an open, string-backed type.
///
/// Only ``success`` (9000) can complete an authorization, and only together with
/// `result_code=200` and an `auth_code`. Every other status maps to an error code through
/// ``failureCode``; a status this library does not know maps to
/// ``/AuthCoordinator/AuthCoordinatorError/Code-swift.struct/authorizationFailed``.
///
/// | ResultStatus | meaning | error code |
/// |---|---|---|
/// | 9000 | success | none (the result string decides) |
/// | 8000 | processing | `authorization_failed` |
/// | 4000 | failed | `authorization_failed` |
/// | 5000 | duplicate request | `authorization_failed` |
/// | 6001 | the user cancelled | `user_cancelled` |
/// | 6002 | network error | `network_error` |
/// | 6004 | unknown result | `authorization_failed` |
/// | anything else | | `authorization_failed` |
public struct SafepayResultStatus: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
  /// The status as Alipay sent it, such as `9000`.
  public var rawValue: String

  /// Creates a status from its wire value (surrounding spaces and quotes are ignored).
  ///
  /// - Parameter rawValue: The `ResultStatus` value.
  public init(rawValue: String) {
    self.rawValue = SafepayResultStatus.clean(rawValue)
  }

  /// 9000: the request succeeded.
  public static let success = SafepayResultStatus(rawValue: "9000")
  /// 8000: still processing; the final result is unknown.
  public static let processing = SafepayResultStatus(rawValue: "8000")
  /// 4000: the request failed.
  public static let failed = SafepayResultStatus(rawValue: "4000")
  /// 5000: a duplicate request.
  public static let duplicateRequest = SafepayResultStatus(rawValue: "5000")
  /// 6001: the user cancelled.
  public static let userCancelled = SafepayResultStatus(rawValue: "6001")
  /// 6002: a network error.
  public static let networkError = SafepayResultStatus(rawValue: "6002")
  /// 6004: the result is unknown.
  public static let unknown = SafepayResultStatus(rawValue: "6004")

  /// The error code a request fails with on this status, or `nil` for ``success``.
  public var failureCode: AuthCoordinatorError.Code? {
    switch self {
    case .success: return nil
    case .userCancelled: return .userCancelled
    case .networkError: return .networkError
    default: return .authorizationFailed
    }
  }

  /// A short English meaning of the status, for error messages.
  public var meaning: String {
    switch self {
    case .success: return "success"
    case .processing: return "processing"
    case .failed: return "failed"
    case .duplicateRequest: return "duplicate request"
    case .userCancelled: return "user cancelled"
    case .networkError: return "network error"
    case .unknown: return "unknown result"
    default: return "unexpected status"
    }
  }

  /// The status and its meaning, such as `6001 (user cancelled)`.
  public var description: String { "\(rawValue) (\(meaning))" }

  static func clean(_ text: String) -> String {
    var value = Substring(text).trimmingSpaces()
    if value.count >= 2, value.first == "\"", value.last == "\"" {
      value = value.dropFirst().dropLast()
    }
    return String(value)
  }
}

extension Substring {
  /// The substring without leading and trailing spaces, tabs and newlines.
  func trimmingSpaces() -> Substring {
    let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\n" || $0 == "\r" }
    guard let first = firstIndex(where: { !isSpace($0) }) else { return self[endIndex...] }
    let last = lastIndex(where: { !isSpace($0) })!
    return self[first...last]
  }
}
