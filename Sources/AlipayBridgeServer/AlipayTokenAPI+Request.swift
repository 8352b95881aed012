import AuthCoordinator
import Foundation
import HTTPSupport

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

// The request: its parameters, the sign content, the timestamp and the signed form.
extension AlipayTokenAPI {
  /// One call's grant and its secret.
  enum Grant: Sendable {
    /// `grant_type=authorization_code` with this code.
    case authorizationCode(String)
    /// `grant_type=refresh_token` with this refresh token.
    case refreshToken(String)

    /// The `grant_type` value.
    var grantType: String {
      switch self {
      case .authorizationCode: return "authorization_code"
      case .refreshToken: return "refresh_token"
      }
    }

    /// The value that must never be printed.
    var secret: String {
      switch self {
      case .authorizationCode(let code): return code
      case .refreshToken(let token): return token
      }
    }
  }

  /// The request's parameters without `sign`: the common ones and the grant's.
  ///
  /// - Parameters:
  ///   - grant: The grant.
  ///   - date: The time of the request, for `timestamp`.
  /// - Returns: Name and value of each parameter.
  func parameters(_ grant: Grant, at date: Date) -> [String: String] {
    var parameters = [
      "app_id": appID, "method": Self.method, "format": "JSON", "charset": charset,
      "sign_type": signType, "timestamp": Self.timestamp(date), "version": "1.0",
      "grant_type": grant.grantType,
    ]
    switch grant {
    case .authorizationCode(let code): parameters["code"] = code
    case .refreshToken(let token): parameters["refresh_token"] = token
    }
    return parameters
  }

  /// The sign content of a request's parameters, as Alipay's open platform defines it: every
  /// parameter but `sign` and those with an empty value, sorted by name (byte order), each
  /// written `name=value` with the raw value (not URL-encoded), joined with `&`.
  ///
  /// ```swift
  /// AlipayTokenAPI.signContent(["b": "2", "a": "1", "sign": "x", "c": ""])  // "a=1&b=2"
  /// ```
  ///
  /// - Parameter parameters: The request's parameters (`sign` may be among them).
  /// - Returns: The text the signature covers.
  public static func signContent(_ parameters: [String: String]) -> String {
    parameters.filter { $0.key != "sign" && !$0.value.isEmpty }
      .sorted { Array($0.key.utf8).lexicographicallyPrecedes(Array($1.key.utf8)) }
      .map { "\($0.key)=\($0.value)" }.joined(separator: "&")
  }

  /// A request time as the `timestamp` parameter writes it: `yyyy-MM-dd HH:mm:ss` in GMT+8
  /// (Beijing time), whatever the server's own time zone.
  ///
  /// - Parameter date: The time.
  /// - Returns: For example `2026-12-04 18:30:05`.
  public static func timestamp(_ date: Date) -> String {
    let formatter = DateFormatter()
    formatter.locale = Locale(identifier: "en_US_POSIX")
    formatter.calendar = Calendar(identifier: .gregorian)
    formatter.timeZone = TimeZone(secondsFromGMT: 8 * 3600)
    formatter.dateFormat = "yyyy-MM-dd HH:mm:ss"
    return formatter.string(from: date)
  }

  /// The signed `POST` for a grant.
  func makeRequest(_ grant: Grant, at date: Date) async throws -> URLRequest {
    var parameters = parameters(grant, at: date)
    let signature: String
    do {
      signature = try await signer(Self.signContent(parameters))
    } catch let error as URLError {
      throw AuthCoordinatorError(
        .networkError, "the signer did not reach its key service (URLError \(error.code.rawValue))",
        underlying: AlipayTokenAPIError(
          .transient, grantType: grant.grantType, reason: "the signer failed",
          urlErrorCode: error.code))
    } catch is CancellationError {
      throw CancellationError()
    } catch {
      throw AuthCoordinatorError(
        .alipayTokenAPIFailed, "the signer failed; the request was not sent",
        underlying: AlipayTokenAPIError(
          .terminal, grantType: grant.grantType, reason: "the signer failed"),
        transient: false)
    }
    parameters["sign"] = signature
    var request = URLRequest(
      url: gateway, cachePolicy: .reloadIgnoringLocalCacheData,
      timeoutInterval: timeout.seconds)
    request.httpMethod = "POST"
    request.setValue(
      "application/x-www-form-urlencoded;charset=\(charset)", forHTTPHeaderField: "Content-Type")
    request.setValue("application/json", forHTTPHeaderField: "Accept")
    let items = parameters.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
    request.httpBody = Data(FormEncoding.form(items).utf8)
    return request
  }
}
