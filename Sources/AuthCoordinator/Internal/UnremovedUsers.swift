/// The users whose logout did not take effect in the store: the removal threw, so the store
/// may still hold their pre-logout models, or the lease's revocation of their grants threw, so
/// another process may still store a result obtained under one (rule 19). A load for such a
/// user serves nothing it finds; a later logout that succeeds (another logout of the user, or
/// a `logoutAll`) lifts it.
///
/// A pending removal needs no entry here: loads are ordered after it (``StoreSequencer``).
struct UnremovedUsers {
  private var users: Set<String> = []
  private var everyone = false

  /// The users recorded (for ``AuthCoordinator/stateSizes``).
  var count: Int { users.count }

  /// Whether the store may still hold a pre-logout model of `account`.
  func covers(_ account: String) -> Bool { everyone || users.contains(account) }

  /// Records the outcome of the removal an account status change asked for.
  mutating func removal(of change: AccountStatusChange, succeeded: Bool) {
    switch change {
    case .logout(let account), .unbind(let account):
      if succeeded { users.remove(account) } else { users.insert(account) }
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
