import AuthCoordinator
import Foundation

/// A parsed `safepay` callback URL: the result Alipay hands back when it opens the app again.
///
/// Alipay opens `<app scheme>://safepay/?<percent-encoded JSON>` after a payment and, with the
/// auth_V2 API, after an authorization. The JSON looks like this:
///
/// ```json
/// {"memo": {"result": "success=true&result_code=200&app_id=...&auth_code=...&user_id=2088...
///           &target_id=...", "ResultStatus": "9000", "memo": ""},
///  "requestType": "safepay"}
/// ```
///
/// The parser is liberal in what it reads and strict in what completes a request:
/// - the JSON may be the whole query or the value of any query item; `memo` may be an object or
///   a JSON string; a flat object with `ResultStatus` and `result` at the top is read too;
/// - values in `result` may be quoted (`auth_code="..."`); the quotes are stripped;
/// - only `ResultStatus` 9000 **and** `result_code=200` **and** a non-empty `auth_code` (and no
///   `success=false`) make ``outcome`` a success.
///
/// A callback is an authorization result (``Kind-swift.enum/auth``) when its `result` carries
/// `auth_code` or `result_code`, or its `requestType` names an auth request; otherwise it is a
/// payment result (``Kind-swift.enum/payment``), which this library forwards untouched.
///
/// Parsing never crashes: garbage, bad percent-encoding, bad JSON and URLs longer than
/// ``maximumURLLength`` throw an ``/AuthCoordinator/AuthCoordinatorError`` with code
/// ``AuthCoordinator/AuthCoordinatorError/Code/invalidCallback``. Neither the errors nor
/// ``description`` ever contain the auth code.
///
/// ```swift
/// let callback = try SafepayCallback(url: url)
/// if callback.kind == .auth, callback.requestID == expectedID {
///   let code = try callback.outcome.get()
/// }
/// ```
public struct SafepayCallback: Sendable, Hashable, CustomStringConvertible,
  CustomDebugStringConvertible
{
  /// What a `safepay` callback reports.
  public enum Kind: String, Sendable, Hashable {
    /// An authorization result (auth_V2).
    case auth
    /// A payment result, for the payment SDK.
    case payment
  }

  /// URLs longer than this many UTF-8 bytes are rejected unread.
  public static let maximumURLLength = 64 * 1024

  /// Whether the callback is an authorization or a payment result.
  public let kind: Kind
  /// `memo.ResultStatus`, if present.
  public let resultStatus: SafepayResultStatus?
  /// `result_code` from the result string, if present (success is `200`).
  public let resultCode: String?
  /// The top-level `requestType`, if present.
  public let requestType: String?
  /// `target_id` from the result string (the auth_V2 request id), if present and non-empty.
  public let targetID: String?
  /// `state` from the result string (the OAuth request id), if present and non-empty.
  public let state: String?
  /// `app_id` from the result string, if present.
  public let appID: String?
  /// `user_id` from the result string, if present.
  public let userID: String?
  /// `memo.memo`, Alipay's human-readable note, if present.
  public let memo: String?
  /// Whether the result string carries a non-empty `auth_code`.
  public var hasAuthCode: Bool { authCodeValue != nil }

  let authCodeValue: String?
  let successFlag: String?

  /// The request id the callback names: `target_id`, or else `state`; `nil` when it names none
  /// or names two different ones (see ``hasConflictingRequestIDs``).
  public var requestID: String? {
    if hasConflictingRequestIDs { return nil }
    return targetID ?? state
  }

  /// Whether `target_id` and `state` are both present and differ: such a callback matches
  /// nothing.
  public var hasConflictingRequestIDs: Bool {
    if let targetID, let state { return targetID != state }
    return false
  }

  /// The result for an authorization: the auth code on success, or the error the status maps
  /// to (see ``SafepayResultStatus``).
  public var outcome: Result<AuthCode, AuthCoordinatorError> {
    guard kind == .auth else {
      return .failure(
        AuthCoordinatorError(.invalidCallback, "a payment result, not an auth result"))
    }
    guard let status = resultStatus else {
      return .failure(AuthCoordinatorError(.invalidCallback, "the callback has no ResultStatus"))
    }
    if let code = status.failureCode {
      return .failure(AuthCoordinatorError(code, "Alipay ResultStatus \(status)\(memoSuffix)"))
    }
    guard resultCode == "200" else {
      let shown = resultCode.map { Self.clip($0) } ?? "none"
      return .failure(
        AuthCoordinatorError(
          .authorizationFailed, "Alipay ResultStatus 9000 but result_code \(shown)\(memoSuffix)"))
    }
    if let successFlag, successFlag.lowercased() != "true" {
      return .failure(
        AuthCoordinatorError(
          .authorizationFailed, "Alipay result says success=\(Self.clip(successFlag))"))
    }
    guard let authCodeValue else {
      return .failure(
        AuthCoordinatorError(.authorizationFailed, "Alipay reported success without an auth_code"))
    }
    return .success(AuthCode(authCodeValue, appID: appID, userID: userID))
  }

  /// A summary without the auth code, such as `SafepayCallback(auth, status: 9000 (success),
  /// result_code: 200, target_id: r1, auth_code: present)`.
  public var description: String {
    var text = "SafepayCallback(\(kind.rawValue)"
    if let resultStatus { text += ", status: \(resultStatus)" }
    if let resultCode { text += ", result_code: \(shown(resultCode))" }
    if let targetID { text += ", target_id: \(shown(targetID))" }
    if let state { text += ", state: \(shown(state))" }
    text += ", auth_code: \(hasAuthCode ? "present" : "absent"))"
    return text
  }

  /// The same as ``description``.
  public var debugDescription: String { description }

  /// A field's value as the description shows it: clipped, and with the auth code cut out, since
  /// a forged or garbled callback can repeat the code inside another field.
  private func shown(_ value: String) -> String {
    let clipped = Self.clip(value)
    guard let code = authCodeValue, !code.isEmpty, clipped.contains(code) else { return clipped }
    return clipped.replacingOccurrences(of: code, with: "<redacted>")
  }

  private var memoSuffix: String {
    guard let memo, !memo.isEmpty else { return "" }
    return ": \(Self.clip(memo, to: 120))"
  }

  /// Whether `url`'s host is the `safepay` host: the whole authority is exactly `safepay`
  /// (case-insensitive), with no user info or port. Lookalikes such as `evil-safepay.example`
  /// or `safepay.evil.net` are not (``AlipayCallbackRouter`` still hands those to the payment
  /// hook, but never reads them as auth results).
  ///
  /// - Parameter url: A URL the app was opened with.
  /// - Returns: `true` for a `safepay` callback.
  public static func isSafepay(_ url: URL) -> Bool {
    isSafepayHost(host(of: url.absoluteString))
  }

  /// Parses a `safepay` callback URL.
  ///
  /// - Parameter url: The URL the app was opened with.
  /// - Throws: ``/AuthCoordinator/AuthCoordinatorError`` with code
  ///   ``AuthCoordinator/AuthCoordinatorError/Code/invalidCallback`` when the URL is not a
  ///   `safepay` URL, is too long, or carries no readable result.
  public init(url: URL) throws(AuthCoordinatorError) {
    try self.init(urlString: url.absoluteString)
  }

  /// Parses a `safepay` callback URL given as text (it need not be a valid `URL`: unencoded
  /// JSON in the query is read too).
  ///
  /// - Parameter urlString: The URL text.
  /// - Throws: ``/AuthCoordinator/AuthCoordinatorError`` with code
  ///   ``AuthCoordinator/AuthCoordinatorError/Code/invalidCallback`` when the text is not a
  ///   `safepay` URL, is too long, or carries no readable result.
  public init(urlString: String) throws(AuthCoordinatorError) {
    guard Self.isSafepayHost(Self.host(of: urlString)) else {
      throw Self.invalid("not a safepay URL")
    }
    switch Self.parse(urlString) {
    case .success(let callback): self = callback
    case .failure(.malformedAuth(let message)), .failure(.unreadable(let message)):
      throw Self.invalid(message)
    }
  }

  /// Why a `safepay` URL could not be read.
  enum ParseFailure: Error, Equatable {
    /// Recognisably an auth result, but not a valid one.
    case malformedAuth(String)
    /// Nothing readable: not JSON, bad percent-encoding, too long.
    case unreadable(String)
  }

  /// Parses the text of a URL already known to have a `safepay` host.
  static func parse(_ urlString: String) -> Result<SafepayCallback, ParseFailure> {
    guard urlString.utf8.count <= maximumURLLength else {
      return .failure(.unreadable("the URL is longer than \(maximumURLLength) bytes"))
    }
    guard let query = query(of: urlString), !query.isEmpty else {
      return .failure(.unreadable("the safepay URL has no query"))
    }
    for candidate in payloadCandidates(in: query) {
      guard let object = jsonObject(candidate) else { continue }
      do throws(ParseFailure) {
        if let parsed = try SafepayCallback(payload: object) { return .success(parsed) }
      } catch {
        return .failure(error)
      }
    }
    return .failure(.unreadable("the safepay URL carries no readable result"))
  }

  /// Reads a decoded JSON payload; `nil` when it does not look like a safepay result at all.
  private init?(payload top: [String: Any]) throws(ParseFailure) {
    let memoObject: [String: Any]
    switch top["memo"] {
    case let object as [String: Any]:
      memoObject = object
    case let text as String where Self.jsonObject(Substring(text)) != nil:
      memoObject = Self.jsonObject(Substring(text))!
    default:
      memoObject = top
    }
    let statusText = Self.text(memoObject["ResultStatus"] ?? memoObject["resultStatus"])
    let resultValue = memoObject["result"]
    guard statusText != nil || resultValue != nil else { return nil }

    var fields: [String: String] = [:]
    switch resultValue {
    case let text as String:
      let trimmed = Substring(text).trimmingSpaces()
      if !trimmed.hasPrefix("{") { fields = try Self.keyValues(trimmed) }
    case let object as [String: Any]:
      for (key, value) in object { if let text = Self.text(value) { fields[key] = text } }
    default:
      break
    }

    requestType = Self.text(top["requestType"]).map { Self.clip($0) }
    let authRequestType = requestType.map { $0.lowercased().contains("auth") } ?? false
    let isAuth = fields["auth_code"] != nil || fields["result_code"] != nil || authRequestType
    kind = isAuth ? .auth : .payment
    if isAuth, statusText == nil {
      throw .malformedAuth("the auth result has no ResultStatus")
    }
    resultStatus = statusText.map { SafepayResultStatus(rawValue: $0) }
    memo = Self.text(memoObject["memo"])
    resultCode = fields["result_code"]
    authCodeValue = Self.nonEmpty(fields["auth_code"])
    successFlag = fields["success"]
    targetID = Self.nonEmpty(fields["target_id"])
    state = Self.nonEmpty(fields["state"])
    appID = Self.nonEmpty(fields["app_id"])
    userID = Self.nonEmpty(fields["user_id"])
  }

  // MARK: - Lexing

  /// Keys whose repetition with different values makes the result ambiguous.
  private static let criticalKeys: Set<String> = [
    "auth_code", "result_code", "success", "target_id", "state", "app_id", "user_id",
  ]

  /// Splits `a=1&b="2"` into a dictionary, stripping quotes.
  static func keyValues(_ text: Substring) throws(ParseFailure) -> [String: String] {
    var fields: [String: String] = [:]
    for pair in text.split(separator: "&", omittingEmptySubsequences: true) {
      guard let equals = pair.firstIndex(of: "=") else { continue }
      let key = String(pair[..<equals].trimmingSpaces())
      guard !key.isEmpty else { continue }
      let value = SafepayResultStatus.clean(String(pair[pair.index(after: equals)...]))
      if let existing = fields[key], existing != value, criticalKeys.contains(key) {
        throw .malformedAuth("the result repeats \(key) with different values")
      }
      fields[key] = value
    }
    return fields
  }

  /// The ways the JSON may sit in the query: the whole query, then each item's value.
  static func payloadCandidates(in query: Substring) -> [Substring] {
    var candidates: [Substring] = []
    if let decoded = query.removingPercentEncoding { candidates.append(Substring(decoded)) }
    candidates.append(query)
    for item in query.split(separator: "&") {
      let value = item.firstIndex(of: "=").map { item[item.index(after: $0)...] } ?? item
      if let decoded = value.removingPercentEncoding { candidates.append(Substring(decoded)) }
    }
    return candidates.filter { $0.trimmingSpaces().hasPrefix("{") }
  }

  static func jsonObject(_ text: Substring) -> [String: Any]? {
    let trimmed = text.trimmingSpaces()
    guard trimmed.hasPrefix("{"), let data = String(trimmed).data(using: .utf8) else { return nil }
    return (try? JSONSerialization.jsonObject(with: data)) as? [String: Any]
  }

  /// The authority of a URL text (host, with any user info and port): what follows `scheme://`
  /// up to `/`, `?` or `#`.
  static func host(of urlString: String) -> Substring {
    guard let separator = urlString.range(of: "://") else { return "" }
    let rest = urlString[separator.upperBound...]
    let end = rest.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) ?? rest.endIndex
    return rest[..<end]
  }

  /// Whether an authority is exactly `safepay` (case-insensitive): no other label, no user
  /// info, no port.
  static func isSafepayHost(_ host: Substring) -> Bool {
    host.lowercased() == "safepay"
  }

  /// The raw query: after the first `?`, up to a `#`.
  static func query(of urlString: String) -> Substring? {
    guard let question = urlString.firstIndex(of: "?") else { return nil }
    let rest = urlString[urlString.index(after: question)...]
    return rest[..<(rest.firstIndex(of: "#") ?? rest.endIndex)]
  }

  static func text(_ value: Any?) -> String? {
    switch value {
    case let text as String: return text
    case let number as Int: return String(number)
    case let number as Double
    where number.isFinite && number == number.rounded()
      && abs(number) < 1e15:
      return String(Int(number))
    case let number as NSNumber: return number.stringValue
    default: return nil
    }
  }

  static func nonEmpty(_ value: String?) -> String? {
    guard let value, !value.isEmpty else { return nil }
    return value
  }

  static func clip(_ text: String, to limit: Int = 64) -> String {
    text.count <= limit ? text : String(text.prefix(limit)) + "…"
  }

  static func invalid(_ message: String) -> AuthCoordinatorError {
    AuthCoordinatorError(.invalidCallback, message)
  }
}
