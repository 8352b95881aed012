import AuthCoordinator
import Foundation

/// Runs B1-B8 (see docs/benchmarks.md) and records every repetition in `Results`.
///
/// Callers are unstructured tasks kept in a preallocated array, never children of one
/// TaskGroup: in Swift 6.3 a group whose many children finish in reverse or random order cleans
/// up in quadratic time (swiftlang/swift#71212), which would make the harness, not the
/// implementation, the bottleneck at 10k-100k waiters. The shared-Task baseline still wakes its
/// waiters in reverse order; that cost is its own. Only B1 uses a TaskGroup, of at most 64
/// long-running children.
struct Scenarios {
  let plan: Plan
  /// The implementations taking part (the coordinator only when it can run).
  let impls: [Impl]
  /// Whether `Heap` figures were shown to count allocations on every thread.
  let heapVerified: Bool
  let progress: @Sendable (String) -> Void

  func run(_ selected: Set<ScenarioID>, into results: inout Results) async throws {
    if selected.contains(.b1) { try await hits(&results) }
    let needBursts = selected.contains(.b7)
    if selected.contains(.b2) || needBursts { try await bursts(.b2, &results) }
    if selected.contains(.b3) || needBursts { try await bursts(.b3, &results) }
    if selected.contains(.b4) { try await bursts(.b4, &results) }
    if selected.contains(.b5) { try await manyAccounts(&results) }
    if selected.contains(.b6) { try await fileStores(&results) }
    if selected.contains(.b7) { scaling(&results) }
    if selected.contains(.b8), impls.contains(.coordinator) { try await crossProcess(&results) }
  }

  // MARK: B1

  /// B1: `tasks` tasks call `get` on a valid cached model; aggregate wall time / calls.
  private func hits(_ results: inout Results) async throws {
    let key = AccountKey(account: "hit")
    let participants = impls.filter { $0 != .parkedTask }
    for tasks in plan.hitTasks {
      let perTask = max(1, plan.hitCalls / tasks)
      for rep in 0..<plan.reps {
        progress("B1 tasks=\(tasks) rep \(rep + 1)/\(plan.reps)")
        for impl in Stats.rotated(participants, by: rep) {
          let fixture = AuthorizerFixture(gate: nil, now: { Date() })
          let model = AuthModel(
            uid: "2088hit", accessToken: "hit-" + UUID().uuidString, mcUid: key.account,
            expiresAt: Date().addingTimeInterval(3600))
          let source = impl.make(seed: [key: model], fixture: fixture, now: { Date() })
          _ = try await source.get(key)  // the coordinator loads the store once
          _ = try await hitLoop(source, key, tasks: tasks, perTask: max(1, perTask / 8))
          let nanos = try await hitLoop(source, key, tasks: tasks, perTask: perTask)
          results.add("B1", impl, "tasks=\(tasks)", x: Double(tasks), .nsPerOp, nanos)
          if fixture.authorizations != 0 {
            results.violation(
              "B1 \(impl.rawValue): \(fixture.authorizations) authorizations on hits")
          }
        }
      }
    }
  }

  private func hitLoop(
    _ source: any TokenSource, _ key: AccountKey, tasks: Int, perTask: Int
  ) async throws -> Double {
    let start = nowNanos()
    let checksum = try await withThrowingTaskGroup(of: Int.self) { group in
      for _ in 0..<tasks {
        group.addTask {
          var sum = 0
          for _ in 0..<perTask { sum &+= try await source.get(key).uid.utf8.count }
          return sum
        }
      }
      return try await group.reduce(0, &+)
    }
    let elapsed = nowNanos() - start
    guard checksum == tasks * perTask * 7 else { throw HarnessFailure(description: "B1 checksum") }
    return Double(elapsed) / Double(tasks * perTask)
  }

  // MARK: B2, B3, B4

  private func bursts(_ scenario: ScenarioID, _ results: inout Results) async throws {
    let participants: [Impl]
    let sizes: [Int]
    switch scenario {
    case .b4:
      participants = impls.filter { !$0.hitsOnly && $0 != .parkedTask }
      sizes = [plan.stormSize]
    case .b3:
      // The parked task takes part as the reference for cancellation (`bareCancellations`).
      participants = impls.filter(\.coalesces)
      sizes = plan.burstSizes
    default:
      participants = impls.filter(\.coalesces)
      sizes = plan.burstSizes
    }
    for n in sizes {
      for rep in 0..<plan.reps {
        progress("\(scenario.rawValue) N=\(n) rep \(rep + 1)/\(plan.reps)")
        for impl in Stats.rotated(participants, by: rep) {
          if scenario == .b3, impl == .parkedTask {
            try await bareCancellations(n: n, &results)
          } else {
            try await burst(scenario, impl, n: n, &results)
          }
        }
      }
    }
  }

