import Foundation

// The payloads of the state machine's private state: what it knows about the cached model
// and about each phase of a flight. Only the machine creates or changes them.
extension AccountStateMachine {
  struct Cached: Equatable {
    var model: AuthModel
    /// How long before its expiry the model counts as expired: the policy's leeway, or less
    /// for a model that arrived with a lifetime shorter than twice the leeway.
    var leeway: TimeInterval
    /// The model was obtained by an authorization with a lifetime no longer than the leeway:
    /// renewing it counts for the refresh-loop guard.
    var arrivedInsideLeeway: Bool
    /// The model was served but its save failed: the store may hold an older one, which a
    /// re-read must not bring back (its refresh token may be spent). Cleared when a retry
    /// stores it; a newer model or a logout replaces it.
    var unsaved = false
    /// The lease grant under which the authorization that obtained an unsaved model was made:
    /// before a token request spends the model's refresh token, the lease is asked whether a
    /// sign-out came since (``StepKind/checkUnsavedGrant(_:)``). `nil` without a lease. Rare
    /// (unsaved models only), and a grant is about 150 bytes: kept out of line.
    @Rare var obtainedUnder: LeaseGrant?
    /// From when (wall clock) a cache hit starts a refresh ahead (a ``SilentRefreshPolicy``'s
    /// advisory window, jittered); `nil` when none is due for this model (no policy, or one
    /// was tried and may not be tried again).
    var refreshAheadAt: Date?
  }

  /// A failure the key remembers (``SilentRefreshPolicy``): until `until` (on the injected
  /// clock) requests get it at once instead of starting a flight.
  struct Cooldown: Equatable {
    var error: AuthCoordinatorError
    var until: Duration
  }

  struct Loading: Equatable {
    var id: UInt64
    /// Tokens that forced-refresh joiners rejected while the store was being read.
    var rejectedTokens: Set<String> = []
    /// A forced-refresh joiner rejected whatever the store holds (it named no token).
    var rejectsStoredModel = false
    /// A forced refresh joined: an authorization the load leads to counts for the loop guard.
    var hasForcedRequest = false

    /// Records what a forced refresh that joins (or starts) the load rejects.
    mutating func note(_ rejection: Rejection) {
      switch rejection {
      case .none: return
      case .token(let token): rejectedTokens.insert(token)
      case .storedModel: rejectsStoredModel = true
      case .nothing: break
      }
      hasForcedRequest = true
    }
  }

  /// A flight that must authorize, before it calls the authorizer: it waits for an earlier
  /// flight's refresh still running, takes the cross-process lease (or waits for its holder),
  /// and re-reads the store, which may hold a model another process obtained meanwhile.
  struct Preparing: Equatable {
    enum Stage: Equatable {
      /// The refresh-loop guard holds the authorization back (a non-interactive authorizer).
      case backingOff
      /// Waiting for stopped flights of the key whose refresh is still running: a new one
      /// would spend the same refresh token.
      case awaitingPredecessors
      /// A silent authorizer failed transiently: the flight waits out its back-off, then calls
      /// it again (attempt `attempt`, counted from 1), keeping the lease if it holds one.
      case awaitingRetry(attempt: Int)
      /// The retry's back-off is over: confirming the lease and re-reading the store under
      /// it before attempt `attempt` spends a refresh token (``StepKind/confirmLease``).
      case confirmingLease(attempt: Int)
      /// Taking the cross-process lease.
      case acquiringLease
      /// Another process holds the lease: waiting for its result (or for its lease to lapse).
      case awaitingHolder
      /// Reading the store.
      case rereading
      /// The re-read under the lease found memory's unsaved model newer than the store's: the
      /// lease is asked whether a sign-out came since that model's grant
      /// (``StepKind/checkUnsavedGrant(_:)``), before its refresh token is spent.
      case askingAboutUnsaved
      /// The re-read found this model to adopt; giving the lease back before the callers
      /// resume (a process may exit as soon as they have it).
      case releasing(AuthModel)

      /// A store read is in progress, bounded by ``Preparing/readDeadline``.
      var reads: Bool {
        switch self {
        case .rereading, .confirmingLease, .askingAboutUnsaved: return true
        default: return false
        }
      }
    }

    var id: UInt64
    var reason: AuthorizationReason
    /// Access tokens this flight's callers rejected: a stored model with one is not adopted.
    var rejectedTokens: Set<String>
    var stage: Stage
    /// The flight holds the cross-process lease.
    var holdsLease = false
    /// The authorization deadline is armed (it bounds waiting for the lease as well).
    var authorizationDeadlineArmed = false
    /// That deadline, once armed: a retry never waits past it.
    var authorizationDeadline: Duration?
    /// The deadline of the re-read in progress: an earlier read's deadline does not end it.
    var readDeadline: Duration?
    /// Which call into the authorizer the flight makes next, from 1.
    var attempt = 1
    /// An ordinary caller joined a refresh ahead (see ``Authorizing/callerJoined``).
    var callerJoined = false
    /// How many grants this flight lost before it could confirm one (``StepKind/confirmLease``).
    var leaseLosses = 0
    /// The flight lost the lease after its authorizer answered, and its save was refused or
    /// not made: it serves what the store holds, or fails; it never authorizes again (its
    /// refresh token is spent) and never serves its own result.
    var deposed = false
    /// The grant of memory's unsaved model that the lease said no sign-out came after, while
    /// the flight held its current grant: not asked about again until that grant is lost.
    var confirmedUnsavedGrant: LeaseGrant?
  }

  struct Authorizing: Equatable {
    var id: UInt64
    var reason: AuthorizationReason
    /// The authorizer entered its exchange: the authorization deadline no longer applies.
    var exchangeBegan = false
    /// The authorizer turned to the user (``AuthorizationRequest/interact(_:)``): a failure
    /// from now on is an interactive one, never retried or remembered.
    var interactionBegan = false
    /// The model being replaced has a refresh token: a stopped flight lets the authorizer
    /// finish (cancelling a refresh the server may have carried out would lose the rotated
    /// token) and persists its result.
    var spendsRefreshToken = false
    /// When (on the injected clock) the authorizer was called: a stopped refresh is abandoned
    /// ``Policy/maximumHold`` after it.
    var startedAt: Duration = .zero
    /// The flight holds the cross-process lease: it gives it back before its callers get the
    /// result (``AccountStateMachine/State/releasing(_:)``).
    var holdsLease = false
    /// Which call into the authorizer this is, from 1 (``SilentRefreshPolicy/maxAttempts``).
    var attempt = 1
    /// The flight's authorization deadline: a retry never waits past it.
    var deadline: Duration?
    /// Access tokens callers that joined rejected: never served stale (rule 27).
    var rejectedTokens: Set<String> = []
    /// An ordinary caller (one that may involve the user) joined a refresh ahead, which may
    /// not: if the authorizer needs the user, the flight authorizes again with the user.
    var callerJoined = false
    /// The refresh token the authorizer was handed (``AuthorizationRequest/replacing``): if
    /// the server refuses it, it is never handed out again.
    var spentRefreshToken: String?
  }
}
