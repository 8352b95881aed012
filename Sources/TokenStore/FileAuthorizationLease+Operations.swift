import Foundation

// The operations of `AuthorizationLease`: each one `transact` (a read-modify-write of the record
// under the brief lock) run on the lease's queue, with the semantics of
// `InMemoryAuthorizationLease`.
extension FileAuthorizationLease {
  /// Takes the lease of `key` unless a grant that has not expired (on the host's boot clock, or
  /// on the clock given to the initializer) exists.
  ///
  /// - Parameters:
  ///   - key: The account.
  ///   - owner: Who asks: unique per coordinator (process and instance).
  ///   - timeToLive: How long the grant lasts unless renewed.
  /// - Returns: The grant (a takeover's fence is larger than every earlier one), or who holds
  ///   the key and until when.
  /// - Throws: ``TokenStoreError``: ``TokenStoreError/Code/lockTimeout``,
  ///   ``TokenStoreError/Code/unsupportedVersion`` (a newer version's file, left as it is),
  ///   ``TokenStoreError/Code/notARegularFile``, ``TokenStoreError/Code/permissionDenied``,
  ///   ``TokenStoreError/Code/ioFailure``, ``TokenStoreError/Code/fileTooLarge`` (the change
  ///   would make the file larger than 1 MiB even without the history no grant needs; the file
  ///   is kept as it was).
  public func acquire(
    _ key: AccountKey, owner: String, timeToLive: Duration
  ) async throws(TokenStoreError) -> LeaseAttempt {
    try await perform { lease throws(TokenStoreError) in
      try lease.transact { record, time in
        if let holder = record.holders[key], holder.isLive(at: time) {
          guard let backOff = holder.backOff else {
            return .heldElsewhere(owner: holder.owner, expiresAt: holder.expiry(at: time))
          }
          return .backingOff(
            until: holder.expiry(at: time), failures: backOff.failures, code: backOff.code)
        }
        let holder = LeaseRecord.Holder.lasting(
          Self.seconds(timeToLive), owner: owner, fence: record.nextFence,
          generation: record.generation, from: time)
        record.nextFence += 1
        record.holders[key] = holder
        return .acquired(
          LeaseGrant(
            key: key, owner: owner, fence: holder.fence, generation: record.generation,
            expiresAt: holder.expiry(at: time)))
      }
    }
  }

  /// Extends `grant` while the file still records it as the key's holder (same fence).
  ///
  /// - Parameters:
  ///   - grant: The grant.
  ///   - timeToLive: Counted from now.
  /// - Returns: The extended grant, or `nil` when it was taken over or released.
  /// - Throws: ``TokenStoreError``, as ``acquire(_:owner:timeToLive:)`` does.
  public func renew(
    _ grant: LeaseGrant, timeToLive: Duration
  ) async throws(TokenStoreError) -> LeaseGrant? {
    try await perform { lease throws(TokenStoreError) in
      try lease.transact { record, time in
        guard let held = record.holders[grant.key], held.fence == grant.fence,
          held.backOff == nil
        else { return nil }
        let holder = LeaseRecord.Holder.lasting(
          Self.seconds(timeToLive), owner: held.owner, fence: held.fence,
          generation: held.generation, from: time)
        record.holders[grant.key] = holder
        return LeaseGrant(
          key: grant.key, owner: grant.owner, fence: grant.fence, generation: grant.generation,
          expiresAt: holder.expiry(at: time))
      }
    }
  }

  /// Gives the key up and announces ``LeaseChange/released(_:)``, here and in every process
  /// watching the file; does nothing when the grant is no longer the key's.
  ///
  /// - Parameter grant: The grant.
  /// - Throws: ``TokenStoreError``, as ``acquire(_:owner:timeToLive:)`` does.
  public func release(_ grant: LeaseGrant) async throws(TokenStoreError) {
    try await perform { lease throws(TokenStoreError) in
      try lease.transact { record, _ in
        if record.holders[grant.key]?.fence == grant.fence { record.holders[grant.key] = nil }
      }
    }
  }

  /// Gives the key up and keeps every process off it for `backOff.duration` (on the host's
  /// boot clock); announces ``LeaseChange/released(_:)`` as ``release(_:)`` does. The back-off
  /// is a holder no one owns, with a fence of its own, at most ``LeaseBackOff/maximumDuration``
  /// long and with at most ``LeaseBackOff/maximumFailures``. A sign-out of its account ends it.
  ///
  /// - Parameters:
  ///   - grant: The grant.
  ///   - backOff: The back-off.
  /// - Throws: ``TokenStoreError``, as ``acquire(_:owner:timeToLive:)`` does.
  public func release(
    _ grant: LeaseGrant, backingOff backOff: LeaseBackOff
  ) async throws(TokenStoreError) {
    let backOff = backOff.clamped
    let mark = LeaseRecord.BackOffMark(
      failures: backOff.failures,
      code: String(backOff.code.utf8.prefix(LeaseRecord.BackOffMark.maximumCodeLength)) ?? "")
    guard mark.isPlausible else { return try await release(grant) }
    try await perform { lease throws(TokenStoreError) in
      try lease.transact { record, time in
        guard let held = record.holders[grant.key], held.fence == grant.fence,
          held.backOff == nil
        else { return }
        var holder = LeaseRecord.Holder.lasting(
          Self.seconds(backOff.duration), owner: "", fence: record.nextFence,
          from: time)
        holder.backOff = mark
        record.nextFence += 1
        record.holders[grant.key] = holder
      }
    }
  }