  /// One burst: prime the cache, expire it (B2, B3) or keep it (B4, whose callers reject it),
  /// spawn `n` callers, wait until all have parked behind the gated authorizer, measure the
  /// heap, optionally cancel every second caller, then open the gate and time the wake-up.
  private func burst(
    _ scenario: ScenarioID, _ impl: Impl, n: Int, _ results: inout Results
  ) async throws {
    let name = "\(scenario.rawValue) \(impl.rawValue) N=\(n)"
    let key = AccountKey(account: "burst")
    let time = TimeTravel()
    let gate = Gate()
    let fixture = AuthorizerFixture(gate: gate, now: { time.now() })
    let old = AuthModel(
      uid: "2088old", accessToken: "old-" + UUID().uuidString, mcUid: key.account,
      expiresAt: time.now().addingTimeInterval(3600))
    let source = impl.make(seed: [key: old], fixture: fixture, now: { time.now() }, capacity: n)
    if impl != .parkedTask {
      let primed = try await source.get(key)
      guard primed.accessToken == old.accessToken else {
        results.violation("\(name): priming did not return the seeded model")
        return
      }
    }
    let forced = scenario == .b4
    if !forced { time.advance(by: 7_200) }
    let oldToken = old.accessToken
    let cancelling = scenario == .b3
    let cancelCount = cancelling ? n / 2 : 0
    let kept = Tally(expected: n - cancelCount)
    let leaving = Tally(expected: cancelCount)
    let entered = Counter()
    var callers: [Task<Void, Never>] = []
    callers.reserveCapacity(n)

    let heapBefore = Heap.inUse()
    for index in 0..<n {
      let tally = cancelling && index % 2 == 1 ? leaving : kept
      // Two lean bodies rather than one that branches: a caller's async frames must stay
      // small, or the harness itself would overflow the task's first allocation block and
      // hide the implementations' own frame cost from the heap figures.
      if forced {
        callers.append(
          Task.detached {
            entered.increment()
            do {
              let model = try await source.refresh(key, rejecting: oldToken)
              tally.record(fixture.isFresh(model, for: key) ? .served : .wrongModel)
            } catch {
              tally.record(error is CancellationError ? .cancelled : .failed)
            }
          })
      } else {
        callers.append(
          Task.detached {
            entered.increment()
            do {
              let model = try await source.get(key)
              tally.record(fixture.isFresh(model, for: key) ? .served : .wrongModel)
            } catch {
              tally.record(error is CancellationError ? .cancelled : .failed)
            }
          })
      }
    }
    let expectedAuthorizations = impl.coalesces ? 1 : n
    let allParked = await waitUntil(timeout: .seconds(60)) {
      entered.count == n && source.parked >= n - 1 && gate.arrivals >= expectedAuthorizations
    }
    guard allParked else {
      results.violation(
        "\(name): callers never parked (entered \(entered.count), parked \(source.parked), "
          + "authorizer calls \(gate.arrivals))")
      gate.open()
      for caller in callers { caller.cancel() }
      _ = await waitUntil(timeout: .seconds(30)) { kept.counts.remaining <= 0 }
      return
    }
    // The parked count rises just before a caller suspends; let the last ones finish parking.
    try? await Task.sleep(for: .milliseconds(5))
    let heapAfter = Heap.inUse()

    if cancelling {
      let start = nowNanos()
      for index in stride(from: 1, to: n, by: 2) { callers[index].cancel() }
      let issued = nowNanos()
      results.add(
        "B3", impl, "N=\(n)", x: Double(n), .issueNsPerCancel,
        Double(issued - start) / Double(cancelCount))
      if impl.cancelsWaiters {
        guard await waitUntil(timeout: .seconds(60), { leaving.isDone }) else {
          results.violation("\(name): cancelled callers did not return")
          gate.open()
          return
        }
        results.add(
          "B3", impl, "N=\(n)", x: Double(n), .cancelNsPerCancel,
          Double(leaving.counts.lastNanos - start) / Double(cancelCount))
      }
    }

    let release = nowNanos()
    gate.open()
    let servedAtRelease = cancelling && !impl.cancelsWaiters
    let finished = await waitUntil(timeout: .seconds(120)) {
      kept.isDone && (!servedAtRelease || leaving.isDone)
    }
    guard finished else {
      results.violation("\(name): callers still waiting 120 s after the authorizer returned")
      return
    }
    var last = kept.counts.lastNanos
    var served = n - cancelCount
    if servedAtRelease {
      last = max(last, leaving.counts.lastNanos)
      served = n
    }
    results.add(
      scenario.rawValue, impl, "N=\(n)", x: Double(n), .wakeNsPerWaiter,
      Double(last - release) / Double(served))
    if scenario == .b2, heapVerified, let heapBefore, let heapAfter {
      results.add(
        "B2", impl, "N=\(n)", x: Double(n), .bytesPerWaiter,
        Double(heapAfter - heapBefore) / Double(n))
    }
    results.add(
      scenario.rawValue, impl, "N=\(n)", x: Double(n), .authorizations,
      Double(fixture.authorizations))
    check(name, fixture: fixture, source: source, expected: expectedAuthorizations, &results)
    let keptCounts = kept.counts
    if keptCounts.served != n - cancelCount {
      results.violation(
        "\(name): \(keptCounts.served) of \(n - cancelCount) callers got the new model "
          + "(wrong \(keptCounts.wrongModel), failed \(keptCounts.failed), "
          + "cancelled \(keptCounts.cancelled))")
    }
    if cancelling {
      let leftCounts = leaving.counts
      let expectedOutcome = impl.cancelsWaiters ? leftCounts.cancelled : leftCounts.served
      if expectedOutcome != cancelCount {
        results.violation(
          "\(name): of \(cancelCount) cancelled callers \(leftCounts.cancelled) got "
            + "CancellationError and \(leftCounts.served) the model")
      }
    }
  }

