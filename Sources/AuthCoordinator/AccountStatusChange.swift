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

  /// The user affected, or `nil` for ``logoutAll``.
  public var mcUid: String? {
    switch self {
    case .logout(let mcUid), .unbind(let mcUid): return mcUid
    case .logoutAll: return nil
    }
  }
}
