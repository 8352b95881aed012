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

  struct Authorizing: Equatable {
    var id: UInt64
    var reason: AuthorizationReason
    /// The authorizer entered its exchange: the authorization deadline no longer applies.
    var exchangeBegan = false
  }
}
