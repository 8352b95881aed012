import Foundation
import RotatingTokenServer
import Testing
import TokenStore

// Several `auth-worker` processes, each with its own AuthCoordinator, share one FileTokenStore
// file and its FileAuthorizationLease, against a token server that rotates refresh tokens
// (Tests/Support/RotatingTokenServer). What each test proves, what is simulated and the bounds
// are in README.md next to this file.

/// How long past its own timeout a caller may return (scheduling on 2 busy cores), in ms.
private let slack = 500.0

@Suite(.serialized, .timeLimit(.minutes(5)))
struct MultiProcessTests {
  /// 8 processes × 500 concurrent callers on an expired model whose refresh token is valid:
  /// the server sees exactly one authorization, and every caller gets its token.
  @Test func waveOnAnExpiredModelIsOneAuthorization() async throws {
    let rig = try Rig()
    let clock = ContinuousClock()
    do {
      let seeded = try await rig.seed(expired: true)
      let before = try await rig.server.stats()
      let began = clock.now
      let workers = try await rig.start(
        8, "wave", ["--callers", "500", "--timeout-ms", "20000"])
      let results = try await rig.results(workers, within: .seconds(40))
      let after = try await rig.server.stats()
      report("wave: \(clock.now - began); \(after)")
      for result in results { report("wave: \(result)") }

      #expect(after.issued - before.issued == 1, "authorizations at the server: \(after)")
      #expect(after.refreshes - before.refreshes == 1)
      #expect(after.reuses == 0 && after.invalidGrants == 0)
      var served: Set<String> = []
      for result in results {
        #expect(result.served == 500 && result.errors.isEmpty, "\(result)")
        // Far below the lease's default time to live (15 s): nobody waited for it to lapse.
        #expect(result.maxWaitMilliseconds < 5_000, "\(result)")
        served.formUnion(result.tokens.keys)
      }
      #expect(served.count == 1, "distinct tokens served: \(served.count)")
      #expect(!served.contains(seeded.accessToken))
      let stored = try await rig.storedModel()
      #expect(stored.map { served.contains($0.accessToken) } == true)
    } catch {
      await rig.tearDown()
      throw error
    }
    await rig.tearDown()
  }

  /// 8 processes × 50 callers force a refresh rejecting the same token at once: one
  /// authorization, one new token for everyone.
  @Test func forcedRefreshStormIsOneAuthorization() async throws {
    let rig = try Rig()
    let clock = ContinuousClock()
    do {
      let seeded = try await rig.seed(expired: false)
      let before = try await rig.server.stats()
      let began = clock.now
      let workers = try await rig.start(
        8, "storm",
        ["--callers", "50", "--reject", seeded.accessToken, "--timeout-ms", "20000"])
      let results = try await rig.results(workers, within: .seconds(40))
      let after = try await rig.server.stats()
      report("storm: \(clock.now - began); \(after)")
      for result in results { report("storm: \(result)") }

      #expect(after.issued - before.issued == 1, "authorizations at the server: \(after)")
      #expect(after.reuses == 0 && after.invalidGrants == 0)
      var served: Set<String> = []
      for result in results {
        #expect(result.served == 50 && result.errors.isEmpty, "\(result)")
        #expect(result.maxWaitMilliseconds < 5_000, "\(result)")
        served.formUnion(result.tokens.keys)
      }
      #expect(served.count == 1, "distinct tokens served: \(served.count)")
      #expect(!served.contains(seeded.accessToken))
    } catch {
      await rig.tearDown()
      throw error
    }
    await rig.tearDown()
  }

