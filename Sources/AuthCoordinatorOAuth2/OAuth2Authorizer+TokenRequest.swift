import AuthCoordinator
import Foundation

extension OAuth2Authorizer {
  /// What the token of one authorization mode is asked for: a scope, an audience, resource
  /// indicators (RFC 8707) and extra form parameters. The authorizer's ``requests`` table maps
  /// a key's ``/AuthCoordinator/AccountKey/mode`` to one.
  ///
  /// ```swift
  /// var authorizer = OAuth2Authorizer(
  ///   tokenEndpoint: tokenURL, clientID: "reports-service", clientSecret: secret)
  /// authorizer.requests = [
  ///   "reports": .init(scope: "reports:read", resources: [URL(string: "https://reports.example.com")!]),
  ///   "billing": .init(scope: "invoices:write", audience: "https://billing.example.com"),
  /// ]
  /// let coordinator = AuthCoordinator(store: store, authorizer: authorizer)
  /// let reports = try await coordinator.authModel(
  ///   for: AccountKey(account: "reports-service", mode: "reports"))
  /// ```
  ///
  /// A grant (client credentials, authorization code) sends all of it; a refresh sends the
  /// `audience`, the `resource`s and the parameters again (RFC 8707 §2.2) but no `scope`
  /// (RFC 6749 §6: the refresh is granted the scope of the grant it continues).
  ///
  /// A reply that grants less than ``scope`` (its `scope` lacks a name asked for) is refused
  /// with ``AuthCoordinatorError/Code-swift.struct/scopeNotGranted``, terminal,
  /// whose message names the missing scopes: a key's token always holds every scope its mode
  /// asks for. A reply without `scope` was granted what was asked (RFC 6749 §5.1).
  ///
  /// A mode may also start its tokens with a grant of its own (``grant``): a token exchange
  /// whose subject is another mode's token of the same coordinator, say.
  public struct TokenRequest: Sendable, Hashable, CustomStringConvertible {
    /// The `scope` of the grant (space-separated names), or `nil` for none. Replaces the
    /// authorizer's ``OAuth2Authorizer/scope`` for this mode.
    public var scope: String?
    /// The `audience` form parameter (as Auth0 and RFC 8693 name it), or `nil` for none.
    public var audience: String?
    /// The RFC 8707 resource indicators: one `resource` form parameter each, absolute URIs
    /// without a fragment, in this order.
    public var resources: [URL]
    /// Extra form parameters, added to the authorizer's ``OAuth2Authorizer/parameters`` (an
    /// entry of the same name wins over the authorizer's; ``audience`` and ``resources`` win
    /// over both).
    public var parameters: [String: String]
    /// The grant that starts this mode's tokens in place of the authorizer's
    /// ``OAuth2Authorizer/primaryGrant``, or `nil` (the default) for that one. An `invalid_grant`
    /// answer to this mode's refresh runs it again when it is silent (any grant but the
    /// authorization code grant), as ``OAuth2Authorizer/fallbackOnInvalidGrant`` does for the
    /// primary grant.
    ///
    /// Give a mode a silent grant: whether the coordinator treats the authorizer as interactive
    /// follows its ``OAuth2Authorizer/primaryGrant`` alone.
    ///
    /// ```swift
    /// authorizer.requests = [
    ///   "orders": .init(
    ///     audience: "https://orders.example.com",
    ///     grant: .tokenExchange(subject: .accessToken(of: serviceKey) { link.coordinator })),
    /// ]
    /// ```
    public var grant: Grant?

    /// Creates a request.
    ///
    /// - Parameters:
    ///   - scope: The scope to ask for; none by default.
    ///   - audience: The `audience` to send; none by default.
    ///   - resources: The RFC 8707 resource indicators; none by default.
    ///   - parameters: Extra form parameters; none by default.
    ///   - grant: The grant that starts the mode's tokens; the authorizer's primary grant by
    ///     default.
    public init(
      scope: String? = nil, audience: String? = nil, resources: [URL] = [],
      parameters: [String: String] = [:], grant: Grant? = nil
    ) {
      self.scope = scope
      self.audience = audience
      self.resources = resources
      self.parameters = parameters
      self.grant = grant
    }

    /// Two requests are equal when they ask for the same scope, audience, resources and
    /// parameters with the same kind of grant (a grant's closures cannot be compared).
    ///
    /// - Parameters:
    ///   - lhs: A request.
    ///   - rhs: Another request.
    /// - Returns: Whether they are equal.
    public static func == (lhs: TokenRequest, rhs: TokenRequest) -> Bool {
      lhs.scope == rhs.scope && lhs.audience == rhs.audience && lhs.resources == rhs.resources
        && lhs.parameters == rhs.parameters && lhs.grant?.description == rhs.grant?.description
    }

    /// Hashes what ``==(_:_:)`` compares.
    ///
    /// - Parameter hasher: The hasher.
    public func hash(into hasher: inout Hasher) {
      hasher.combine(scope)
      hasher.combine(audience)
      hasher.combine(resources)
      hasher.combine(parameters)
      hasher.combine(grant?.description)
    }

    /// `TokenRequest(scope: …, audience: …, resources: […], parameters: [names], grant: …)`:
    /// the parameters' names only, never their values, and the grant's kind.
    public var description: String {
      "TokenRequest(scope: \(scope ?? "nil"), audience: \(audience ?? "nil"), "
        + "resources: \(resources.map(\.absoluteString)), parameters: "
        + "\(parameters.keys.sorted()), grant: \(grant?.description ?? "nil"))"
    }

    /// The scope names asked for that `granted` (a reply's space-separated `scope`) lacks, in
    /// the order asked.
    func missingScopes(granted: String) -> [String] {
      let names = Set(granted.split(separator: " ").map(String.init))
      return (scope ?? "").split(separator: " ").map(String.init).filter { !names.contains($0) }
    }
  }

  /// This authorizer asking for `mode`'s ``TokenRequest``: its scope, its parameters (the
  /// audience among them) and its resources in place of the authorizer's own; the authorizer's
  /// own scope and parameters for a mode not in ``requests``; the mode's grant, if it has one,
  /// as the primary grant. The result has no table.
  func keyed(for mode: AuthMode) -> OAuth2Authorizer {
    var keyed = self
    keyed.requests = [:]
    guard let entry = requests[mode] else { return keyed }
    keyed.keyedRequest = entry
    keyed.scope = entry.scope
    keyed.parameters.merge(entry.parameters) { _, own in own }
    if let audience = entry.audience { keyed.parameters["audience"] = audience }
    if !entry.resources.isEmpty { keyed.parameters["resource"] = nil }
    if let grant = entry.grant {
      keyed.primaryGrant = grant
      keyed.fallbackOnInvalidGrant = !grant.isInteractive
    }
    return keyed
  }
}
