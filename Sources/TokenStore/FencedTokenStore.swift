/// A ``TokenStore`` that takes part in the lease's fencing: it refuses a save made under a
/// grant that a later grant's save has already superseded.
///
/// Every ``LeaseGrant`` has a ``LeaseGrant/fence`` larger than every earlier grant's. A holder
/// whose grant lapsed (it was suspended, its renewals failed, the clock stepped) may not know
/// it yet when its result arrives; the next holder may already have stored a newer model. A
/// fenced store remembers, per key, the fence of the last fenced save that landed, and accepts
/// a save only if its fence is at least that one, checked and written in one atomic step (the
/// fencing token of a lock service). So a deposed holder can never overwrite a newer model,
/// whatever the timing.
///
/// The coordinator uses ``save(_:for:fence:)`` for every save it makes while it holds a
/// lease, when its store conforms; otherwise it checks that it still holds the grant (a
/// renewal) just before an ordinary ``TokenStore/save(_:for:)``, which leaves a window as long
/// as the save itself. `InMemoryTokenStore` and `FileTokenStore` conform.
///
/// What an implementation must do:
/// - **Check and write atomically**: in one read-modify-write under the store's lock (a file),
///   or one conditional statement (a database:
///   `UPDATE … SET model = $1, fence = $2 WHERE key = $3 AND (fence IS NULL OR fence <= $2)`,
///   inserting when the key has no row).
/// - **Keep the fence with the model**: removing a key's model may forget its fence (a logout
///   voids the older grants through ``SignOutGenerations/revokeGrants(ofAccount:)`` anyway).
/// - **Leave fences alone on an ordinary save**: a save without a fence neither sets nor
///   clears the key's fence.
/// - **Keep the revoked fences** (optional, recommended): a logout's removal through
///   ``removeModels(forAccount:refusingFencesThrough:)`` leaves a mark, and a fenced save at or
///   below its account's mark (or everyone's) is refused in the same atomic step. Without them
///   (the default implementations) a save under a grant the logout revoked lands after the
///   removal, and the coordinator's check after the write undoes it; until then another
///   process can read it.
public protocol FencedTokenStore: TokenStore {
  /// Stores `model` for `key` unless a fenced save with a larger fence has landed for `key`,
  /// or a sign-out of its account revoked the grant `fence` belongs to (a store that keeps
  /// revoked fences: ``removeModels(forAccount:refusingFencesThrough:)``).
  ///
  /// - Parameters:
  ///   - model: The model to keep.
  ///   - key: The account.
  ///   - fence: The fence of the grant the caller holds.
  /// - Returns: `true` when stored; `false` when refused (a later holder saved first, or the
  ///   grant was revoked), in which case nothing changed.
  /// - Throws: When the store cannot be read or changed.
  func save(_ model: AuthModel, for key: AccountKey, fence: UInt64) async throws -> Bool

  /// Removes every model of `account`, as ``TokenStore/removeModels(forAccount:)`` does, and
  /// from then on refuses every fenced save for any key of `account` whose fence is at most
  /// `fence`: the grants a sign-out revoked
  /// (``SignOutGenerations/revokeGrantsReportingFence(ofAccount:)``). A holder whose result
  /// arrives after the logout's removal, under a grant taken before the logout, then stores
  /// nothing, and no other process can read (and refresh) the signed-out session meanwhile.
  ///
  /// The mark is one number per account, kept (a later sign-out raises it) for as long as the
  /// store keeps its data; a save under a grant taken after the sign-out has a larger fence
  /// and is not affected. The marks are never dropped: one per account that ever signed out,
  /// a few dozen bytes each. They are meaningful only against the fences of the lease that
  /// reported them, whose numbering must outlive the store's data (``FileAuthorizationLease``
  /// keeps it in its file; ``InMemoryAuthorizationLease`` numbers from the wall clock, so a
  /// restarted process's grants are above the marks its previous run left).
  ///
  /// The default implementation calls ``TokenStore/removeModels(forAccount:)`` and keeps no
  /// mark: a late save then lands, and the coordinator's check after the write undoes it.
  ///
  /// - Parameters:
  ///   - account: The account.
  ///   - fence: The largest fence of a revoked grant.
  /// - Throws: When the store cannot be read or changed.
  func removeModels(forAccount account: String, refusingFencesThrough fence: UInt64)
    async throws

  /// Removes every model, as ``TokenStore/removeAll()`` does, and from then on refuses every
  /// fenced save whose fence is at most `fence` (see
  /// ``removeModels(forAccount:refusingFencesThrough:)``).
  ///
  /// - Parameter fence: The largest fence of a revoked grant
  ///   (``SignOutGenerations/revokeAllGrantsReportingFence()``).
  /// - Throws: When the store cannot be read or changed.
  func removeAll(refusingFencesThrough fence: UInt64) async throws
}

extension FencedTokenStore {
  /// Calls ``TokenStore/removeModels(forAccount:)`` and keeps no mark.
  ///
  /// - Parameters:
  ///   - account: The account.
  ///   - fence: Ignored.
  /// - Throws: What ``TokenStore/removeModels(forAccount:)`` throws.
  public func removeModels(forAccount account: String, refusingFencesThrough fence: UInt64)
    async throws
  {
    try await removeModels(forAccount: account)
  }

  /// Calls ``TokenStore/removeAll()`` and keeps no mark.
  ///
  /// - Parameter fence: Ignored.
  /// - Throws: What ``TokenStore/removeAll()`` throws.
  public func removeAll(refusingFencesThrough fence: UInt64) async throws {
    try await removeAll()
  }
}
