import AuthCoordinator

// The codes an `OAuth2Authorizer` throws besides the core's `network_error` (a transport failure
// or the request timeout). Stable strings: RFC 6749 §5.2's error codes, and one code for every
// other way the token endpoint can fail.
extension AuthCoordinatorError.Code {
  /// RFC 6749 §5.2 `invalid_request`: the endpoint found the request malformed (a missing or
  /// repeated parameter, say). Terminal: the same request fails again.
  public static let invalidRequest = Self(rawValue: "invalid_request")
  /// RFC 6749 §5.2 `invalid_client`: the client's authentication failed (an unknown client id,
  /// a wrong secret, an unsupported authentication method). Terminal.
  public static let invalidClient = Self(rawValue: "invalid_client")
  /// RFC 6749 §5.2 `invalid_grant`: the refresh token or the authorization code is invalid,
  /// expired, revoked or already used. Terminal.
  public static let invalidGrant = Self(rawValue: "invalid_grant")
  /// RFC 6749 §5.2 `unauthorized_client`: this client may not use this grant type. Terminal.
  public static let unauthorizedClient = Self(rawValue: "unauthorized_client")
  /// RFC 6749 §5.2 `unsupported_grant_type`: the endpoint does not support the grant type.
  /// Terminal.
  public static let unsupportedGrantType = Self(rawValue: "unsupported_grant_type")
  /// RFC 6749 §5.2 `invalid_scope`: the requested scope is invalid, unknown or exceeds what
  /// was granted. Terminal.
  public static let invalidScope = Self(rawValue: "invalid_scope")
  /// The client assertion could not be made: the closure of
  /// ``OAuth2Authorizer/ClientAuthentication/privateKeyJWT(clientID:assertion:)`` (or
  /// ``OAuth2Authorizer/ClientAuthentication/clientAssertion(clientID:type:assertion:)``) threw,
  /// or returned an empty assertion; nothing was sent. Transient when it threw a `URLError`
  /// (the signer could not be reached), terminal otherwise. A server that refuses an assertion
  /// it received answers ``invalidClient`` instead.
  public static let clientAssertionFailed = Self(rawValue: "client_assertion_failed")
  /// The subject token of a token exchange (``OAuth2Authorizer/Grant/tokenExchange(subject:actor:requestedTokenType:)``)
  /// could not be obtained: its ``OAuth2Authorizer/TokenSource`` threw or returned an empty
  /// token, or the key it reads (``OAuth2Authorizer/TokenSource/accessToken(of:from:)``) failed;
  /// nothing was sent. Transient when the source threw a `URLError` or the key's failure was
  /// transient, terminal otherwise. A server that refuses a subject token it received answers
  /// ``invalidGrant`` (or ``invalidRequest``) instead.
  public static let subjectTokenFailed = Self(rawValue: "subject_token_failed")
  /// The actor token of a token exchange could not be obtained, as
  /// ``subjectTokenFailed`` for the subject token.
  public static let actorTokenFailed = Self(rawValue: "actor_token_failed")
  /// A token exchange takes its subject (or actor) token from the key it is authorizing
  /// (``OAuth2Authorizer/TokenSource/accessToken(of:from:)`` with the request's own key): it
  /// would wait for its own flight forever. Refused at once, nothing sent. Terminal: configure
  /// another key.
  public static let tokenExchangeSelfReference = Self(rawValue: "token_exchange_self_reference")
  /// The token endpoint answered a token exchange that asked for a `requested_token_type` with
  /// another `issued_token_type`, or with none (RFC 8693 §2.2.1). The token is not served or
  /// stored. Terminal.
  public static let issuedTokenTypeMismatch = Self(rawValue: "issued_token_type_mismatch")
  /// The assertion of a JWT bearer grant (``OAuth2Authorizer/Grant/jwtBearer(assertion:)``)
  /// could not be made: its closure threw or returned an empty assertion; nothing was sent.
  /// Transient when it threw a `URLError` (the signer could not be reached), terminal
  /// otherwise. A server that refuses an assertion it received answers ``invalidGrant``.
  public static let jwtBearerAssertionFailed = Self(rawValue: "jwt_bearer_assertion_failed")
  /// The revocation endpoint (``OAuth2Authorizer/revocationEndpoint``, RFC 7009) did not
  /// confirm a revocation: a status other than 200 (503 included), an error code RFC 6749 does
  /// not define (`unsupported_token_type`), a redirect, a reply too large. Transient for a 5xx
  /// or 429 status; the coordinator reports it in
  /// ``/AuthCoordinator/AuthEvent/signOutRevocation(key:outcome:)`` and does not retry it.
  public static let revocationEndpointError = Self(rawValue: "revocation_endpoint_error")
  /// The authorization server's metadata (RFC 8414, OpenID Connect discovery) of an authorizer
  /// made from an issuer (``OAuth2Authorizer/issuer``) could not be read or cannot be used; no token request was sent.
  ///
  /// Transient when the metadata request did not get through, ran out of time or was answered
  /// 5xx or 429: the request fails, the coordinator's retries and back-off apply, and the next
  /// request fetches the metadata again. Terminal when the document is wrong: both well-known
  /// locations answered 404 (or another status), a redirect, a reply too large, not a JSON
  /// object, no `token_endpoint`, or an endpoint that is not `https` (allowed only when the
  /// issuer itself is `http` on a loopback address).
  public static let discoveryFailed = Self(rawValue: "discovery_failed")
  /// The metadata's `issuer` is not exactly the configured issuer (RFC 8414 §3.3): the document
  /// may be another server's, and none of its endpoints is used. Terminal.
  public static let issuerMismatch = Self(rawValue: "issuer_mismatch")
  /// The issuer's metadata does not list the client's authentication method in
  /// `token_endpoint_auth_methods_supported` (absent, it means `client_secret_basic` only, RFC
  /// 8414 §2): the authorizer sends nothing the server would refuse. Terminal: configure a
  /// ``OAuth2Authorizer/ClientAuthentication`` the server supports.
  public static let unsupportedClientAuthentication = Self(
    rawValue: "unsupported_client_authentication")
  /// The token endpoint granted less than a mode of ``OAuth2Authorizer/requests`` asked for:
  /// the reply's `scope` lacks a scope of the mode's ``OAuth2Authorizer/TokenRequest/scope``
  /// (the message names the missing ones). The token is not served or stored. Terminal: the
  /// server's policy for this client decides, and asking again gets the same.
  public static let scopeNotGranted = Self(rawValue: "scope_not_granted")
  /// Anything else the token endpoint got wrong: a reply that is not JSON, lacks
  /// `access_token` or has a `token_type` other than `Bearer`, is too large, or redirects; an
  /// error code RFC 6749 does not define; an HTTP error status without one.
  ///
  /// Transient (``AuthCoordinatorError/isTransient``) for an HTTP 5xx or 429 status and for the
  /// error codes `temporarily_unavailable` and `server_error`; terminal otherwise.
  public static let tokenEndpointError = Self(rawValue: "token_endpoint_error")
}
