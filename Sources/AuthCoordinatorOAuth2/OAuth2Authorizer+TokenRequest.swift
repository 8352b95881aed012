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

    /// Creates a request.
    ///
    /// - Parameters:
    ///   - scope: The scope to ask for; none by default.
    ///   - audience: The `audience` to send; none by default.
    ///   - resources: The RFC 8707 resource indicators; none by default.
    ///   - parameters: Extra form parameters; none by default.
    public init(
      scope: String? = nil, audience: String? = nil, resources: [URL] = [],
      parameters: [String: String] = [:]
    ) {
      self.scope = scope
      self.audience = audience
      self.resources = resources
      self.parameters = parameters
    }

    /// `TokenRequest(scope: …, audience: …, resources: […], parameters: [names])`: the
    /// parameters' names only, never their values.
    public var description: String {
      "TokenRequest(scope: \(scope ?? "nil"), audience: \(audience ?? "nil"), "
        + "resources: \(resources.map(\.absoluteString)), parameters: "
        + "\(parameters.keys.sorted()))"
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
  /// own scope and parameters for a mode not in ``requests``. The result has no table.
  func keyed(for mode: AuthMode) -> OAuth2Authorizer {
    var keyed = self
    keyed.requests = [:]
    guard let entry = requests[mode] else { return keyed }
    keyed.keyedRequest = entry
    keyed.scope = entry.scope
    keyed.parameters.merge(entry.parameters) { _, own in own }
    if let audience = entry.audience { keyed.parameters["audience"] = audience }
    if !entry.resources.isEmpty { keyed.parameters["resource"] = nil }
    return keyed
  }
}
