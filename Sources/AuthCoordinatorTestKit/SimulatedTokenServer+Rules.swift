import AuthCoordinator
import Foundation

// The SIMULATED token server's state and its rules: what each grant (client credentials, refresh
// with rotation and reuse detection, token exchange, JWT bearer) does to it, decided on arrival.
extension SimulatedTokenServer {
  struct AccessRecord {
    let family: Int
    let expiresAt: Date
    var revoked = false
  }

  struct RefreshRecord {
    let family: Int
    var spent = false
  }

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
    var accessTokens: [String: AccessRecord] = [:]
    var refreshTokens: [String: RefreshRecord] = [:]
    var revokedFamilies: Set<Int> = []
    var families = 0
    var issued = 0
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
    func issue(family: Int) -> (String, String) {
      state.issued += 1
      let access = "simulated-access-\(family)-\(state.issued)"
      let refresh = "simulated-refresh-\(family)-\(state.issued)"
      let expiresAt = date.addingTimeInterval(TimeInterval(lifetime.components.seconds))
      state.accessTokens[access] = AccessRecord(family: family, expiresAt: expiresAt)
      state.refreshTokens[refresh] = RefreshRecord(family: family)
      return (access, refresh)
    }
    func invalidGrant(_ description: String) -> Answer {
      state.counters.invalidGrants += 1
      return .error(status: 400, code: "invalid_grant", description: description)
    }
    switch form["grant_type"] {
    case "client_credentials":
      state.counters.clientCredentialsGrants += 1
      state.families += 1
      let (access, refresh) = issue(family: state.families)
      return .tokens(
        access: access, refresh: refresh, family: "new token family #\(state.families)",
        grant: "client_credentials")
    case "refresh_token":
      guard let token = form["refresh_token"], var record = state.refreshTokens[token] else {
        return invalidGrant("unknown refresh token")
      }
      guard !state.revokedFamilies.contains(record.family) else {
        return invalidGrant("token family #\(record.family) is revoked")
      }
      guard !record.spent else {
        // A reuse: someone holds a copy of a spent token. Revoke the whole family.
        state.counters.reuses += 1
        state.counters.familiesRevoked += 1
        state.revokedFamilies.insert(record.family)
        for (key, access) in state.accessTokens where access.family == record.family {
          state.accessTokens[key]?.revoked = true
        }
        return invalidGrant("refresh token reused: token family #\(record.family) revoked")
      }
      record.spent = true
      state.refreshTokens[token] = record
      state.counters.refreshTokenGrants += 1
      let (access, refresh) = issue(family: record.family)
      return .tokens(
        access: access, refresh: refresh,
        family: "rotated (family #\(record.family); the old refresh token is spent)",
        grant: "refresh_token")
    case "urn:ietf:params:oauth:grant-type:token-exchange":
      switch exchange(form, state: &state, date: date) {
      case .refused(let answer): return answer
      case .invalid(let description): return invalidGrant(description)
      case .accepted(let extra):
        state.counters.tokenExchangeGrants += 1
        state.families += 1
        let (access, refresh) = issue(family: state.families)
        return .tokens(
          access: access, refresh: refresh, family: "new token family #\(state.families)",
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
      state.families += 1
      let (access, refresh) = issue(family: state.families)
      return .tokens(
        access: access, refresh: refresh, family: "new token family #\(state.families)",
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
      if state.acceptedSubjectTokens.contains(token) { return true }
      if let access = state.accessTokens[token] {
        return !access.revoked && !state.revokedFamilies.contains(access.family)
          && date < access.expiresAt
      }
      if let refresh = state.refreshTokens[token] {
        return !refresh.spent && !state.revokedFamilies.contains(refresh.family)
      }
      return false
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
