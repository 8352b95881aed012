import AuthCoordinator
import Foundation

extension OAuth2Authorizer {
  /// How the client authenticates at the token endpoint (RFC 6749 §2.3) and at the revocation
  /// endpoint: a client secret in HTTP Basic or in the form, no secret (a public client), or a
  /// client assertion that an integrator's closure signs (RFC 7521 §4.2, RFC 7523 §2.2).
  ///
  /// ```swift
  /// // A secret, in HTTP Basic.
  /// .clientSecretBasic(id: "reports-service", secret: secret)
  /// // A key the package never sees: a KMS, a file, a hardware key signs each assertion.
  /// .privateKeyJWT(clientID: "reports-service") { request in
  ///   try await signer.jwt(
  ///     issuer: request.clientID, subject: request.clientID,
  ///     audience: request.audience.absoluteString, id: request.jti, issuedAt: request.issuedAt)
  /// }
  /// ```
  ///
  /// The three values ``basic``, ``post`` and ``none`` use the authorizer's
  /// ``OAuth2Authorizer/clientID`` and ``OAuth2Authorizer/clientSecret``; the functions carry
  /// their own client id (and secret), which win over the authorizer's.
  ///
  /// An assertion is asked for once per request, never reused: a refresh, the grant that
  /// follows a refused refresh and a revocation each get a fresh one, with a fresh
  /// ``AssertionRequest/jti``. A server that refuses it (`invalid_client`) fails the request
  /// with ``AuthCoordinatorError/Code-swift.struct/invalidClient``, terminal,
  /// and a message that says the client assertion was refused. A closure that throws fails that
  /// request with ``AuthCoordinatorError/Code-swift.struct/clientAssertionFailed``:
  /// transient when it threw a `URLError` (the key service could not be reached), terminal
  /// otherwise; an ``/AuthCoordinator/AuthCoordinatorError`` it throws is passed on as it is.
  ///
  /// > Important: Neither the secret nor an assertion appears in a description, a reflection
  /// > or an error message. The error of a throwing closure keeps only a `URLError`'s code,
  /// > never the thrown error itself, whose description might hold key material.
  public struct ClientAuthentication: Sendable, Equatable, CustomStringConvertible {
    /// The kinds of authentication, with an assertion's type and closure.
    enum Method: Sendable {
      case basic
      case post
      case none
      case assertion(type: String, name: String, make: AssertionProvider)
    }

    /// Makes a client assertion: the integrator's signing closure.
    public typealias AssertionProvider = @Sendable (AssertionRequest) async throws -> String

    /// The `client_assertion_type` of a JWT client assertion (RFC 7523 §2.2):
    /// `urn:ietf:params:oauth:client-assertion-type:jwt-bearer`.
    public static let jwtBearerAssertionType =
      "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

    let method: Method
    /// The client id this authentication carries, or `nil` when it uses the authorizer's
    /// ``OAuth2Authorizer/clientID`` (``basic``, ``post``, ``none``).
    public let clientID: String?
    /// The secret it carries; never printed.
    let secret: String?

    /// HTTP Basic with the authorizer's client id and secret:
    /// `Authorization: Basic base64(urlencode(id):urlencode(secret))`, the id and the secret
    /// each form-urlencoded first (RFC 6749 §2.3.1). A missing secret is sent as an empty one.
    public static let basic = Self(method: .basic, clientID: nil, secret: nil)
    /// `client_id` and `client_secret` in the request body, from the authorizer (RFC 6749
    /// §2.3.1's alternative). A missing secret is sent as an empty one.
    public static let post = Self(method: .post, clientID: nil, secret: nil)
    /// A public client: the authorizer's `client_id` in the body, no secret (RFC 6749 §2.1,
    /// §3.2.1).
    public static let none = Self(method: .none, clientID: nil, secret: nil)

