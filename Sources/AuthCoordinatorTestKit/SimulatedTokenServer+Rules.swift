import AuthCoordinator
import Foundation

// The SIMULATED token server's state and its rules: what each grant (client credentials, refresh
// with rotation and reuse detection, token exchange, JWT bearer) does to it, decided on arrival.
// The tokens and their rotation are the shared `RotatingTokenIssuer`'s.
extension SimulatedTokenServer {
  struct State {
    var acceptedSubjectTokens: Set<String> = []
    var assertionValidator: @Sendable (String) -> Bool = { !$0.isEmpty }
    var issuedTokenTypeOverride: String?
    var usedAssertions: Set<String> = []
    var assertions: [String] = []
    var exchanges: [TokenExchangeRecord] = []
    var outage: Outage?
    var delay: Duration
    var statesAbsoluteExpiry = false
    var counters = Counters()
    /// The rotation rules, shared with every simulated server here.
    var issuer = RotatingTokenIssuer()
  }

  /// What one token request did, decided on arrival.
  enum Answer {
    case tokens(
      access: String, refresh: String, family: String, grant: String,
      extra: [String: String] = [:])
    case error(status: Int, code: String, description: String)
    case outage(Outage)
  }

  /// Applies a token request to the server's state (on arrival, under its lock).
  static func apply(
    _ form: [String: String], to state: inout State, date: Date, lifetime: Duration
  ) -> Answer {
    func family(_ issued: RotatingTokenIssuer.Issued) -> String {
      "new token family #\(issued.family)"
    }
    func invalidGrant(_ description: String) -> Answer {
      state.counters.invalidGrants += 1
      return .error(status: 400, code: "invalid_grant", description: description)
    }
    switch form["grant_type"] {
    case "client_credentials":
      state.counters.clientCredentialsGrants += 1
      let issued = state.issuer.startFamily(at: date, lifetime: lifetime)
      return .tokens(
        access: issued.accessToken, refresh: issued.refreshToken, family: family(issued),
        grant: "client_credentials")
    case "refresh_token":
      let reuses = state.issuer.counters.reuses
      switch state.issuer.rotate(form["refresh_token"] ?? "", at: date, lifetime: lifetime) {
      case .failure(let refusal):
        if state.issuer.counters.reuses > reuses {
          state.counters.reuses += 1
          state.counters.familiesRevoked += 1
        }
        return invalidGrant(refusal.description)
      case .success(let issued):
        state.counters.refreshTokenGrants += 1
        return .tokens(
          access: issued.accessToken, refresh: issued.refreshToken,
          family: "rotated (family #\(issued.family); the old refresh token is spent)",
          grant: "refresh_token")
      }
    case "urn:ietf:params:oauth:grant-type:token-exchange":
      switch exchange(form, state: &state, date: date) {
      case .refused(let answer): return answer
      case .invalid(let description): return invalidGrant(description)
      case .accepted(let extra):
        state.counters.tokenExchangeGrants += 1
        let issued = state.issuer.startFamily(at: date, lifetime: lifetime)
        return .tokens(
          access: issued.accessToken, refresh: issued.refreshToken, family: family(issued),
          grant: "token-exchange", extra: extra)
      }
    case "urn:ietf:params:oauth:grant-type:jwt-bearer":
      guard let assertion = form["assertion"], !assertion.isEmpty else {
        return .error(status: 400, code: "invalid_request", description: "no assertion")
      }
      state.assertions.append(assertion)
      // One-time: the first presentation spends it, whether it was accepted or not.
      guard state.usedAssertions.insert(assertion).inserted else {
        state.counters.replayedAssertions += 1
        return invalidGrant("assertion replayed")
      }
      guard state.assertionValidator(assertion) else { return invalidGrant("assertion refused") }
      state.counters.jwtBearerGrants += 1
      let issued = state.issuer.startFamily(at: date, lifetime: lifetime)
      return .tokens(
        access: issued.accessToken, refresh: issued.refreshToken, family: family(issued),
        grant: "jwt-bearer")
    default:
      return .error(
        status: 400, code: "unsupported_grant_type",
        description: "this server issues client_credentials, refresh_token, token-exchange and "
          + "jwt-bearer grants")
    }
  }

  /// What a token exchange's checks decided.
  enum ExchangeCheck {
    /// Refused with this answer (a malformed request).
    case refused(Answer)
    /// Refused with `invalid_grant` and this description.
    case invalid(String)
    /// Accepted: issue a new family, with these reply fields.
    case accepted([String: String])
  }

  /// Checks a token exchange (RFC 8693 §2.1) on arrival, and records it.
  static func exchange(
    _ form: [String: String], state: inout State, date: Date
  ) -> ExchangeCheck {
    func malformed(_ description: String) -> ExchangeCheck {
      .refused(.error(status: 400, code: "invalid_request", description: description))
    }
    guard let subject = form["subject_token"], !subject.isEmpty else {
      return malformed("no subject_token")
    }
    state.exchanges.append(
      TokenExchangeRecord(
        subjectToken: subject, subjectTokenType: form["subject_token_type"],
        actorToken: form["actor_token"], actorTokenType: form["actor_token_type"],
        requestedTokenType: form["requested_token_type"], scope: form["scope"],
        audience: form["audience"]))
    guard form["subject_token_type"]?.isEmpty == false else {
      return malformed("no subject_token_type")
    }
    if form["actor_token"] != nil, form["actor_token_type"]?.isEmpty != false {
      return malformed("no actor_token_type")
    }
    func accepts(_ token: String) -> Bool {
      state.acceptedSubjectTokens.contains(token) || state.issuer.isLive(token, at: date)
    }
    guard accepts(subject) else { return .invalid("subject token not accepted") }
    if let actor = form["actor_token"], !accepts(actor) {
      return .invalid("actor token not accepted")
    }
    let accessType = "urn:ietf:params:oauth:token-type:access_token"
    let issuedType = state.issuedTokenTypeOverride ?? form["requested_token_type"] ?? accessType
    let bearer = issuedType == accessType || issuedType == "urn:ietf:params:oauth:token-type:jwt"
    return .accepted(["issued_token_type": issuedType, "token_type": bearer ? "Bearer" : "N_A"])
  }
}
