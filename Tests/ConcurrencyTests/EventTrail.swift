import AuthCoordinator
import Foundation
import SyncPrimitives

/// The coordinator's last events on each account, for a stress run's diagnosis
/// (`STRESS_EVENTS=1`): printed, with the account's timeline (``StressTimeline``), beside the
/// first violations of calls. A subscriber that falls more than the coordinator's buffer
/// (1,024) behind loses the oldest events, so a trail may have gaps; it is for reading, never
/// for a check.
final class EventTrail: Sendable {
  private let trails = LockedState([String: [String]]())
  private let count = LockedState(0)
  static let kept = 400

  /// Records every event of `coordinator` until the task is cancelled or the stream ends.
  func follow(_ coordinator: AuthCoordinator) -> Task<Void, Never> {
    let events = coordinator.events
    return Task { [self] in
      for await event in events { note(event) }
    }
  }

  private func note(_ event: AuthEvent) {
    let text = String(describing: event)
    let number = count.withLock {
      $0 += 1
      return $0
    }
    // Every account the event names (`k<n>`, as the stress names them).
    var accounts: Set<String> = []
    var scanner = text[...]
    while let range = scanner.range(of: #"\bk[0-9]+\b"#, options: .regularExpression) {
      accounts.insert(String(scanner[range]))
      scanner = scanner[range.upperBound...]
    }
    if accounts.isEmpty { accounts.insert("*") }
    trails.withLock { trails in
      for account in accounts {
        trails[account, default: []].append("e\(number): \(text)")
        if trails[account]!.count > Self.kept { trails[account]!.removeFirst() }
      }
    }
    let due = snapshots.withLock { snapshots in
      snapshots.requests.filter { $0.value.through <= number }
    }
    for (id, request) in due {
      let lines = trail(of: request.account, through: request.through)
      snapshots.withLock {
        $0.requests[id] = nil
        $0.taken[id] = lines
      }
    }
  }

  private let snapshots = LockedState(
    (
      requests: [Int: (account: String, through: Int)](), taken: [Int: [String]](),
      next: 0
    ))

  /// Asks for the trail of `account` up to the events recorded now and the 5,000 after them
  /// (room for the subscriber's lag), taken once those were recorded.
  func requestSnapshot(of account: String) -> Int {
    let through = recorded + 5_000
    return snapshots.withLock {
      $0.next += 1
      $0.requests[$0.next] = (account, through)
      return $0.next
    }
  }

  /// The trail a request asked for: taken, or what there is now if the run ended first.
  func snapshot(_ id: Int) -> [String] {
    if let taken = snapshots.withLock({ $0.taken[id] }) { return taken }
    guard let request = snapshots.withLock({ $0.requests[id] }) else { return [] }
    return trail(of: request.account, through: request.through)
  }

  /// How many events were recorded so far.
  var recorded: Int { count.withLock { $0 } }

  /// The last 150 events on `account` numbered at most `through`, oldest first, with the
  /// all-accounts ones among them.
  func trail(of account: String, through: Int = .max) -> [String] {
    func number(_ line: String) -> Int {
      Int(line.dropFirst().prefix { $0 != ":" }) ?? 0
    }
    let lines = trails.withLock { ($0[account] ?? []) + ($0["*"] ?? []) }
    return Array(
      lines.filter { number($0) <= through }.sorted { number($0) < number($1) }.suffix(150))
  }
}