    /// HTTP Basic with this id and secret (`client_secret_basic`, RFC 6749 §2.3.1): each is
    /// form-urlencoded, then the pair is base64-encoded into the `Authorization` header.
    ///
    /// - Parameters:
    ///   - id: The client identifier.
    ///   - secret: The client secret. Never printed.
    /// - Returns: The authentication.
    public static func clientSecretBasic(id: String, secret: String) -> Self {
      Self(method: .basic, clientID: id, secret: secret)
    }

    /// `client_id` and `client_secret` in the form (`client_secret_post`, RFC 6749 §2.3.1).
    ///
    /// - Parameters:
    ///   - id: The client identifier.
    ///   - secret: The client secret. Never printed.
    /// - Returns: The authentication.
    public static func clientSecretPost(id: String, secret: String) -> Self {
      Self(method: .post, clientID: id, secret: secret)
    }

    /// A public client (`none`): `client_id` in the form, no secret.
    ///
    /// - Parameter clientID: The client identifier.
    /// - Returns: The authentication.
    public static func none(clientID: String) -> Self {
      Self(method: .none, clientID: clientID, secret: nil)
    }

    /// A JWT signed by the client's private key (`private_key_jwt`, RFC 7523 §2.2): each
    /// request carries `client_id`, `client_assertion_type=`
    /// `urn:ietf:params:oauth:client-assertion-type:jwt-bearer` and
    /// `client_assertion=<the closure's result>`.
    ///
    /// The closure signs; this package holds no key and does no cryptography. It gets the
    /// audience (the token endpoint), a unique `jti` and the time to put in the JWT, and is
    /// called for every request (a fresh assertion each time). A workload identity (a
    /// Kubernetes service-account token, a SPIFFE JWT-SVID) is read from its file here.
    ///
    /// - Parameters:
    ///   - clientID: The client identifier (the JWT's `iss` and `sub`).
    ///   - assertion: Makes the signed JWT for one request. Throw a `URLError` when the
    ///     signer could not be reached (the request fails transiently), anything else to fail
    ///     it terminally.
    /// - Returns: The authentication.
    public static func privateKeyJWT(
      clientID: String, assertion: @escaping AssertionProvider
    ) -> Self {
      Self(
        method: .assertion(type: jwtBearerAssertionType, name: "private_key_jwt", make: assertion),
        clientID: clientID, secret: nil)
    }

    /// A client assertion of any type (RFC 7521 §4.2): each request carries `client_id`,
    /// `client_assertion_type=<type>` and `client_assertion=<the closure's result>`.
    ///
    /// - Parameters:
    ///   - clientID: The client identifier.
    ///   - type: The `client_assertion_type`; ``jwtBearerAssertionType`` for a JWT.
    ///   - assertion: Makes the assertion for one request, as in
    ///     ``privateKeyJWT(clientID:assertion:)``.
    /// - Returns: The authentication.
    public static func clientAssertion(
      clientID: String, type: String = jwtBearerAssertionType,
      assertion: @escaping AssertionProvider
    ) -> Self {
      Self(
        method: .assertion(type: type, name: "client_assertion", make: assertion),
        clientID: clientID, secret: nil)
    }

    /// The method's short name: `basic`, `post`, `none`, `private_key_jwt` or
    /// `client_assertion`.
    public var rawValue: String {
      switch method {
      case .basic: return "basic"
      case .post: return "post"
      case .none: return "none"
      case .assertion(_, let name, _): return name
      }
    }

    /// Whether the client authenticates with an assertion.
    var isAssertion: Bool {
      if case .assertion = method { return true }
      return false
    }

    /// The method's name, the client id when it carries one, whether it carries a secret
    /// (never the secret): `clientSecretBasic(id: svc, secret: <redacted>)`, `basic`.
    public var description: String {
      guard let clientID else { return rawValue }
      switch method {
      case .basic: return "clientSecretBasic(id: \(clientID), secret: <redacted>)"
      case .post: return "clientSecretPost(id: \(clientID), secret: <redacted>)"
      case .none: return "none(clientID: \(clientID))"
      case .assertion(let type, let name, _):
        return "\(name)(clientID: \(clientID), type: \(type))"
      }
    }