  /// B3's reference: what the runtime charges for a cancellation to reach a parked task and
  /// that task to return, measured as `burst` measures the coordinator. `n` tasks park, each in
  /// `withTaskCancellationHandler` around a `CheckedContinuation` that its handler resumes
  /// (`CancellableParking`); once all have parked every second task is cancelled, and the time
  /// from the first `cancel()` issued to the last cancelled task's return is divided by the
  /// number cancelled. The other half is then resumed, untimed.
  private func bareCancellations(n: Int, _ results: inout Results) async throws {
    let name = "B3 \(Impl.parkedTask.rawValue) N=\(n)"
    let cancelCount = n / 2
    let kept = Tally(expected: n - cancelCount)
    let leaving = Tally(expected: cancelCount)
    let entered = Counter()
    let parkedCount = Counter()
    let parkings = (0..<n).map { _ in CancellableParking(parked: parkedCount) }
    var callers: [Task<Void, Never>] = []
    callers.reserveCapacity(n)
    for index in 0..<n {
      let tally = index % 2 == 1 ? leaving : kept
      let parking = parkings[index]
      callers.append(
        Task.detached {
          entered.increment()
          do {
            try await parking.park()
            tally.record(.served)
          } catch {
            tally.record(error is CancellationError ? .cancelled : .failed)
          }
        })
    }
    let allParked = await waitUntil(timeout: .seconds(60)) {
      entered.count == n && parkedCount.count == n
    }
    guard allParked else {
      results.violation(
        "\(name): tasks never parked (entered \(entered.count), parked \(parkedCount.count))")
      for caller in callers { caller.cancel() }
      _ = await waitUntil(timeout: .seconds(30)) { kept.isDone && leaving.isDone }
      return
    }
    // As in `burst`: let the last ones finish parking.
    try? await Task.sleep(for: .milliseconds(5))

    let start = nowNanos()
    for index in stride(from: 1, to: n, by: 2) { callers[index].cancel() }
    let issued = nowNanos()
    results.add(
      "B3", .parkedTask, "N=\(n)", x: Double(n), .issueNsPerCancel,
      Double(issued - start) / Double(cancelCount))
    guard await waitUntil(timeout: .seconds(60), { leaving.isDone }) else {
      results.violation("\(name): cancelled tasks did not return")
      for parking in parkings { parking.resume() }
      return
    }
    results.add(
      "B3", .parkedTask, "N=\(n)", x: Double(n), .cancelNsPerCancel,
      Double(leaving.counts.lastNanos - start) / Double(cancelCount))

    for index in stride(from: 0, to: n, by: 2) { parkings[index].resume() }
    guard await waitUntil(timeout: .seconds(60), { kept.isDone }) else {
      results.violation("\(name): resumed tasks did not return")
      return
    }
    let keptCounts = kept.counts
    let leftCounts = leaving.counts
    if keptCounts.served != n - cancelCount || leftCounts.cancelled != cancelCount {
      results.violation(
        "\(name): \(keptCounts.served) of \(n - cancelCount) resumed tasks returned, "
          + "\(leftCounts.cancelled) of \(cancelCount) cancelled tasks threw CancellationError")
    }
  }

