/// Known bugs from this package's history that `authcoord simulate --fleet --plant` puts back,
/// to show that the fleet simulation catches them (a simulation that cannot fail proves
/// nothing). Package access only; nothing sets it but that command, before its first run, so
/// production code reads `nil`. It lives in TokenStore, the lowest module a bug lived in, so
/// that both the leases and the coordinator can read it.
package enum PlantedBug: String, CaseIterable, Sendable {
  /// The seams issue's first break: a token request under the lease without rule 16's guard
  /// (`confirmLease` reads the store but neither renews the grant nor checks it).
  case retryWithoutConfirm = "retry-without-confirm"
  /// The pause stress's lost rotation: a holder whose hold was lost drops its save (and its
  /// save retries) even with a fenced store, leaving the spent refresh token stored.
  case dropRotationOnLostHold = "drop-rotation-on-lost-hold"
  /// The seams issue's fifth break: the lease file, past its size, was replaced by an empty
  /// record, forgetting its sign-outs. Put back in ``InMemoryAuthorizationLease``'s history
  /// compaction: past the compaction threshold every sign-out is forgotten, even one a grant
  /// taken before it may still ask about, and the history floor is not raised, so such a grant
  /// reads as current again and its late result is stored for a signed-out user.
  case forgetSignOutsOnHistoryReset = "forget-sign-outs-on-history-reset"
  /// The seams issue's seventh break: a logout (or `invalidate`) left the lease's back-off in
  /// place, so the next sign-in was refused by the failure of the session that ended. Put back
  /// in ``InMemoryAuthorizationLease``'s sign-outs and revocations.
  case ignoreBackOffOnLogout = "ignore-backoff-on-logout"
  /// The first shape of rule 29, before the lease kept back-offs: every process tried the
  /// endpoint on its own, so a fleet sent one token request per process per back-off step
  /// during an outage. Put back in ``InMemoryAuthorizationLease``'s acquisition, which grants
  /// a key that backs off.
  case ignoreBackOffOnAcquire = "ignore-backoff-on-acquire"
  /// The seams issue's twelfth break: one account in two Unicode spellings was two keys (in
  /// memory, in the store, in the lease). Put back in ``AccountKey/normalized(_:)``, which
  /// returns a non-ASCII id as it is given.
  case keyPerSpelling = "key-per-spelling"

  /// The bug planted in this process, if any.
  nonisolated(unsafe) package static var planted: PlantedBug?
}