    /// Equal when the method, the client id and the secret are; two assertion authentications
    /// with the same client id and type are equal whatever their closures.
    ///
    /// - Parameters:
    ///   - lhs: An authentication.
    ///   - rhs: Another.
    /// - Returns: Whether they authenticate the same way.
    public static func == (lhs: Self, rhs: Self) -> Bool {
      guard lhs.clientID == rhs.clientID, lhs.secret == rhs.secret else { return false }
      switch (lhs.method, rhs.method) {
      case (.basic, .basic), (.post, .post), (.none, .none): return true
      case (.assertion(let left, let leftName, _), .assertion(let right, let rightName, _)):
        return left == right && leftName == rightName
      default: return false
      }
    }
  }

  /// What a client-assertion closure gets to sign one request
  /// (``ClientAuthentication/privateKeyJWT(clientID:assertion:)``).
  public struct AssertionRequest: Sendable, Hashable {
    /// The client identifier: the JWT's `iss` and `sub` (RFC 7523 §3).
    public var clientID: String
    /// The audience: the token endpoint (RFC 7523 §3 `aud`), for a revocation too.
    public var audience: URL
    /// Where this request goes: the token endpoint, or the revocation endpoint.
    public var endpoint: URL
    /// A unique identifier for the JWT's `jti` (a UUID), new for every request.
    public var jti: String
    /// When the request is made, on the authorizer's ``OAuth2Authorizer/now``: the JWT's
    /// `iat` (and the start of its short `exp`).
    public var issuedAt: Date

    /// Creates a request (the authorizer makes them; a test of a signer may too).
    ///
    /// - Parameters:
    ///   - clientID: The client identifier.
    ///   - audience: The token endpoint.
    ///   - endpoint: The endpoint the request goes to.
    ///   - jti: A unique identifier.
    ///   - issuedAt: The time of the request.
    public init(clientID: String, audience: URL, endpoint: URL, jti: String, issuedAt: Date) {
      self.clientID = clientID
      self.audience = audience
      self.endpoint = endpoint
      self.jti = jti
      self.issuedAt = issuedAt
    }
  }

  /// The client id sent: the authentication's own, or ``clientID``.
  var effectiveClientID: String { clientAuthentication.clientID ?? clientID }

  /// The secret sent: the authentication's own, or ``clientSecret``.
  var effectiveClientSecret: String? { clientAuthentication.secret ?? clientSecret }

  /// A fresh client assertion for one request to `endpoint`, or `nil` when the client does
  /// not authenticate with one.
  ///
  /// - Throws: ``AuthCoordinatorError/Code-swift.struct/clientAssertionFailed``
  ///   when the closure throws (transient for a `URLError`); an `AuthCoordinatorError` it
  ///   throws, as it is; `CancellationError`.
  func clientAssertion(for endpoint: URL) async throws -> (type: String, value: String)? {
    guard case .assertion(let type, _, let make) = clientAuthentication.method else { return nil }
    let request = AssertionRequest(
      clientID: effectiveClientID, audience: tokenEndpoint, endpoint: endpoint,
      jti: UUID().uuidString, issuedAt: now())
    let value: String
    do {
      value = try await make(request)
    } catch let error as CancellationError {
      throw error
    } catch let error as AuthCoordinatorError {
      throw error
    } catch let error as URLError {
      // Only the code: the error's user info may carry a URL with credentials.
      throw AuthCoordinatorError(
        .clientAssertionFailed,
        "the client assertion could not be made: its closure failed with URLError "
          + "\(error.code.rawValue)", underlying: URLError(error.code), transient: true)
    } catch {
      // Only the type's name: the error's description might hold key material.
      throw AuthCoordinatorError(
        .clientAssertionFailed,
        "the client assertion could not be made: its closure threw \(Swift.type(of: error))",
        transient: false)
    }
    try Task.checkCancellation()
    guard !value.isEmpty else {
      throw AuthCoordinatorError(
        .clientAssertionFailed, "the client assertion closure returned an empty assertion",
        transient: false)
    }
    return (type, value)
  }
}