  private func check(
    _ name: String, fixture: AuthorizerFixture, source: any TokenSource, expected: Int,
    _ results: inout Results
  ) {
    if fixture.authorizations != expected {
      results.violation(
        "\(name): \(fixture.authorizations) authorizations, expected exactly \(expected)")
    }
    if let reported = source.reportedAuthorizations, reported != fixture.authorizations {
      results.violation(
        "\(name): statistics report \(reported) authorizations, the authorizer saw "
          + "\(fixture.authorizations)")
    }
  }

  // MARK: B5

  /// B5: `accounts` cold keys, `callersPerAccount` callers each arriving together; the time from
  /// the first spawn to the last result. Each authorization takes `plan.accountDelay` (a
  /// scaled-down round trip): with an instant authorizer the total would be the cost of
  /// spawning the callers, and keys authorizing in parallel would not show.
  private func manyAccounts(_ results: inout Results) async throws {
    let participants = impls.filter { $0.coalesces && $0 != .parkedTask }
    let keys = (0..<plan.accounts).map { AccountKey(account: "user-\($0)") }
    let callers = plan.accounts * plan.callersPerAccount
    let parameter = "\(plan.accounts)x\(plan.callersPerAccount)"
    for rep in 0..<plan.reps {
      progress("B5 \(parameter) rep \(rep + 1)/\(plan.reps)")
      for impl in Stats.rotated(participants, by: rep) {
        let name = "B5 \(impl.rawValue) \(parameter)"
        let fixture = AuthorizerFixture(gate: nil, delay: plan.accountDelay, now: { Date() })
        let source = impl.make(seed: [:], fixture: fixture, now: { Date() })
        let tally = Tally(expected: callers)
        let start = nowNanos()
        for key in keys {
          for _ in 0..<plan.callersPerAccount {
            Task.detached {
              do {
                let model = try await source.get(key)
                tally.record(fixture.isFresh(model, for: key) ? .served : .wrongModel)
              } catch {
                tally.record(.failed)
              }
            }
          }
        }
        guard await waitUntil(timeout: .seconds(120), { tally.isDone }) else {
          results.violation("\(name): callers did not finish within 120 s")
          continue
        }
        results.add(
          "B5", impl, parameter, .totalMs,
          Double(tally.counts.lastNanos - start) / 1e6)
        results.add("B5", impl, parameter, .authorizations, Double(fixture.authorizations))
        check(name, fixture: fixture, source: source, expected: plan.accounts, &results)
        if tally.counts.served != callers {
          results.violation("\(name): \(tally.counts.served) of \(callers) got their model")
        }
      }
    }
    guard heapVerified else { return }
    // The memory of an authorization in progress: after the timed runs, so that their figures
    // stay comparable with earlier ones. `barrier` authorizes one account at a time, so it
    // never has them all in progress and takes no part.
    for rep in 0..<plan.reps {
      progress("B5 heap per account authorizing, rep \(rep + 1)/\(plan.reps)")
      for impl in Stats.rotated(participants.filter { $0 != .serialBarrier }, by: rep) {
        await accountsInFlightHeap(impl, keys: keys, parameter: parameter, &results)
      }
    }
  }

