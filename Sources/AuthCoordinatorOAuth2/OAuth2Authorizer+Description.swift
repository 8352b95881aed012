import AuthCoordinator
import Foundation
import HTTPSupport

extension OAuth2Authorizer: CustomStringConvertible, CustomDebugStringConvertible,
  CustomReflectable
{
  /// A summary without secrets: the endpoint with its user info, query values and fragment
  /// replaced by `<redacted>`, the client id, whether there is a secret (never its value), and
  /// the names (not the values) of the extra parameters, such as
  /// `OAuth2Authorizer(tokenEndpoint: https://auth.example.com/token, clientID: svc,
  /// clientSecret: <redacted>, clientAuthentication: basic, ...)`.
  public var description: String {
    let parts = summary.map { "\($0.0): \($0.1)" }
    return "OAuth2Authorizer(\(parts.joined(separator: ", ")))"
  }

  /// The same as ``description``: the secret stays hidden in debug output too.
  public var debugDescription: String { description }

  /// A reflection with the same redactions as ``description``, so `dump(authorizer)` shows no
  /// secret, parameter value or endpoint credential.
  public var customMirror: Mirror {
    Mirror(
      self, children: summary.map { (label: Optional($0.0), value: $0.1 as Any) },
      displayStyle: .struct)
  }

  private var summary: [(String, String)] {
    [
      ("issuer", issuer.map { URLRedaction.redacted($0) } ?? "nil"),
      ("tokenEndpoint", URLRedaction.redacted(tokenEndpoint)),
      ("revocationEndpoint", revocationEndpoint.map { URLRedaction.redacted($0) } ?? "nil"),
      ("clientID", clientID),
      ("clientSecret", clientSecret == nil ? "nil" : "<redacted>"),
      ("clientAuthentication", clientAuthentication.description), ("scope", scope ?? "nil"),
      ("parameters", "\(parameters.keys.sorted())"),
      ("requests", "\(requests.keys.map(\.rawValue).sorted())"),
      ("primaryGrant", primaryGrant.description),
      ("fallbackOnInvalidGrant", "\(fallbackOnInvalidGrant)"), ("userIDField", userIDField),
      ("timeout", "\(timeout)"), ("refreshTimeout", "\(refreshTimeout)"),
      ("maxBodySize", "\(maxBodySize)"),
      ("allowsSameOriginHTTPSRedirects", "\(allowsSameOriginHTTPSRedirects)"),
    ]
  }
}
