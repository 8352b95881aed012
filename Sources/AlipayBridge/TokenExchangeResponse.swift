import AuthCoordinator
import Foundation
import HTTPSupport

/// The fields ``HTTPTokenExchanger`` reads from the integrator server's reply.
///
/// Accepted shapes, tried in this order:
/// 1. Alipay's envelope, as `alipay.system.oauth.token` answers and the vendor demo reads it:
///    `{"alipay_system_oauth_token_response": {"user_id", "access_token", "expires_in",
///    "mc_user_id"}}` (`mc_user_id` is also accepted next to the envelope).
/// 2. Alipay's error envelope `{"error_response": {"code", "sub_code", ...}}`: a rejection.
/// 3. A flat object, each field camelCase or snake_case: `userId`/`user_id`,
///    `accessToken`/`access_token`, `expiresIn`/`expires_in`, `mcUserId`/`mc_user_id`.
///
/// `user_id` may be a string or an integer; `expires_in` a number or a numeric string of seconds.
/// Missing fields are named by their snake_case name, prefixed with the envelope when the reply
/// used it (`alipay_system_oauth_token_response.user_id`).
struct TokenExchangeResponse: Equatable, Sendable {
  /// Why a body could not be decoded.
  struct Failure: Error, Equatable {
    var code: TokenExchangeError.Code
    var field: String?
    var serverCode: String?
  }

  /// The key of Alipay's success envelope.
  static let envelopeKey = "alipay_system_oauth_token_response"
  /// The key of Alipay's error envelope.
  static let errorKey = "error_response"

  /// The Alipay user id.
  var userID: String
  /// The access token.
  var accessToken: String
  /// Seconds until the token expires, when the reply said.
  var expiresIn: TimeInterval?
  /// The host app's user id the server bound the token to, when the reply said.
  var mcUserID: String?

  /// Decodes a reply body.
  ///
  /// - Parameter body: The reply body.
  /// - Returns: The decoded fields.
  /// - Throws: A ``Failure`` with code `invalidJSON`, `missingField` or `serverRejected`.
  static func decode(_ body: Data) throws(Failure) -> TokenExchangeResponse {
    let parsed: Any
    do {
      parsed = try JSONSerialization.jsonObject(with: body, options: [.fragmentsAllowed])
    } catch {
      throw Failure(code: .invalidJSON)
    }
    guard let root = parsed as? [String: Any] else { throw Failure(code: .invalidJSON) }

    if let envelope = root[envelopeKey] {
      guard let object = envelope as? [String: Any] else {
        throw Failure(code: .invalidJSON, field: envelopeKey)
      }
      let prefix = envelopeKey + "."
      var response = try decodeFields(object, prefix: prefix, camelCase: false)
      if response.mcUserID == nil {
        response.mcUserID = try identifier(root, keys: ["mc_user_id"], field: "mc_user_id")
      }
      return response
    }
    if let rejection = root[errorKey] {
      let object = rejection as? [String: Any] ?? [:]
      let serverCode = stringValue(object["sub_code"]) ?? stringValue(object["code"])
      throw Failure(code: .serverRejected, field: errorKey, serverCode: serverCode)
    }
    return try decodeFields(root, prefix: "", camelCase: true)
  }

  private static func decodeFields(
    _ object: [String: Any],
    prefix: String,
    camelCase: Bool
  ) throws(Failure) -> TokenExchangeResponse {
    func keys(_ snake: String, _ camel: String) -> [String] {
      camelCase ? [camel, snake] : [snake]
    }
    guard
      let userID = try identifier(
        object, keys: keys("user_id", "userId"), field: prefix + "user_id")
    else { throw Failure(code: .missingField, field: prefix + "user_id") }
    guard
      let token = try identifier(
        object, keys: keys("access_token", "accessToken"), field: prefix + "access_token")
    else { throw Failure(code: .missingField, field: prefix + "access_token") }
    let expiresIn = try seconds(
      object, keys: keys("expires_in", "expiresIn"), field: prefix + "expires_in")
    let mcUserID = try identifier(
      object, keys: keys("mc_user_id", "mcUserId"), field: prefix + "mc_user_id")
    return TokenExchangeResponse(
      userID: userID, accessToken: token, expiresIn: expiresIn, mcUserID: mcUserID)
  }

  /// The first present key's value as a non-empty string; integers are accepted too.
  private static func identifier(
    _ object: [String: Any],
    keys: [String],
    field: String
  ) throws(Failure) -> String? {
    guard let value = keys.lazy.compactMap({ object[$0] }).first, !(value is NSNull) else {
      return nil
    }
    guard let text = stringValue(value) else { throw Failure(code: .invalidJSON, field: field) }
    let trimmed = text.trimmingCharacters(in: .whitespaces)
    return trimmed.isEmpty ? nil : trimmed
  }

  /// The first present key's value as a non-negative, finite number of seconds.
  private static func seconds(
    _ object: [String: Any],
    keys: [String],
    field: String
  ) throws(Failure) -> TimeInterval? {
    guard let value = keys.lazy.compactMap({ object[$0] }).first, !(value is NSNull) else {
      return nil
    }
    let number: Double?
    if let text = value as? String {
      number = Double(text.trimmingCharacters(in: .whitespaces))
    } else if let numeric = value as? NSNumber, !isBoolean(numeric) {
      number = numeric.doubleValue
    } else {
      number = nil
    }
    guard let number, number.isFinite, number >= 0 else {
      throw Failure(code: .invalidJSON, field: field)
    }
    return number
  }

  /// A string, or an integral number written without a fraction.
  private static func stringValue(_ value: Any?) -> String? {
    if let text = value as? String { return text }
    if let numeric = value as? NSNumber, !isBoolean(numeric) {
      let double = numeric.doubleValue
      guard double.isFinite, double.rounded() == double, abs(double) < 1e18 else { return nil }
      return String(numeric.int64Value)
    }
    return nil
  }

  /// Whether JSONSerialization produced this number from `true` or `false`, not from the
  /// numbers 0 or 1 (which swift-corelibs-foundation also bridges to `Bool`): see `JSONValues`.
  private static func isBoolean(_ number: NSNumber) -> Bool {
    JSONValues.isBoolean(number)
  }
}