  /// Heap per account while every account's authorization is in progress: one caller per
  /// account, the authorizer held at a gate until all have arrived and every caller parked;
  /// glibc's bytes in use then, minus before the callers were spawned, per account. It holds
  /// the authorization's task and frames, the implementation's records of it, and the caller.
  private func accountsInFlightHeap(
    _ impl: Impl, keys: [AccountKey], parameter: String, _ results: inout Results
  ) async {
    let name = "B5 heap \(impl.rawValue) \(parameter)"
    let gate = Gate()
    let fixture = AuthorizerFixture(gate: gate, now: { Date() })
    let source = impl.make(seed: [:], fixture: fixture, now: { Date() })
    let tally = Tally(expected: keys.count)
    let before = Heap.inUse()
    for key in keys {
      // The timed run's caller body, written out again: a helper would add a frame to every
      // caller, and its heap to the figure.
      Task.detached {
        do {
          let model = try await source.get(key)
          tally.record(fixture.isFresh(model, for: key) ? .served : .wrongModel)
        } catch {
          tally.record(.failed)
        }
      }
    }
    let inFlight = await waitUntil(timeout: .seconds(60)) {
      gate.arrivals >= keys.count && source.parked >= keys.count
    }
    guard inFlight else {
      results.violation(
        "\(name): authorizations never all in progress (authorizer calls \(gate.arrivals), "
          + "parked \(source.parked))")
      gate.open()
      return
    }
    try? await Task.sleep(for: .milliseconds(5))
    let after = Heap.inUse()
    gate.open()
    guard await waitUntil(timeout: .seconds(60), { tally.isDone }) else {
      results.violation("\(name): callers did not finish within 60 s")
      return
    }
    if tally.counts.served != keys.count {
      results.violation("\(name): \(tally.counts.served) of \(keys.count) got their model")
    }
    if let before, let after {
      results.add(
        "B5", impl, parameter, .bytesPerAccount, Double(after - before) / Double(keys.count))
    }
  }

  // MARK: B6

  private func fileStores(_ results: inout Results) async throws {
    let kinds = FileStoreKind.available
    let key = AccountKey(account: "file")
    for rep in 0..<plan.reps {
      progress("B6 \(plan.fileOps) saves and loads rep \(rep + 1)/\(plan.reps)")
      for kind in Stats.rotated(kinds, by: rep) {
        let directory = FileManager.default.temporaryDirectory
          .appendingPathComponent("authcoord-bench-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try kind.make(directory.appendingPathComponent("tokens.json"))
        let models = (0...plan.fileOps).map { index in
          AuthModel(
            uid: "2088\(index)", accessToken: "file-" + UUID().uuidString, mcUid: key.account,
            expiresAt: Date().addingTimeInterval(3600), extraInfo: ["scope": "auth_base"])
        }
        try await store.save(models[0], for: key)
        let saveStart = nowNanos()
        for model in models.dropFirst() { try await store.save(model, for: key) }
        let saveEnd = nowNanos()
        var found = 0
        for _ in 0..<plan.fileOps where try await store.model(for: key) != nil { found += 1 }
        let loadEnd = nowNanos()
        let ops = Double(plan.fileOps)
        results.add(
          "B6", kind.rawValue, "1 key", .saveMicros,
          Double(saveEnd - saveStart) / ops / 1e3)
        results.add(
          "B6", kind.rawValue, "1 key", .loadMicros,
          Double(loadEnd - saveEnd) / ops / 1e3)
        if found != plan.fileOps {
          results.violation("B6 \(kind.rawValue): \(plan.fileOps - found) loads found nothing")
        }
      }
    }
  }

  // MARK: B7

  /// B7: per repetition, cost per waiter at the largest N over the smallest, from B2 and B3.
  private func scaling(_ results: inout Results) {
    let small = "N=\(plan.smallestBurst)"
    let large = "N=\(plan.largestBurst)"
    let label = "\(plan.largestBurst)/\(plan.smallestBurst)"
    let series: [(String, Metric, String)] = [
      ("B2", .wakeNsPerWaiter, "B2 wake-up \(label)"),
      ("B3", .wakeNsPerWaiter, "B3 wake-up \(label)"),
      ("B3", .cancelNsPerCancel, "B3 cancellation \(label)"),
    ]
    for impl in impls {
      for (scenario, metric, parameter) in series {
        guard let atSmall = results.samples(scenario, impl, small, metric),
          let atLarge = results.samples(scenario, impl, large, metric)
        else { continue }
        for ratio in Stats.ratios(atLarge, atSmall) {
          results.add("B7", impl, parameter, .scaleRatio, ratio)
        }
      }
    }
  }
}
