import AuthCoordinator

/// Why ``HTTPTokenExchanger`` could not turn an auth code into a model.
///
/// The exchanger throws an ``/AuthCoordinator/AuthCoordinatorError`` and attaches this value as its
/// ``/AuthCoordinator/AuthCoordinatorError/underlying``. Match on ``code``: codes are stable
/// strings, so a new code is not a breaking change. Two errors are equal when their codes are
/// equal.
///
/// ```swift
/// do {
///   let model = try await exchanger.exchange(code, for: request)
/// } catch let error as AuthCoordinatorError {
///   if let cause = error.underlying as? TokenExchangeError, cause.code == .httpStatus {
///     print("server answered \(cause.statusCode ?? 0)")
///   }
/// }
/// ```
///
/// > Important: No field of this error ever holds the auth code or an access token. The
/// > ``bodyExcerpt`` is cut to ``maxExcerptLength`` characters after the code and every
/// > token-like value in it were replaced by `<redacted>`, and the transport error is kept only as
/// > its `URLError` code (a `URLError` itself carries the request URL, which may hold the code).
public struct TokenExchangeError: Error, Hashable, Sendable, CustomStringConvertible {
  /// A stable, machine-readable reason.
  public struct Code: StableCode {
    /// The code's stable name, such as `http_status`.
    public var rawValue: String
    /// Creates a code from its stable name.
    ///
    /// - Parameter rawValue: The stable name.
    public init(rawValue: String) { self.rawValue = rawValue }

    /// The server answered with a status outside 200...299 (see ``statusCode``).
    public static let httpStatus = Code(rawValue: "http_status")
    /// The reply was not a JSON object, or a field had the wrong type (see ``field``).
    public static let invalidJSON = Code(rawValue: "invalid_json")
    /// A required field (user id or access token) was absent or empty (see ``field``).
    public static let missingField = Code(rawValue: "missing_field")
    /// The reply body was larger than the exchanger's limit; reading stopped at the limit.
    public static let bodyTooLarge = Code(rawValue: "body_too_large")
    /// The request timed out (`URLError.timedOut`).
    public static let timedOut = Code(rawValue: "timed_out")
    /// Any other transport failure (see ``urlErrorCode``).
    public static let transport = Code(rawValue: "transport")
    /// The reply's `mc_user_id` names a different host-app user than the request's key: the
    /// token belongs to someone else and is not returned.
    public static let userMismatch = Code(rawValue: "user_mismatch")
    /// The reply carried Alipay's `error_response` (for example `isv.code-invalid`: the code was
    /// already used or has expired); see ``serverCode``.
    public static let serverRejected = Code(rawValue: "server_rejected")
    /// The token endpoint answered with a redirect (see ``statusCode``), which was not followed:
    /// a token endpoint does not redirect, and following one would send the request's headers
    /// and the auth code to another host. Also thrown when the final reply comes from another
    /// origin than the endpoint.
    public static let redirectRefused = Code(rawValue: "redirect_refused")
  }

  /// The longest ``bodyExcerpt`` kept, in characters.
  public static let maxExcerptLength = 200

  /// Why the exchange failed.
  public var code: Code
  /// The HTTP status of the reply, when one arrived.
  public var statusCode: Int?
  /// The reply field at fault, for ``Code-swift.struct/missingField`` and
  /// ``Code-swift.struct/invalidJSON``, such as `alipay_system_oauth_token_response.user_id`.
  public var field: String?
  /// Alipay's `sub_code` (or `code`) for ``Code-swift.struct/serverRejected``.
  public var serverCode: String?
  /// The `URLError` code for ``Code-swift.struct/transport`` and
  /// ``Code-swift.struct/timedOut`` (its raw value, which is the same on every platform).
  public var urlErrorCode: Int?
  /// The start of the reply body (at most ``maxExcerptLength`` characters) with the auth code
  /// and token values replaced by `<redacted>`, when a body arrived.
  public var bodyExcerpt: String?

  /// Creates an error.
  ///
  /// - Parameters:
  ///   - code: The stable reason.
  ///   - statusCode: The HTTP status, if a reply arrived.
  ///   - field: The field at fault, if any.
  ///   - serverCode: Alipay's error code, if any.
  ///   - urlErrorCode: The `URLError` code's raw value, if any.
  ///   - bodyExcerpt: A redacted excerpt of the body; it is cut to ``maxExcerptLength``.
  public init(
    _ code: Code,
    statusCode: Int? = nil,
    field: String? = nil,
    serverCode: String? = nil,
    urlErrorCode: Int? = nil,
    bodyExcerpt: String? = nil
  ) {
    self.code = code
    self.statusCode = statusCode
    self.field = field
    self.serverCode = serverCode
    self.urlErrorCode = urlErrorCode
    self.bodyExcerpt = bodyExcerpt.map { String($0.prefix(Self.maxExcerptLength)) }
  }

  /// Equal when the codes are equal.
  ///
  /// - Parameters:
  ///   - lhs: An error.
  ///   - rhs: Another error.
  /// - Returns: Whether both have the same ``code``.
  public static func == (lhs: Self, rhs: Self) -> Bool { lhs.code == rhs.code }

  /// Hashes the code.
  ///
  /// - Parameter hasher: The hasher to feed.
  public func hash(into hasher: inout Hasher) { hasher.combine(code) }

  /// `TokenExchangeError(code, status: 500, field: ..., body: "...")`, free of secrets.
  public var description: String {
    var parts = [code.rawValue]
    if let statusCode { parts.append("status: \(statusCode)") }
    if let field { parts.append("field: \(field)") }
    if let serverCode { parts.append("server code: \(serverCode)") }
    if let urlErrorCode { parts.append("URLError: \(urlErrorCode)") }
    if let bodyExcerpt { parts.append("body: \"\(bodyExcerpt)\"") }
    return "TokenExchangeError(\(parts.joined(separator: ", ")))"
  }
}
