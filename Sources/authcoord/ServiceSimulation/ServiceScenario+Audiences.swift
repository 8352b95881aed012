import AuthCoordinator
import AuthCoordinatorTestKit
import Foundation

// Phase 6 of `authcoord simulate --service` (issue 37): the service calls two more APIs, each
// with a token of its own audience and scope from the same authorizer (one token request per
// audience, however many requests), then the service signs its client out: every token of the
// account is revoked at the token server (RFC 7009), after the sign-out took effect.
extension ServiceScenario {
  /// The two APIs of phase 6: the key's mode, the `audience` and the `scope` its token asks for.
  static let audiences: [(AuthMode, String, String)] = [
    (AuthMode(rawValue: "orders"), "https://orders.simulated.example", "orders:read"),
    (AuthMode(rawValue: "billing"), "https://billing.simulated.example", "billing:write"),
  ]

  /// Phase 6: a wave split across the two audiences, then a sign-out that revokes, then a wave
  /// that starts a new token family.
  func audiencesAndSignOut() async {
    timeline.log(
      "phase 6, two audiences: \(requests) concurrent requests, half for each of two more APIs "
        + "(one authorizer, a token per audience and scope)")
    let before = tokenServer.counters
    let tally = await withTaskGroup(of: ServiceRequest.Outcome.self) { group in
      for index in 0..<requests {
        let (mode, _, _) = Self.audiences[index % Self.audiences.count]
        let key = AccountKey(account: ServiceSimulation.key.account, mode: mode)
        let coordinator = self.coordinator
        group.addTask {
          do {
            _ = try await coordinator.authModel(for: key)
            return .ok
          } catch let error as AuthCoordinatorError {
            return .failed(error.code.rawValue)
          } catch {
            return .failed("\(type(of: error))")
          }
        }
      }
      var tally = ServiceTally()
      for await outcome in group { tally.add(outcome) }
      return tally
    }
    await clock.world.settled()
    let during = tokenServer.counters.since(before)
    audienceRequests = during.requestsByAudience
    waves.append(Wave(name: "two audiences", tally: tally, server: during, unauthorized: 0))
    timeline.log("done: \(tally.text); token requests per audience: \(audienceText)")
    expect(
      tally.served == requests && during.tokenRequests == Self.audiences.count
        && Self.audiences.allSatisfy { audienceRequests[$0.1] == 1 },
      "two audiences: one token request each, every request served")

    timeline.log("the service signs its client out: every token of the account is revoked")
    let revocationsBefore = tokenServer.counters.revocations
    await coordinator.invalidate(account: ServiceSimulation.key.account)
    await clock.world.settled()  // the revocations run after the sign-out, in the background
    signOutRevocations = tokenServer.counters.revocations - revocationsBefore
    timeline.log("done: \(signOutRevocations) token(s) revoked at the token server")
    expect(
      signOutRevocations == 1 + Self.audiences.count,
      "the sign-out revoked the three tokens of the account, once each")

    let after = await wave("after the sign-out")
    timeline.log("done: \(after.tally.text)")
    expect(
      after.tally.served == requests && after.server.clientCredentialsGrants == 1,
      "after the sign-out: one new token family")
  }

  /// `https://billing.simulated.example 1, https://orders.simulated.example 1`.
  var audienceText: String {
    audienceRequests.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }
      .joined(separator: ", ")
  }
}
