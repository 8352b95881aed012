/// The users whose logout did not reach the store: the removal threw, so the store may still
/// hold their pre-logout models. A load for such a user serves nothing it finds; a later
/// removal that succeeds (another logout of the user, or a `logoutAll`) lifts it.
///
/// A pending removal needs no entry here: loads are ordered after it (``StoreSequencer``).
struct UnremovedUsers {
  private var users: Set<String> = []
  private var everyone = false

  /// Whether the store may still hold a pre-logout model of `mcUid`.
  func covers(_ mcUid: String) -> Bool { everyone || users.contains(mcUid) }

  /// Records the outcome of the removal an account status change asked for.
  mutating func removal(of change: AccountStatusChange, succeeded: Bool) {
    switch change {
    case .logout(let mcUid), .unbind(let mcUid):
      if succeeded { users.remove(mcUid) } else { users.insert(mcUid) }
    case .logoutAll:
      if succeeded {
        users.removeAll()
        everyone = false
      } else {
        everyone = true
      }
    }
  }
}
