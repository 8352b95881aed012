import Dispatch
import Foundation

// Announcing changes: what the lease last saw of the file, the diff against what it sees now,
// and the subscribers that get it. `absorb` and `refresh` run on the lease's queue only, so
// announcements are yielded in the order the file changed.
extension FileAuthorizationLease {
  /// One look at the lease file.
  struct Observation: Sendable {
    enum Content: Sendable, Equatable {
      case missing
      case record(LeaseRecord)
      /// Garbage, a newer version, or not readable: what changed cannot be told.
      case unreadable
    }

    /// The file looked at (`nil`: none, or not examinable).
    var identity: FileIdentity?
    var content: Content
  }

  /// Takes `observation` as what the file now holds; with subscribers, announces what changed
  /// since the last observation.
  func absorb(_ observation: Observation) {
    let (previous, subscribers) = state.withLock { state in
      let previous = state.lastSeen
      state.lastSeen = observation
      if case .record(let record) = observation.content { state.lastRecord = record }
      return (previous, Array(state.subscribers.values))
    }
    guard let previous, !subscribers.isEmpty else { return }
    let changes: [LeaseChange]
    switch (previous.content, observation.content) {
    case (.record(let old), .record(let new)):
      changes = new.changes(since: old, at: clock.now())
    case (.record, .missing), (.record, .unreadable), (.missing, .unreadable):
      changes = [.unknown]
    case (.unreadable, .unreadable):
      changes = previous.identity == observation.identity ? [] : [.unknown]
    case (.missing, .record(let new)):
      // Created (or recreated): what it already holds is new, the first sign-out included (a
      // logout is often what creates the file, when no flight took a lease before).
      var base = LeaseRecord()
      base.floor = new.floor
      base.generation = new.floor
      base.nextFence = 0
      changes = new.changes(since: base, at: clock.now())
    case (.missing, _), (.unreadable, _):
      // Recreated after garbage: `.unknown` was already announced for the garbage.
      changes = []
    }
    for change in changes {
      for subscriber in subscribers { subscriber.deliver(change) }
    }
  }

  /// Re-reads the file and announces what changed. Takes no lock.
  ///
  /// - Parameter always: Whether to read even when the file's identity (device, inode, size,
  ///   modification time) is the one last seen. A kernel notification reads always: a freed
  ///   inode is soon reused and modification times are coarse (a few milliseconds on Linux),
  ///   so two quick same-size writes can leave an identity unchanged. The poll compares the
  ///   identity only, to stay one `lstat`.
  func refresh(always: Bool = false) {
    let identity = currentIdentity()
    if !always, let seen = state.withLock({ $0.lastSeen }), seen.identity == identity { return }
    let observation: Observation
    do throws(TokenStoreError) {
      switch try readDisk() {
      case .missing:
        observation = Observation(identity: nil, content: .missing)
      case .good(let identity, let record, _):
        observation = Observation(identity: identity, content: .record(record))
      case .bad(let identity, let problem), .newer(let identity, let problem):
        report(problem)
        observation = Observation(identity: identity, content: .unreadable)
      }
    } catch {
      report(error)
      observation = Observation(identity: identity, content: .unreadable)
    }
    absorb(observation)
  }

  /// Adds a subscriber; the first one starts watching the file (on the queue).
  func subscribe() -> AsyncStream<LeaseChange> {
    let (stream, continuation) = AsyncStream<LeaseChange>.makeStream(
      bufferingPolicy: .bufferingNewest(LeaseChange.bufferSize))
    let (id, first) = state.withLock { state in
      let id = state.nextSubscriber
      state.nextSubscriber += 1
      state.subscribers[id] = continuation
      return (id, state.subscribers.count == 1)
    }
    continuation.onTermination = { [weak self] _ in
      guard let self else { return }
      let last = state.withLock { state in
        state.subscribers.removeValue(forKey: id)
        return state.subscribers.isEmpty
      }
      if last { queue.async { [weak self] in self?.updateWatching() } }
    }
    if first { queue.async { [weak self] in self?.updateWatching() } }
    return stream
  }

  /// Starts the watcher when there are subscribers and none runs, stops it when there are
  /// none. Runs on the queue, so a quick subscribe-unsubscribe leaves the right state.
  func updateWatching() {
    let wanted = state.withLock { !$0.subscribers.isEmpty }
    if wanted && watcher.sources.isEmpty {
      try? createDirectory()  // so that a lease not used yet can be watched
      watcher.start(lease: self)
      // Compares the file with what this lease last saw (its own last operation): a change
      // that landed between that and the watch being added is announced now.
      refresh()
    } else if !wanted && !watcher.sources.isEmpty {
      watcher.stop()
    }
  }
}
