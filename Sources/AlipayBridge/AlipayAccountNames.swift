import AuthCoordinator

/// The Alipay spellings of a key's account.
///
/// The core names the host app's user an account; an Alipay app knows the same value as
/// `mcUid` (the "merchant" user id, `extraInfo["mcUid"]` in the container's model). These are
/// two names of one value: `AccountKey(mcUid: "u1") == AccountKey(account: "u1")`.
extension AccountKey {
  /// Creates a key for the host app's own user: the Alipay name of `init(account:mode:)`.
  ///
  /// - Parameters:
  ///   - mcUid: The host app's own user id (normalized to Form C).
  ///   - mode: The authorization mode; `AuthMode.platformOnly` by default.
  public init(mcUid: String, mode: AuthMode = .platformOnly) {
    self.init(account: mcUid, mode: mode)
  }

  /// The host app's own user id: the Alipay name of `account`, the same value.
  public var mcUid: String {
    get { account }
    set { account = newValue }
  }
}

/// The Alipay spellings of an account status change (`MCAccountLogout`, `MCAccountUnbind`).
///
/// `.logout(mcUid: id)` is `.logout(account: id)`, and so for unbind. A `switch` matches the
/// core's cases: `case .logout(let mcUid)` binds the same value.
extension AccountStatusChange {
  /// The app's user `mcUid` logged out (`MCAccountLogout`): the Alipay spelling of
  /// `logout(account:)`.
  ///
  /// - Parameter mcUid: The host app's own user id.
  /// - Returns: `logout(account:)`.
  public static func logout(mcUid: String) -> Self { .logout(account: mcUid) }

  /// The app's user `mcUid` unbound the linked account (`MCAccountUnbind`): the Alipay spelling
  /// of `unbind(account:)`.
  ///
  /// - Parameter mcUid: The host app's own user id.
  /// - Returns: `unbind(account:)`.
  public static func unbind(mcUid: String) -> Self { .unbind(account: mcUid) }

  /// The host app's user affected, or `nil` for `logoutAll`: the Alipay name of `account`.
  public var mcUid: String? { account }
}
