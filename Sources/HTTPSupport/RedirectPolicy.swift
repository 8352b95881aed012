import Foundation

/// Which HTTP redirects a token request follows (the Alipay bridge's `HTTPTokenExchanger`, the
/// OAuth 2 authorizer): by default none.
///
/// A token endpoint answers; it does not redirect. Following a redirect would send the request's
/// headers (a bearer token) and, for a `GET`, the auth code to wherever the `Location` points,
/// and accept that host's reply as the user's model. So every redirect is refused unless the
/// client was asked to allow same-origin HTTPS redirects, and then only a target with the
/// endpoint's scheme, host and port, over `https`, without user info, is followed.
package struct RedirectPolicy: Sendable {
  /// The endpoint the exchange was sent to.
  package let endpoint: URL
  /// Whether a same-origin HTTPS redirect may be followed.
  package let allowsSameOriginHTTPS: Bool

  /// Whether the task may follow a redirect to `target`.
  ///
  /// - Parameter target: The redirect's new URL.
  /// - Returns: `true` only when same-origin HTTPS redirects are allowed, the endpoint and the
  ///   target are both `https`, share host and port, and the target has no user info.
  package func allowsRedirect(to target: URL?) -> Bool {
    guard allowsSameOriginHTTPS, let target else { return false }
    guard target.scheme?.lowercased() == "https", endpoint.scheme?.lowercased() == "https" else {
      return false
    }
    guard target.user == nil, target.password == nil else { return false }
    return Self.sameOrigin(endpoint, target)
  }

  /// Whether two URLs have the same origin: scheme and host (case-insensitive) and port (the
  /// scheme's default port when none is written).
  ///
  /// - Parameters:
  ///   - lhs: A URL.
  ///   - rhs: Another URL.
  /// - Returns: Whether their origins are equal; `false` when either has no scheme or host.
  package static func sameOrigin(_ lhs: URL, _ rhs: URL) -> Bool {
    guard let left = origin(of: lhs), let right = origin(of: rhs) else { return false }
    return left == right
  }

  /// Creates a policy.
  ///
  /// - Parameters:
  ///   - endpoint: The endpoint the request is sent to.
  ///   - allowsSameOriginHTTPS: Whether a same-origin HTTPS redirect may be followed.
  package init(endpoint: URL, allowsSameOriginHTTPS: Bool) {
    self.endpoint = endpoint
    self.allowsSameOriginHTTPS = allowsSameOriginHTTPS
  }

  private struct Origin: Equatable {
    var scheme: String
    var host: String
    var port: Int?
  }

  private static func origin(of url: URL) -> Origin? {
    guard let scheme = url.scheme?.lowercased(), let host = url.host?.lowercased(), !host.isEmpty
    else { return nil }
    let port = url.port ?? defaultPort(scheme)
    return Origin(scheme: scheme, host: host, port: port)
  }

  private static func defaultPort(_ scheme: String) -> Int? {
    switch scheme {
    case "https": return 443
    case "http": return 80
    default: return nil
    }
  }
}
