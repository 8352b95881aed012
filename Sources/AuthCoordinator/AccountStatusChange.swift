/// A change of the host app's account that invalidates its stored login state.
///
/// Pass it to ``AuthCoordinator/accountStatusChanged(_:)``. Switching user is a logout of the
/// previous user.
public enum AccountStatusChange: Sendable, Hashable {
  /// The app's user `account` logged out (for an Alipay mini-program, `MCAccountLogout`).
  case logout(account: String)
  /// The app's user `account` unbound the linked account (for an Alipay mini-program,
  /// `MCAccountUnbind`).
  case unbind(account: String)
  /// Every account is signed out (for example "sign out everywhere").
  case logoutAll

  /// The same change with its user id in the form keys use (``TokenStore/AccountKey/normalized(_:)``):
  /// a logout under another spelling of the id signs the same user out, in memory, in the
  /// store and in the lease.
  var normalized: Self {
    switch self {
    case .logout(let account): return .logout(account: AccountKey.normalized(account))
    case .unbind(let account): return .unbind(account: AccountKey.normalized(account))
    case .logoutAll: return .logoutAll
    }
  }

  /// The account affected, or `nil` for ``logoutAll``.
  public var account: String? {
    switch self {
    case .logout(let account), .unbind(let account): return account
    case .logoutAll: return nil
    }
  }
}
