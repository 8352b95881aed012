import Foundation
import TokenStore

/// The subscribers of a ``PostgresAuthorizationLease``'s changes, and the digests of the keys
/// this process asked the lease about (a notification names a key by its digest only).
final class ChangeHub: @unchecked Sendable {
  /// How many changes a subscription keeps until its subscriber takes them; past it the oldest
  /// are dropped, and a change that stands for them is yielded (``deliver(_:to:)``).
  static let bufferSize = 1_024

  private let lock = NSLock()
  private var subscribers: [UInt64: AsyncStream<LeaseChange>.Continuation] = [:]
  private var nextSubscriber: UInt64 = 0
  private var keys: [String: AccountKey] = [:]
  private var listening = false
  private var stopped = false

  /// Adds a subscriber; the first one starts the listener.
  func subscribe(
    _ continuation: AsyncStream<LeaseChange>.Continuation, startListener: () -> Void
  ) {
    lock.lock()
    guard !stopped else {
      lock.unlock()
      continuation.finish()
      return
    }
    let id = nextSubscriber
    nextSubscriber += 1
    subscribers[id] = continuation
    let start = !listening
    listening = true
    lock.unlock()
    continuation.onTermination = { [weak self] _ in
      guard let self else { return }
      self.lock.lock()
      self.subscribers[id] = nil
      self.lock.unlock()
    }
    if start { startListener() }
  }

  /// Remembers `key`'s digest, for the notifications that name it. At most 100,000 keys are
  /// remembered; past that the oldest are forgotten wholesale, and their releases are seen at
  /// the next poll tick instead.
  func remember(_ key: AccountKey, digest: String) {
    lock.lock()
    if keys.count >= 100_000 && keys[digest] == nil { keys.removeAll(keepingCapacity: true) }
    keys[digest] = key
    lock.unlock()
  }

  func key(forDigest digest: Substring) -> AccountKey? {
    lock.lock()
    defer { lock.unlock() }
    return keys[String(digest)]
  }

  func deliver(_ changes: [LeaseChange]) {
    guard !changes.isEmpty else { return }
    lock.lock()
    let targets = subscribers.sorted { $0.key < $1.key }.map(\.value)
    lock.unlock()
    for target in targets { Self.deliver(changes, to: target) }
  }

  /// Yields `changes` to one subscription. When its buffer was full, the oldest changes were
  /// dropped: then a change that stands for them is yielded last, so that nothing is lost
  /// silently. For a dropped sign-out that is ``TokenStore/LeaseChange/signedOutAll(by:)`` with
  /// no owner (every account may have signed out: forget them all and read the store again);
  /// for dropped releases, ``TokenStore/LeaseChange/unknown`` (waiters try the lease again).
  static func deliver(
    _ changes: [LeaseChange], to target: AsyncStream<LeaseChange>.Continuation
  ) {
    var dropped: [LeaseChange] = []
    for change in changes {
      if case .dropped(let oldest) = target.yield(change) { dropped.append(oldest) }
    }
    guard !dropped.isEmpty else { return }
    var standIn: LeaseChange = dropped.contains(where: isSignOut) ? .signedOutAll(by: "") : .unknown
    // The stand-in is the newest change, so it stands for what it pushes out too, unless it is
    // `unknown` and pushes out a sign-out: then an all-accounts sign-out follows it.
    while case .dropped(let oldest) = target.yield(standIn), standIn == .unknown,
      isSignOut(oldest)
    {
      standIn = .signedOutAll(by: "")
    }
  }

  private static func isSignOut(_ change: LeaseChange) -> Bool {
    switch change {
    case .signedOut, .signedOutAll: return true
    case .released, .unknown: return false
    }
  }

  var isStopped: Bool {
    lock.lock()
    defer { lock.unlock() }
    return stopped
  }

  /// Ends every subscription; the listener's thread exits at its next tick.
  func stop() {
    lock.lock()
    stopped = true
    let targets = Array(subscribers.values)
    subscribers.removeAll()
    lock.unlock()
    for target in targets { target.finish() }
  }
}