  /// Ends the current generation of `account`'s grants, and its keys' back-offs, without
  /// announcing it: changes no sign-out mark, so no subscriber hears of it.
  ///
  /// - Parameter account: The account.
  /// - Throws: ``TokenStoreError``, as ``acquire(_:owner:timeToLive:)`` does.
  public func revokeGrants(ofAccount account: String) async throws(TokenStoreError) {
    _ = try await revokeGrantsReportingFence(ofAccount: account)
  }

  /// Ends the current generation of `account`'s grants, and its keys' back-offs, without
  /// announcing it, and returns the largest fence the file had issued, read in the same
  /// transaction.
  ///
  /// - Parameter account: The account.
  /// - Returns: The largest fence issued so far (below the record's next one).
  /// - Throws: ``TokenStoreError``, as ``acquire(_:owner:timeToLive:)`` does.
  public func revokeGrantsReportingFence(ofAccount account: String)
    async throws(TokenStoreError) -> UInt64?
  {
    try await perform { lease throws(TokenStoreError) in
      try lease.transact { record, time in
        record.generation += 1
        record.userRevoked[account] = LeaseRecord.Revocation(
          generation: record.generation, at: time)
        record.endBackOffs { $0.account == account }
        return record.nextFence - 1
      }
    }
  }

  /// Ends the current generation of every grant, and every back-off, without announcing it,
  /// and returns the largest fence the file had issued, read in the same transaction.
  ///
  /// - Returns: The largest fence issued so far (below the record's next one).
  /// - Throws: ``TokenStoreError``, as ``acquire(_:owner:timeToLive:)`` does.
  public func revokeAllGrantsReportingFence() async throws(TokenStoreError) -> UInt64? {
    try await perform { lease throws(TokenStoreError) in
      try lease.transact { record, _ in
        record.generation += 1
        record.allRevoked = record.generation
        record.endBackOffs { _ in true }
        return record.nextFence - 1
      }
    }
  }

  /// Ends the current generation of every grant, and every back-off, without announcing it.
  ///
  /// - Throws: ``TokenStoreError``, as ``acquire(_:owner:timeToLive:)`` does.
  public func revokeAllGrants() async throws(TokenStoreError) {
    _ = try await revokeAllGrantsReportingFence()
  }

  /// Ends the current generation of `account`'s grants, and its keys' back-offs, and announces
  /// ``LeaseChange/signedOut(account:by:)``.
  ///
  /// - Parameters:
  ///   - account: The account.
  ///   - owner: Who signed out.
  /// - Throws: ``TokenStoreError``, as ``acquire(_:owner:timeToLive:)`` does.
  public func signOut(account: String, by owner: String) async throws(TokenStoreError) {
    try await perform { lease throws(TokenStoreError) in
      try lease.transact { record, time in
        record.generation += 1
        record.userSignedOut[account] = LeaseRecord.SignOut(
          generation: record.generation, by: owner, at: time)
        record.endBackOffs { $0.account == account }
      }
    }
  }

  /// Ends the current generation of every grant, and every back-off, and announces
  /// ``LeaseChange/signedOutAll(by:)``.
  ///
  /// - Parameter owner: Who signed out.
  /// - Throws: ``TokenStoreError``, as ``acquire(_:owner:timeToLive:)`` does.
  public func signOutAll(by owner: String) async throws(TokenStoreError) {
    try await perform { lease throws(TokenStoreError) in
      try lease.transact { record, _ in
        record.generation += 1
        record.allSignedOut = LeaseRecord.SignOut(generation: record.generation, by: owner)
        record.endBackOffs { _ in true }
      }
    }
  }

  /// Whether no sign-out of the grant's user (or of everyone), and no loss of the file,
  /// happened since the grant was taken.
  ///
  /// - Parameter grant: The grant.
  /// - Returns: `false` after a sign-out of its user or of everyone, or once a bad or missing
  ///   file was replaced.
  /// - Throws: ``TokenStoreError``, as ``acquire(_:owner:timeToLive:)`` does.
  public func isCurrent(_ grant: LeaseGrant) async throws(TokenStoreError) -> Bool {
    try await perform { lease throws(TokenStoreError) in
      try lease.transact { record, _ in record.isCurrent(grant) }
    }
  }
}
