/// A change of the host app's account that invalidates its stored login state.
///
/// Pass it to ``AuthCoordinator/accountStatusChanged(_:)``. Switching user is a logout of the
/// previous user.
public enum AccountStatusChange: Sendable, Hashable {
  /// The app's user `mcUid` logged out (`MCAccountLogout`).
  case logout(mcUid: String)
  /// The app's user `mcUid` unbound the linked account (`MCAccountUnbind`).
  case unbind(mcUid: String)
  /// Every account is signed out (for example "sign out everywhere").
  case logoutAll

  /// The same change with its user id in the form keys use (``TokenStore/AccountKey/normalized(_:)``):
  /// a logout under another spelling of the id signs the same user out, in memory, in the
  /// store and in the lease.
  var normalized: Self {
    switch self {
    case .logout(let mcUid): return .logout(mcUid: AccountKey.normalized(mcUid))
    case .unbind(let mcUid): return .unbind(mcUid: AccountKey.normalized(mcUid))
    case .logoutAll: return .logoutAll
    }
  }

  /// The user affected, or `nil` for ``logoutAll``.
  public var mcUid: String? {
    switch self {
    case .logout(let mcUid), .unbind(let mcUid): return mcUid
    case .logoutAll: return nil
    }
  }
}
