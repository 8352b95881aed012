import AuthCoordinator
import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

@testable import AuthCoordinatorPostgreSQL

/// The server restarted (`pg_ctl restart -m immediate`: every connection dropped, as in a
/// crash) under a serving replica. Runs only when asked to (`AUTHCOORD_PG_RESTART_TESTS=1`,
/// with nothing else on the server: .ci/run runs it on its own), since a restart breaks the
/// connections of every other test.
@Suite(
  "Server restart",
  .enabled(
    if: TestServer.isAvailable
      && ProcessInfo.processInfo.environment["AUTHCOORD_PG_RESTART_TESTS"] == "1"),
  .timeLimit(.minutes(3)))
struct ServerRestartTests {
  @Test(
    "hits are served through a restart; refreshes fail clearly by their deadline or succeed after reconnecting; nothing is lost"
  )
  func restartUnderAReplica() async throws {
    let restart = try #require(ProcessInfo.processInfo.environment["AUTHCOORD_PG_RESTART"])
    let schema = TestServer.freshSchema()
    let issuer = SimulatedIssuer(delay: .zero)
    let replica = try await FleetCoordinatorTests.replicas(
      1, schema: schema, issuer: issuer, maxForcedAuthorizations: 1_000)[0]
    defer { replica.database.close() }
    let key = AccountKey(account: "erin")
    let cached = try await replica.coordinator.authModel(for: key)

    try await Self.shell(restart)
    for _ in 0..<100 { #expect(try await replica.coordinator.authModel(for: key) == cached) }

    // Each forced refresh either succeeds or fails with an error by its 3 s deadline (plus the
    // time the coordinator takes to answer); the pool reconnects with back-off meanwhile.
    var latest = cached
    var failures: [String] = []
    for _ in 0..<10 {
      let started = ContinuousClock.now
      do {
        latest = try await replica.coordinator.authModel(
          for: key, refresh: .force(rejecting: latest.accessToken), timeout: .seconds(3))
        break
      } catch {
        failures.append("\(error)")
        #expect(started.duration(to: .now) < .seconds(5), "waited past the deadline: \(error)")
      }
    }
    #expect(latest != cached, "no refresh succeeded after the restart: \(failures)")
    #expect(failures.allSatisfy { !$0.contains("RT-") && !$0.contains("AT-") })

    // Another replica (a new database handle) reads what this one stored last.
    let reader = try await TestServer.database(schema: schema)
    defer { reader.close() }
    #expect(try await PostgresTokenStore(database: reader).model(for: key) == latest)
    #expect(issuer.reuses == 0)
  }

  /// Runs a shell command with system(3) on a thread of its own (Foundation's `Process` did
  /// not report the exit of `pg_ctl restart`, whose server keeps running); throws unless it
  /// exits 0.
  static func shell(_ command: String) async throws {
    let status: Int32 = await withCheckedContinuation { continuation in
      Thread { continuation.resume(returning: system(command + " >/dev/null 2>&1")) }.start()
    }
    try #require(status == 0, "\(command) exited \(status)")
  }
}
