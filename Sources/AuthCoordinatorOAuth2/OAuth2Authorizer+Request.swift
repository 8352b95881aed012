import AuthCoordinator
import Foundation
import HTTPSupport

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// One token request's grant and its secret values.
enum TokenForm: Sendable {
  /// `grant_type=client_credentials`.
  case clientCredentials
  /// `grant_type=refresh_token` with this refresh token.
  case refresh(String)
  /// `grant_type=authorization_code` with this code.
  case authorizationCode(OAuth2Authorizer.AuthorizationCode)
  /// `grant_type=urn:ietf:params:oauth:grant-type:token-exchange` (RFC 8693) with these tokens.
  case tokenExchange(TokenExchangeForm)
  /// `grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer` (RFC 7523 §2.1) with this
  /// assertion.
  case jwtBearer(String)

  /// The grant type's name, as sent.
  var grantType: String {
    switch self {
    case .clientCredentials: return "client_credentials"
    case .refresh: return "refresh_token"
    case .authorizationCode: return "authorization_code"
    case .tokenExchange: return TokenExchangeForm.grantType
    case .jwtBearer: return OAuth2Authorizer.jwtBearerGrantType
    }
  }

  /// The grant's name in messages: the grant type, short for the URN ones.
  var name: String {
    switch self {
    case .tokenExchange: return "token-exchange"
    case .jwtBearer: return "jwt-bearer"
    default: return grantType
    }
  }

  /// What the token endpoint refused when it answers `invalid_grant` to a grant that sends
  /// something the integrator made, for the message; `nil` for the other grants.
  var refusedInput: String? {
    switch self {
    case .tokenExchange(let exchange):
      return exchange.actor == nil ? "the subject token" : "the subject or actor token"
    case .jwtBearer: return "the assertion"
    default: return nil
    }
  }

  /// What the request carries that must never be printed (besides the client secret).
  var secrets: [String] {
    switch self {
    case .clientCredentials: return []
    case .refresh(let token): return [token]
    case .authorizationCode(let code): return [code.code] + (code.codeVerifier.map { [$0] } ?? [])
    case .tokenExchange(let exchange): return exchange.secrets
    case .jwtBearer(let assertion): return [assertion]
    }
  }
}

// The token request: the form (RFC 6749 §4.1.3, §4.4.2, §6) and the client authentication
// (§2.3.1).
extension OAuth2Authorizer {
  /// The form fields in the order they are sent: the extra parameters sorted by name, the
  /// resource indicators of the mode's ``TokenRequest``, then the grant's own fields, then the
  /// client's.
  func formItems(
    _ form: TokenForm, assertion: (type: String, value: String)? = nil
  ) -> [(String, String)] {
    var own: [(String, String)] = [("grant_type", form.grantType)]
    switch form {
    case .clientCredentials:
      if let scope { own.append(("scope", scope)) }
    case .refresh(let token):
      // No `scope`: RFC 6749 §6 grants an omitted scope the original grant's, and refuses
      // one beyond it (`invalid_scope`). Re-sending the configured scope made a grant the
      // server narrowed (asked `read admin`, granted `read`) impossible ever to refresh.
      own.append(("refresh_token", token))
    case .authorizationCode(let code):
      own.append(("code", code.code))
      if let redirectURI = code.redirectURI { own.append(("redirect_uri", redirectURI)) }
      if let verifier = code.codeVerifier { own.append(("code_verifier", verifier)) }
    case .tokenExchange(let exchange):
      if let scope { own.append(("scope", scope)) }
      own += exchange.formItems
    case .jwtBearer(let assertion):
      // RFC 7523 §2.1: the assertion is the grant; `scope` as in any grant (RFC 6749 §3.3).
      if let scope { own.append(("scope", scope)) }
      own.append(("assertion", assertion))
    }
    own += clientFormItems(assertion: assertion)
    let reserved = Set(
      own.map(\.0) + ["client_id", "client_secret", "client_assertion", "client_assertion_type"])
    let extra = parameters.filter { !reserved.contains($0.key) }.sorted { $0.key < $1.key }
      .map { ($0.key, $0.value) }
    // RFC 8707 §2: one `resource` each, on a grant and on a refresh (§2.2) alike.
    let resources = (keyedRequest?.resources ?? []).map { ("resource", $0.absoluteString) }
    return extra + resources + own
  }

  /// The client's own form fields: `client_id` (unless in HTTP Basic), and the secret or the
  /// assertion.
  func clientFormItems(assertion: (type: String, value: String)?) -> [(String, String)] {
    switch clientAuthentication.method {
    case .basic:
      return []
    case .post:
      return [("client_id", effectiveClientID), ("client_secret", effectiveClientSecret ?? "")]
    case .none:
      return [("client_id", effectiveClientID)]
    case .assertion:
      // RFC 7521 §4.2: the assertion authenticates; `client_id` names the client too.
      var items = [("client_id", effectiveClientID)]
      if let assertion {
        items += [("client_assertion_type", assertion.type), ("client_assertion", assertion.value)]
      }
      return items
    }
  }

  /// `Basic base64(urlencode(id):urlencode(secret))`, RFC 6749 §2.3.1.
  var basicCredentials: String {
    let pair =
      FormEncoding.encode(effectiveClientID) + ":"
      + FormEncoding.encode(effectiveClientSecret ?? "")
    return "Basic " + Data(pair.utf8).base64EncodedString()
  }

  /// The HTTP request for one grant, with a fresh client assertion when the client uses one.
  ///
  /// - Parameter form: The grant.
  /// - Returns: A `POST` of the form to ``tokenEndpoint``, and every value in it that must not
  ///   be printed.
  /// - Throws: What ``clientAssertion(for:)`` throws.
  func makeRequest(_ form: TokenForm) async throws -> (URLRequest, secrets: [String]) {
    let assertion = try await clientAssertion(for: tokenEndpoint)
    let request = formRequest(
      to: tokenEndpoint, formItems(form, assertion: assertion), timeout: timeout(for: form))
    return (request, secrets(of: form) + (assertion.map { [$0.value] } ?? []))
  }

  /// A form `POST` to `endpoint`, with the client's HTTP Basic credentials when it uses them.
  func formRequest(to endpoint: URL, _ items: [(String, String)], timeout: Duration) -> URLRequest {
    var request = URLRequest(
      url: endpoint, cachePolicy: .reloadIgnoringLocalCacheData, timeoutInterval: timeout.seconds)
    request.httpMethod = "POST"
    request.setValue(
      "application/x-www-form-urlencoded; charset=utf-8", forHTTPHeaderField: "Content-Type")
    request.setValue("application/json", forHTTPHeaderField: "Accept")
    if case .basic = clientAuthentication.method {
      request.setValue(basicCredentials, forHTTPHeaderField: "Authorization")
    }
    request.httpBody = Data(FormEncoding.form(items).utf8)
    return request
  }

  /// Every value that must not appear in a message: the client secret and the grant's secrets.
  func secrets(of form: TokenForm) -> [String] {
    form.secrets + (effectiveClientSecret.map { [$0] } ?? [])
  }
}
