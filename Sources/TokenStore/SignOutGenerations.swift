/// The sign-out record of an ``AuthorizationLease``: a logout makes every grant taken before it
/// for that account not current, so that a holder whose result arrives after the logout can no
/// longer store it.
///
/// What every implementation promises:
/// - **Generations.** Each account has a sign-out generation, and so does "everyone"; a grant
///   records them when it is taken (``LeaseGrant/generation``), and ``LeaseGrants/isCurrent(_:)``
///   is `false` once either moved on.
/// - **Two steps per logout.** ``revokeGrants(ofAccount:)`` (silent) runs before the logout
///   empties the store, ``signOut(account:by:)`` (announced) after: a holder whose result arrives
///   in between can no longer store it, and no other process re-reads the store before it is
///   empty. ``revokeAllGrants()`` and ``signOutAll(by:)`` do the same for every account.
/// - **Durable.** A generation never moves back while the lease's storage lives (for the file
///   lease, while its file does). A lease may drop the history no grant can need any more (the
///   file lease drops a sign-out once it is older than every grant it still holds), as long as
///   a grant taken before a dropped sign-out reads as not current afterwards, never as current.
/// - **A sign-out ends back-offs.** Every one of the four operations also ends the back-offs
///   (``LeaseGrants/release(_:backingOff:)``) of the keys it concerns: a user who signs in again
///   must not wait out the back-off of the session that ended.
///
/// The requirements name an account (the user id of the app or service; for an Alipay
/// mini-program, the host app's `mcUid`).
public protocol SignOutGenerations: Sendable {
  /// Makes every grant of `account`'s keys taken before now not current, without announcing
  /// anything. A logout calls it before it empties the store, and ``signOut(account:by:)``
  /// after.
  ///
  /// - Parameter account: The account.
  /// - Throws: When the lease's storage cannot be read or changed.
  func revokeGrants(ofAccount account: String) async throws

  /// Makes every grant taken before now not current, without announcing anything (the first
  /// half of ``signOutAll(by:)``, as ``revokeGrants(ofAccount:)`` is of an account's sign-out).
  ///
  /// - Throws: When the lease's storage cannot be read or changed.
  func revokeAllGrants() async throws

  /// Records that `account` signed out: every grant of its keys taken before now is no longer
  /// current. Announces ``LeaseChange/signedOut(account:by:)``.
  ///
  /// - Parameters:
  ///   - account: The account.
  ///   - owner: Who signed the account out (so that it can ignore its own announcement).
  /// - Throws: When the lease's storage cannot be read or changed.
  func signOut(account: String, by owner: String) async throws

  /// Records that every account signed out. Announces ``LeaseChange/signedOutAll(by:)``.
  ///
  /// - Parameter owner: Who signed everyone out.
  /// - Throws: When the lease's storage cannot be read or changed.
  func signOutAll(by owner: String) async throws

  /// Revokes as ``revokeGrants(ofAccount:)`` does, and returns the largest fence the lease had
  /// issued when it did: every grant the revocation made not current has a fence at most this
  /// one, and every grant taken after it a larger one. A logout hands it to a
  /// ``FencedTokenStore``'s ``FencedTokenStore/removeModels(forAccount:refusingFencesThrough:)``,
  /// so that a save under a revoked grant that lands after the removal is refused by the store
  /// itself, not undone later.
  ///
  /// The default implementation calls ``revokeGrants(ofAccount:)`` and returns `nil` (the
  /// lease does not tell; the store keeps no mark). `InMemoryAuthorizationLease` and
  /// `FileAuthorizationLease` return the fence.
  ///
  /// - Parameter account: The account.
  /// - Returns: The largest fence issued before the revocation, or `nil` when the lease does
  ///   not tell.
  /// - Throws: When the lease's storage cannot be read or changed.
  func revokeGrantsReportingFence(ofAccount account: String) async throws -> UInt64?

  /// Revokes as ``revokeAllGrants()`` does, and returns the largest fence issued before it (see
  /// ``revokeGrantsReportingFence(ofAccount:)``).
  ///
  /// - Returns: The largest fence issued before the revocation, or `nil` when the lease does
  ///   not tell.
  /// - Throws: When the lease's storage cannot be read or changed.
  func revokeAllGrantsReportingFence() async throws -> UInt64?
}

extension SignOutGenerations {
  /// Calls ``revokeGrants(ofAccount:)``; the lease does not tell its fence.
  ///
  /// - Parameter account: The account.
  /// - Returns: `nil`.
  /// - Throws: What ``revokeGrants(ofAccount:)`` throws.
  public func revokeGrantsReportingFence(ofAccount account: String) async throws -> UInt64? {
    try await revokeGrants(ofAccount: account)
    return nil
  }

  /// Calls ``revokeAllGrants()``; the lease does not tell its fence.
  ///
  /// - Returns: `nil`.
  /// - Throws: What ``revokeAllGrants()`` throws.
  public func revokeAllGrantsReportingFence() async throws -> UInt64? {
    try await revokeAllGrants()
    return nil
  }
}