  /// The holder's process exits as soon as its callers are served (a command-line tool, an
  /// extension the system suspends): the other processes still get its token promptly, not
  /// after the lease's time to live (15 s by default) lapsed.
  @Test func aHolderThatExitsOnceServedDoesNotStallTheOthers() async throws {
    let rig = try Rig()
    do {
      try await rig.seed(expired: true)
      // The holder's request takes 300 ms, so the others are surely waiting for it.
      try await rig.server.configure(delay: 0.3)
      let before = try await rig.server.stats()
      let workers = try await rig.start(
        4, "wave", ["--callers", "10", "--timeout-ms", "20000", "--exit-at-once"])
      let results = try await rig.results(workers, within: .seconds(40))
      let after = try await rig.server.stats()
      for result in results { report("exit at once: \(result)") }
      #expect(after.issued - before.issued == 1, "\(after)")
      for result in results {
        #expect(result.served == 10 && result.errors.isEmpty, "\(result)")
        #expect(result.maxWaitMilliseconds < 3_000, "waited for the lease to lapse: \(result)")
      }
    } catch {
      await rig.tearDown()
      throw error
    }
    await rig.tearDown()
  }

  /// 8 processes, 2,000 forced refreshes in all (250 each, each rejecting the token its process
  /// last got): the rotating server never sees a spent refresh token, so no family is revoked.
  /// `MULTIPROCESS_FULL=1`: 16,000 calls, at least 2,000 rotations at the server.
  @Test func rotationSoakNeverReusesARefreshToken() async throws {
    let rig = try Rig()
    let clock = ContinuousClock()
    do {
      try await rig.seed(expired: false)
      let began = clock.now
      // MULTIPROCESS_FULL=1: enough calls for at least 2,000 rotations at the server.
      let perWorker = fullRun ? 2_000 : 250
      let workers = try await rig.start(
        8, "soak",
        [
          "--refreshes", "\(perWorker)", "--max-forced", "1000000", "--timeout-ms", "20000",
          "--deadline-ms", fullRun ? "540000" : "60000",
        ])
      let results = try await rig.results(workers, within: .seconds(fullRun ? 600 : 90))
      let after = try await rig.server.stats()
      report("soak: \(clock.now - began); \(after)")
      for result in results { report("soak: \(result)") }

      #expect(after.reuses == 0, "\(after)")
      #expect(after.revokedFamilies == 0)
      #expect(after.invalidGrants == 0)
      #expect(after.families == 1, "a refused refresh would have needed a new login")
      #expect(after.refreshes >= (fullRun ? 2_000 : 1))
      #expect(results.map(\.served).reduce(0, +) == 8 * perWorker)
      for result in results { #expect(result.errors.isEmpty, "\(result)") }
    } catch {
      await rig.tearDown()
      throw error
    }
    await rig.tearDown()
  }

  /// The soak's negative control: without the lease, processes that refresh at once spend one
  /// refresh token twice, and the server revokes the family. Shows the soak can fail.
  @Test func withoutTheLeaseTheSoakReusesRefreshTokens() async throws {
    let rig = try Rig()
    do {
      try await rig.seed(expired: false)
      let workers = try await rig.start(
        4, "soak",
        ["--refreshes", "50", "--max-forced", "1000000", "--timeout-ms", "5000", "--no-lease"])
      let results = try await rig.results(workers, within: .seconds(60))
      let after = try await rig.server.stats()
      report("soak without lease: \(after)")
      #expect(after.reuses >= 1, "\(after); \(results)")
    } catch {
      await rig.tearDown()
      throw error
    }
    await rig.tearDown()
  }

  /// Kills the lease holder with SIGKILL while the server holds its refresh request, again and
  /// again: after each kill another process takes over once the lease's time to live passed and
  /// refreshes with the same refresh token (the server did not rotate: the request was
  /// aborted), no caller waits past its own deadline, and the store file always validates.
  ///
  /// `swift test` runs 6 kills; `MULTIPROCESS_FULL=1` runs 50.
  ///
  /// The kill must land while the server holds the request: a holder killed after the server
  /// rotated loses the new tokens, and the next holder spends the old refresh token (the
  /// documented limit, Sources/AuthCoordinator/Documentation.docc/SharingOneAuthorizationAcrossProcesses.md). With a 300 ms delay and victims caught in its first
  /// 150 ms, a run beside two busy loops killed one too late: 3 of 4 requests aborted, 1 reuse.
  /// Now the server holds each request 1 s and the test has the second half of it to kill. The
  /// time to live is 1 s (was 400 ms), so that a live holder starved of CPU keeps renewing:
  /// one that misses its renewals for 2/3 of it is taken over while its request is on the wire.
  @Test func killingTheHolderMidAuthorizationHandsOver() async throws {
    let kills = fullRun ? 50 : 6
    let timeToLive = 1_000  // ms
    let serverDelay = 1.0  // s
    let callerTimeout = 8_000  // ms
    let arguments = [
      "--callers", "2", "--max-forced", "1000000", "--lease-ttl-ms", String(timeToLive),
      "--timeout-ms", String(callerTimeout), "--deadline-ms", "300000",
    ]
    let rig = try Rig()
    let clock = ContinuousClock()
    do {
      try await rig.seed(expired: false)
      try await rig.server.configure(delay: serverDelay)
      var pool = try await rig.start(4, "churn", arguments)
      var killed: [WorkerProcess] = []
      var takeovers: [Duration] = []
      var confirmedByLeaseFile = 0
      let began = clock.now
      for kill in 0..<kills {
        // The holder: the process whose refresh the server holds, caught early in the delay.
        var victim: WorkerProcess?
        let found =
          try await rig.server.stats(within: .seconds(10)) { stats in
            victim =
              stats.inFlightRequests
              .filter { $0.ageMilliseconds < serverDelay * 1000 / 2 }
              .compactMap { request in pool.first { $0.pid == request.pid } }
              .first
            return victim != nil
          } != nil
        if !found { report("kill \(kill): \(try await rig.server.stats())") }
        try #require(found, "kill \(kill): no holder caught mid-request")
        // The lease file names the same process as the holder (owner "<pid>-...").
        let leaseFile = try? String(contentsOf: rig.leaseURL, encoding: .utf8)
        if leaseFile?.contains("\"\(victim!.pid)-") == true { confirmedByLeaseFile += 1 }
        let before = try await rig.server.stats()
        victim!.kill()
        let killedAt = clock.now
        pool.removeAll { $0 === victim }
        killed.append(victim!)
        await victim!.reap()

        // Another process takes over and completes the refresh.
        let tookOver =
          try await rig.server.stats(within: .seconds(10)) { $0.issued > before.issued } != nil
        if !tookOver { report("kill \(kill): \(try await rig.server.stats())") }
        try #require(tookOver, "kill \(kill): nobody took over")
        takeovers.append(clock.now - killedAt)
        try await FileTokenStore(url: rig.storeURL).validate()
        pool += try await rig.start(1, "churn", arguments)
      }
      let elapsed = clock.now - began
      for process in pool { process.send("quit") }
      let results = try await rig.results(pool, within: .seconds(20))
      let after = try await rig.server.stats()
      report(
        "kill: \(kills) kills in \(elapsed), \(confirmedByLeaseFile) holders confirmed by the "
          + "lease file; takeovers \(takeovers); \(after)")
      for result in results { report("kill: \(result)") }

      #expect(after.aborted >= kills, "\(after)")
      #expect(confirmedByLeaseFile == kills, "the lease file named the killed holder")
      #expect(after.reuses == 0 && after.revokedFamilies == 0 && after.invalidGrants == 0)
      #expect(after.families == 1)
      // A takeover is the lease's time to live, the server's delay (it holds the new holder's
      // request too) and scheduling. The median stays within 0.5 s of those two; the longest
      // only within 4 s: on CI's loaded 2-core machine one of 50 took 2.508 s against a bound
      // of 2.5 s on the longest, which is scheduling, not the lease (a missed wake-up would cost
      // a whole time to live on every takeover, which the median catches).
      let sorted = takeovers.sorted()
      let median = sorted.isEmpty ? .zero : sorted[sorted.count / 2]
      let expected = Duration.milliseconds(timeToLive) + .seconds(serverDelay)
      #expect(median < expected + .milliseconds(500), "takeovers: \(takeovers)")
      #expect((sorted.last ?? .zero) < expected + .seconds(4), "takeovers: \(takeovers)")
      for result in results {
        #expect(result.errors.isEmpty, "\(result)")
        #expect(result.maxWaitMilliseconds <= Double(callerTimeout) + slack, "\(result)")
      }
      // Every call the killed processes finished before their death was within its deadline.
      for process in killed {
        for line in process.lines where line.hasPrefix("served ") || line.hasPrefix("error ") {
          let fields = line.split(separator: " ")
          let waited = Double(fields[2]) ?? .infinity
          #expect(waited <= Double(callerTimeout) + slack, "\(process.pid): \(line)")
          #expect(line.hasPrefix("served "), "\(process.pid): \(line)")
        }
      }
      try await FileTokenStore(url: rig.storeURL).validate()
    } catch {
      await rig.tearDown()
      throw error
    }
    await rig.tearDown()
  }

  /// One process logs the user out while three others serve the user's model every 5 ms: after
  /// at most 2 s from the end of the logout call, none of them serves the old model again.
  ///
  /// Twice: with no lease file yet (the stored model was valid, nobody took the lease: the
  /// logout creates the file), and after a refresh went through the lease (the model was
  /// expired: the file exists before the logout).
  @Test(arguments: [false, true])
  func logoutInOneProcessStopsTheOthersServingTheOldModel(leaseUsedBefore: Bool) async throws {
    let bound = 2_000  // ms
    let rig = try Rig()
    do {
      let seeded = try await rig.seed(expired: leaseUsedBefore)
      let workers = try await rig.start(4, "serve", ["--interval-ms", "5", "--timeout-ms", "5000"])
      // The model everyone serves: the seeded one, or the one a refresh obtained.
      let first = try #require(
        await workers[0].line(within: .seconds(10)) { $0.hasPrefix("served ") },
        "\(workers[0].pid) never served: \(workers[0].lines.suffix(5))")
      let old = String(try #require(first.split(separator: " ").last))
      #expect(leaseUsedBefore || old == seeded.accessToken)
      for process in workers {
        let serving = await process.line(within: .seconds(10)) {
          $0.hasPrefix("served ") && $0.hasSuffix(" " + old)
        }
        try #require(serving != nil, "\(process.pid) never served: \(process.lines.suffix(5))")
      }
      let leaseFileBefore = FileManager.default.fileExists(
        atPath: rig.leaseURL.path(percentEncoded: false))
      #expect(leaseFileBefore == leaseUsedBefore)
      workers[0].send("logout")
      let loggedOut = try #require(
        await workers[0].line(within: .seconds(10)) { $0.hasPrefix("logged-out ") },
        "no logout: \(workers[0].lines.suffix(5))")
      let logoutEnded = try #require(Int64(loggedOut.split(separator: " ")[2]))
      // Each other worker goes on serving: wait for its first call that ended past the bound
      // (by the time it printed, so every earlier line is in too).
      for process in workers.dropFirst() {
        let pastTheBound = await process.line(within: .seconds(30)) { line in
          let fields = line.split(separator: " ")
          return fields.count == 3 && fields[0] == "served"
            && (Int64(fields[1]) ?? 0) > logoutEnded + Int64(bound)
        }
        try #require(
          pastTheBound != nil, "\(process.pid) stopped serving: \(process.lines.suffix(5))")
      }
      for process in workers { process.send("quit") }
      let results = try await rig.results(workers, within: .seconds(20))
      for result in results { report("logout: \(result)") }

      for process in workers.dropFirst() {
        var lastOld: Int64 = 0
        var servedAfterBound = 0
        for line in process.lines where line.hasPrefix("served ") {
          let fields = line.split(separator: " ")
          guard fields.count == 3, let time = Int64(fields[1]) else { continue }
          if fields[2] == old { lastOld = max(lastOld, time) }
          if time > logoutEnded + Int64(bound) { servedAfterBound += 1 }
        }
        report("logout: \(process.pid) served the old model until \(lastOld - logoutEnded) ms")
        #expect(
          lastOld <= logoutEnded + Int64(bound),
          "\(process.pid) served the old model \(lastOld - logoutEnded) ms after the logout")
        #expect(servedAfterBound > 0, "\(process.pid) stopped serving")
      }
      #expect(try await rig.storedModel()?.accessToken != old)
    } catch {
      await rig.tearDown()
      throw error
    }
    await rig.tearDown()
  }
}