/// The listener of a ``PostgresAuthorizationLease``: a thread with a connection of its own that
/// `LISTEN`s on the schema's channel and turns notifications, reconnects and poll ticks into
/// ``TokenStore/LeaseChange``s.
enum ChangeListener {
  static func start(hub: ChangeHub, configuration: PostgresConfiguration, redactor: Redactor) {
    let thread = Thread {
      run(hub: hub, configuration: configuration, redactor: redactor)
    }
    thread.name = "authcoord-postgres-listener"
    thread.start()
  }

  private static func run(
    hub: ChangeHub, configuration: PostgresConfiguration, redactor: Redactor
  ) {
    let schema = configuration.schema
    let channel = PostgresSchema.channel(schema)
    var connection: PostgresConnection?
    var backoff = Backoff(configuration.reconnectDelay)
    // The last sign-out generation announced to the subscribers; `nil` until the first
    // connection read where history ends (earlier sign-outs are not news).
    var seenGeneration: UInt64?
    while !hub.isStopped {
      guard let listening = connection, !listening.isBroken else {
        connection = nil
        guard backoff.mayTry(at: .now) else {
          Thread.sleep(forTimeInterval: 0.05)
          continue
        }
        do {
          let deadline = ContinuousClock.now.advanced(by: configuration.connectTimeout)
          let opened = try PostgresConnection.open(
            configuration, redactor: redactor, deadline: deadline)
          let callDeadline = ContinuousClock.now.advanced(by: configuration.callTimeout)
          if configuration.listens {
            _ = try opened.execute("LISTEN \(channel)", until: callDeadline)
          }
          if let seen = seenGeneration {
            // A reconnect: what was announced while no one listened is read from the table.
            seenGeneration = try readSignOuts(
              after: seen, schema: schema, on: opened, until: callDeadline, hub: hub)
          } else {
            let rows = try opened.execute(
              "SELECT value FROM \(schema).counters WHERE name = 'generation'",
              until: callDeadline)
            seenGeneration = rows.first?[0].flatMap(UInt64.init) ?? 0
          }
          // Waiters re-try the lease: a release may have gone unheard.
          hub.deliver([.unknown])
          backoff.succeeded()
          connection = opened
        } catch {
          backoff.failed(at: .now, message: "\(error)")
        }
        continue
      }
      let tick = Duration.microseconds(
        Int64.random(
          in: configuration.pollInterval.lowerBound
            .roundedUpMicroseconds...configuration
            .pollInterval.upperBound.roundedUpMicroseconds))
      do {
        let received = try listening.notifications(until: ContinuousClock.now.advanced(by: tick))
        var changes: [LeaseChange] = []
        var signedOut = false
        for (_, payload) in received {
          if payload.hasPrefix("r:") {
            if let key = hub.key(forDigest: payload.dropFirst(2)) { changes.append(.released(key)) }
          } else if payload.hasPrefix("s:") {
            signedOut = true
          }
        }
        hub.deliver(changes)
        if signedOut || received.isEmpty, let seen = seenGeneration {
          let deadline = ContinuousClock.now.advanced(by: configuration.callTimeout)
          seenGeneration = try readSignOuts(
            after: seen, schema: schema, on: listening, until: deadline, hub: hub)
        }
        if received.isEmpty { hub.deliver([.unknown]) }
      } catch {
        connection = nil
      }
    }
  }

  /// Announces the sign-outs recorded after generation `seen`, in order; returns the newest
  /// generation read.
  private static func readSignOuts(
    after seen: UInt64, schema: String, on connection: PostgresConnection,
    until deadline: ContinuousClock.Instant, hub: ChangeHub
  ) throws -> UInt64 {
    let rows = try connection.execute(
      """
      SELECT generation, account, owner FROM \(schema).sign_outs
      WHERE generation > $1::bigint AND announced ORDER BY generation
      """, [.text(String(seen))], until: deadline)
    var newest = seen
    var changes: [LeaseChange] = []
    for row in rows.rows {
      guard row.count == 3, let generation = row[0].flatMap(UInt64.init), let owner = row[2] else {
        continue
      }
      newest = max(newest, generation)
      if let account = row[1] {
        changes.append(.signedOut(account: account, by: owner))
      } else {
        changes.append(.signedOutAll(by: owner))
      }
    }
    hub.deliver(changes)
    return newest
  }
}
