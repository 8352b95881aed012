/// The sizes of one run: the default full run (under 3 minutes here) or `--quick` (under 30 s).
struct Plan: Sendable {
  var quick: Bool
  /// Repetitions of every measurement; medians and per-repetition ratios are reported.
  var reps: Int
  /// B1: concurrent tasks hitting the cache.
  var hitTasks = [1, 2, 16, 64]
  /// B1: calls per measurement, split across the tasks.
  var hitCalls: Int
  /// B2, B3, B7: callers per burst.
  var burstSizes: [Int]
  /// B4: callers rejecting the same token.
  var stormSize: Int
  /// B5: accounts, and callers per account.
  var accounts: Int
  var callersPerAccount = 10
  /// B5: how long each authorization takes.
  var accountDelay: Duration = .microseconds(100)
  /// B6: saves and loads per measurement.
  var fileOps: Int
  /// B8: processes sharing one store, and concurrent callers in each.
  var processes: Int
  var callersPerProcess: Int

  init(quick: Bool, reps: Int?) {
    self.quick = quick
    if quick {
      self.reps = reps ?? 3
      hitCalls = 32_768
      burstSizes = [1_000, 10_000]
      stormSize = 1_000
      accounts = 1_000
      fileOps = 40
      processes = 4
      callersPerProcess = 100
    } else {
      self.reps = reps ?? 5
      hitCalls = 262_144
      burstSizes = [1_000, 10_000, 100_000]
      stormSize = 10_000
      accounts = 10_000
      fileOps = 200
      processes = 8
      callersPerProcess = 500
    }
  }

  var smallestBurst: Int { burstSizes.min() ?? 0 }
  var largestBurst: Int { burstSizes.max() ?? 0 }
}

/// The scenarios, in running order.
enum ScenarioID: String, CaseIterable, Sendable {
  case b1 = "B1"
  case b2 = "B2"
  case b3 = "B3"
  case b4 = "B4"
  case b5 = "B5"
  case b6 = "B6"
  case b7 = "B7"
  case b8 = "B8"

  var title: String {
    switch self {
    case .b1: return "B1 cache hit: aggregate ns per call (lower is better)"
    case .b2: return "B2 coalescing burst on an expired token"
    case .b3: return "B3 burst with half the waiters cancelled mid-flight"
    case .b4: return "B4 forced-refresh storm: all callers reject the same token"
    case .b5: return "B5 many accounts: keys x 10 callers, cold cache"
    case .b6: return "B6 token store on disk: save and load"
    case .b7: return "B7 scaling: cost per waiter at the largest N over the smallest"
    case .b8:
      return "B8 K processes x N callers on one store file, expired model (simulated endpoint)"
    }
  }
}
