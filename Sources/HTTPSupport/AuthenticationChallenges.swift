import Foundation

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// How the package answers a URLSession authentication challenge: an HTTP authentication
/// challenge (a 401 or 407 with `WWW-Authenticate: Basic realm="…"`, `Digest`, ...) is declined,
/// so the 401 comes back as the answer it is; any other challenge (server trust, a client
/// certificate) gets the default handling.
///
/// The package never answers a server's request for credentials with credentials of its own:
/// the token request authenticates the client itself (`Authorization: Basic` or the form) and
/// the bearer client sends its token; a 401 means they were refused, and the caller must see it.
///
/// It matters on Linux, where swift-corelibs-foundation raises a challenge for a 401 whose
/// `WWW-Authenticate` holds a `Basic` challenge with a realm (RFC 7617 requires one), and the
/// default handling with no stored credential neither retries nor completes the task: it stalls
/// until a timer ends it (corelibs issue #5456, fixed upstream by #5457 and #5458, not in the
/// toolchains this package supports). Declining the challenge cancels the task; the 401's head
/// and body have arrived by then, and the delegates that decline it hand them on as the reply.
/// swift-package-manager #9945 works around the same defect the same way.
package enum AuthenticationChallenges {
  /// Whether `challenge` asks for HTTP credentials (the server's `WWW-Authenticate` or a
  /// proxy's `Proxy-Authenticate`), as opposed to a TLS trust or client-certificate question.
  ///
  /// - Parameter challenge: The challenge the session raised.
  /// - Returns: `true` for HTTP Basic, Digest, NTLM, Negotiate and the default method.
  package static func isHTTPAuthentication(_ challenge: URLAuthenticationChallenge) -> Bool {
    let method = challenge.protectionSpace.authenticationMethod
    return method == NSURLAuthenticationMethodHTTPBasic
      || method == NSURLAuthenticationMethodHTTPDigest
      || method == NSURLAuthenticationMethodDefault
      || method == NSURLAuthenticationMethodNTLM
      || method == NSURLAuthenticationMethodNegotiate
  }

  /// The answer to `challenge`: cancel an HTTP authentication challenge (the 401 is the
  /// answer), the default handling for anything else.
  ///
  /// - Parameter challenge: The challenge the session raised.
  /// - Returns: The disposition to pass to the session's completion handler.
  package static func disposition(
    for challenge: URLAuthenticationChallenge
  ) -> URLSession.AuthChallengeDisposition {
    isHTTPAuthentication(challenge) ? .cancelAuthenticationChallenge : .performDefaultHandling
  }
}
