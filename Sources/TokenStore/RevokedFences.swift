/// The revoked fences a ``FencedTokenStore`` keeps
/// (``FencedTokenStore/removeModels(forAccount:refusingFencesThrough:)``): per account, and for
/// everyone, the largest fence of a grant a sign-out revoked. A fenced save at or below its
/// account's mark (or everyone's) is refused. One number per account, raised by later
/// sign-outs, never lowered; a mark at or below everyone's is dropped, as it refuses nothing
/// more.
package struct RevokedFences: Equatable, Sendable {
  /// Each account's mark, where above ``all``.
  package private(set) var accounts: [String: UInt64] = [:]
  /// Everyone's mark (`0`: none).
  package private(set) var all: UInt64 = 0

  package init(accounts: [String: UInt64] = [:], all: UInt64 = 0) {
    self.all = all
    self.accounts = accounts.filter { $0.value > all }
  }

  /// Whether a fenced save of `account`'s key under `fence` is refused.
  package func refuses(_ fence: UInt64, for account: String) -> Bool {
    fence <= all || fence <= (accounts[account] ?? 0)
  }

  /// Raises `account`'s mark to `fence`.
  package mutating func mark(_ account: String, through fence: UInt64) {
    guard fence > all else { return }
    accounts[account] = max(accounts[account] ?? 0, fence)
  }

  /// Raises everyone's mark to `fence`, dropping the accounts' marks it covers.
  package mutating func markAll(through fence: UInt64) {
    all = max(all, fence)
    accounts = accounts.filter { $0.value > all }
  }

  /// Whether there is no mark.
  package var isEmpty: Bool { accounts.isEmpty && all == 0 }
}
