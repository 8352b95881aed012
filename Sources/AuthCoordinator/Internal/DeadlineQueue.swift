/// The pending deadlines of the flights of one stripe of the account table, earliest first: a
/// binary min-heap.
///
/// The coordinator keeps one task sleeping until the earliest deadline of every stripe
/// (``DeadlineScheduler``) instead of a timer task per flight (creating and cancelling one per
/// flight was a measurable part of a flight's cost).
/// Entries of flights that ended are not removed when the flight ends: they are ignored when
/// they come due (the flight id no longer names a flight) and dropped by ``prune(keeping:)``
/// when they outnumber the live ones.
struct DeadlineQueue {
  struct Entry: Equatable {
    var at: Duration
    var key: AccountKey
    var flight: UInt64
    var phase: AuthEvent.FlightPhase
    /// Not a deadline of the flight's phase: when its stopped refresh is abandoned
    /// (``AccountStateMachine/abandon(_:)``).
    var abandons = false
  }

  private(set) var entries: [Entry] = []

  var count: Int { entries.count }

  /// The earliest deadline, if any.
  var earliest: Duration? { entries.first?.at }

  /// Consumes `entry`: the heap's array takes the caller's copy, and the sifts below move
  /// entries (an entry's key is a string; each copy of it retained and released its storage).
  mutating func insert(_ entry: consuming Entry) {
    entries.append(entry)
    siftUp(entries.count - 1)
  }

  /// Removes and returns every entry due at `now`, earliest first.
  mutating func popDue(now: Duration) -> [Entry] {
    var due: [Entry] = []
    while let first = entries.first, first.at <= now {
      due.append(first)
      let last = entries.removeLast()
      if !entries.isEmpty {
        entries[0] = last
        siftDown(0)
      }
    }
    return due
  }

  /// Keeps only the entries whose flight `isLive` says is still running.
  ///
  /// In place, and the heap rebuilt bottom-up (Floyd's construction): O(n), with no new
  /// array. It runs under the stripe's lock, so its cost is every other key's wait; rebuilding
  /// by inserting each kept entry again was O(n log n) and allocated a second array.
  mutating func prune(keeping isLive: (Entry) -> Bool) {
    // The kept entries are moved to the front in the array's buffer, read in place: the
    // array's `removeAll(where:)` copied each entry it looked at, and a prune looks at every
    // one.
    let kept = entries.withUnsafeMutableBufferPointer { heap in
      var kept = 0
      for index in heap.indices where isLive(heap[index]) {
        if kept != index { heap.swapAt(kept, index) }
        kept += 1
      }
      return kept
    }
    entries.removeLast(entries.count - kept)
    var parent = entries.count / 2
    while parent > 0 {
      parent -= 1
      siftDown(parent)
    }
  }

  // Both sifts work in the array's buffer: its elements are read in place and swapped by
  // moving, where the array's own subscript and `swapAt` copied whole entries.

  private mutating func siftUp(_ start: Int) {
    entries.withUnsafeMutableBufferPointer { heap in
      var child = start
      while child > 0 {
        let parent = (child - 1) / 2
        guard heap[child].at < heap[parent].at else { return }
        heap.swapAt(child, parent)
        child = parent
      }
    }
  }

  private mutating func siftDown(_ start: Int) {
    entries.withUnsafeMutableBufferPointer { heap in
      var parent = start
      while true {
        let left = 2 * parent + 1
        let right = left + 1
        var smallest = parent
        if left < heap.count, heap[left].at < heap[smallest].at { smallest = left }
        if right < heap.count, heap[right].at < heap[smallest].at { smallest = right }
        guard smallest != parent else { return }
        heap.swapAt(parent, smallest)
        parent = smallest
      }
    }
  }
}
