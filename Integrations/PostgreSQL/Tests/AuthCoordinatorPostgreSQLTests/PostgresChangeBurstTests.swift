import Foundation
import Testing
import TokenStore

@testable import AuthCoordinatorPostgreSQL

/// A burst of more changes than a subscription keeps (`ChangeHub.bufferSize`) loses the
/// oldest, as any bounded buffer must; a sign-out among them must not be lost silently.
@Suite("PostgreSQL lease change bursts", .timeLimit(.minutes(1)))
struct PostgresChangeBurstTests {
  /// The changes `stream` yields until `isComplete` holds for all received so far, or `limit`
  /// passes (a bound on a failing test).
  static func collect(
    _ stream: AsyncStream<LeaseChange>, within limit: Duration,
    until isComplete: @escaping @Sendable ([LeaseChange]) -> Bool
  ) async -> [LeaseChange] {
    await withTaskGroup(of: [LeaseChange]?.self) { group in
      group.addTask {
        var received: [LeaseChange] = []
        for await change in stream {
          received.append(change)
          if isComplete(received) { break }
        }
        return received
      }
      group.addTask {
        try? await Task.sleep(for: limit)
        return nil
      }
      let received = await group.next() ?? nil
      group.cancelAll()
      return received ?? []
    }
  }

  /// What a subscription that no one reads holds after `batches` were delivered to it.
  static func buffered(after batches: [[LeaseChange]]) async -> [LeaseChange] {
    let (stream, continuation) = AsyncStream<LeaseChange>.makeStream(
      bufferingPolicy: .bufferingNewest(ChangeHub.bufferSize))
    for batch in batches { ChangeHub.deliver(batch, to: continuation) }
    continuation.finish()
    var held: [LeaseChange] = []
    for await change in stream { held.append(change) }
    return held
  }

  @Test(
    "a full buffer that drops a sign-out ends with an all-accounts sign-out; one that drops releases only, with unknown"
  )
  func standIns() async {
    let key = AccountKey(account: "k")
    let size = ChangeHub.bufferSize
    let releases = Array(repeating: LeaseChange.released(key), count: size)
    // Nothing dropped: nothing added.
    #expect(await Self.buffered(after: [releases]) == releases)
    // A sign-out dropped.
    let signedOut = LeaseChange.signedOut(account: "a", by: "B")
    let afterSignOut = await Self.buffered(after: [[signedOut] + releases])
    #expect(afterSignOut.count == size && afterSignOut.last == .signedOutAll(by: ""))
    #expect(!afterSignOut.contains(signedOut))
    // Releases dropped: unknown...
    let afterReleases = await Self.buffered(after: [releases, [.released(key)]])
    #expect(afterReleases.last == .unknown)
    // ...unless the unknown itself pushes a sign-out out.
    let mixed = [LeaseChange.released(key), signedOut] + releases.dropFirst(2)
    let afterMixed = await Self.buffered(after: [mixed, [.released(key)]])
    #expect(afterMixed.suffix(2) == [.unknown, .signedOutAll(by: "")])
    #expect(!afterMixed.contains(signedOut))
  }

  @Test(
    "more sign-outs at once than a subscription keeps: each is announced, or an all-accounts sign-out after them stands for the lost ones",
    .enabled(if: TestServer.isAvailable))
  func signOutBurst() async throws {
    let database = try await TestServer.database()
    defer { database.close() }
    let schema = database.schema
    let lease = PostgresAuthorizationLease(database: database)
    let changes = lease.changes()
    #expect(await first(of: changes) { $0 == .unknown } == .unknown)
    // Another replica's logouts, recorded at once (say, what a listener reads back after a
    // reconnect): more than the subscription keeps.
    let count = ChangeHub.bufferSize * 2 + 10
    let accounts = (1...count).map { "user-\($0)" }
    try await TestServer.admin(
      """
      WITH generation AS (
        UPDATE \(schema).counters SET value = value + $1::bigint WHERE name = 'generation'
        RETURNING value)
      INSERT INTO \(schema).sign_outs (account_hash, account, owner, generation, announced)
      SELECT sha256(convert_to('user-' || i, 'UTF8')), 'user-' || i, 'B',
        (SELECT value FROM generation) - $1::bigint + i, true
      FROM generate_series(1, $1::bigint) AS i
      """, [.text(String(count))])
    try await TestServer.admin(
      "SELECT pg_notify($1, 's:burst')", [.text(PostgresSchema.channel(schema))])

    let last = LeaseChange.signedOut(account: "user-\(count)", by: "B")
    let received = await Self.collect(changes, within: .seconds(10)) { received in
      received.contains(last)
        && (received.contains(.signedOutAll(by: ""))
          || Set(received).isSuperset(of: accounts.map { .signedOut(account: $0, by: "B") }))
    }
    let announced = Set(
      received.compactMap { change -> String? in
        guard case .signedOut(let account, _) = change else { return nil }
        return account
      })
    let lost = accounts.filter { !announced.contains($0) }
    // Every lost sign-out is followed by one that stands for it: an all-accounts sign-out after
    // the burst's last.
    let resyncAfterTheBurst =
      received.lastIndex(of: .signedOutAll(by: "")).map { resync in
        received.firstIndex(of: last).map { resync > $0 } ?? false
      } ?? false
    #expect(
      lost.isEmpty || resyncAfterTheBurst,
      "\(lost.count) of \(count) sign-outs lost in \(received.count) changes, none standing for them"
    )
  }
}
