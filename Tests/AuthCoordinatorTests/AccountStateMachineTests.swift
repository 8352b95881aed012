import Foundation
import Testing

@testable import AuthCoordinator

/// The per-key decisions, tested synchronously: no tasks, no clocks, only events and the exact
/// actions they return. Impossible transitions are `preconditionFailure`s and are not tested.
@Suite(.timeLimit(.minutes(2))) struct AccountStateMachineTests: StateMachineFixture {
  @Test func aColdRequestStartsALoadBoundedByTheStoreTimeout() {
    var machine = coldMachine()
    #expect(
      machine.request(.ifNeeded, date: date, now: .seconds(5), newFlightID: 7)
        == .start(flight: 7, load(by: .seconds(12))))
    #expect(machine.flightID == 7)
    #expect(
      machine.request(.ifNeeded, date: date, now: .seconds(6), newFlightID: noNewFlight())
        == .join(flight: 7))
    #expect(machine.cachedModel == nil)
    #expect(!machine.isEvictable(now: .seconds(1000)), "a key with a flight is never evicted")
  }

  @Test func aLoadOfAValidModelEndsTheFlightAndServesIt() {
    var machine = coldMachine()
    _ = machine.request(.ifNeeded, date: date, now: .zero, newFlightID: 1)
    let action = machine.advance(1, .loaded(model("t1")), date: date, now: .seconds(1))
    #expect(action == .end(Ending(flight: 1, result: .succeeded(model("t1")))))
    #expect(machine.flightID == nil)
    #expect(machine.cachedModel == model("t1"))
    #expect(
      machine.request(.ifNeeded, date: date, now: .seconds(2), newFlightID: noNewFlight())
        == .serve(model("t1")))
    #expect(machine.isEvictable(now: .seconds(2)))
  }

  @Test func aLoadOfNothingAuthorizesInTheSameFlight() {
    var machine = coldMachine()
    _ = machine.request(.ifNeeded, date: date, now: .zero, newFlightID: 1)
    #expect(
      machine.advance(1, .loaded(nil), date: date, now: .seconds(3))
        == .next(authorize(.missing, by: .seconds(123))))
    #expect(machine.flightID == 1)
    #expect(machine.cachedModel == nil)
    #expect(
      machine.request(.ifNeeded, date: date, now: .seconds(4), newFlightID: noNewFlight())
        == .join(flight: 1))
  }

  @Test func aLoadOfAnExpiredModelAuthorizesInTheSameFlight() {
    for expiresIn: TimeInterval in [-10, 30, 60] {
      var machine = coldMachine()
      _ = machine.request(.ifNeeded, date: date, now: .zero, newFlightID: 1)
      #expect(
        machine.advance(1, .loaded(model("t0", expiresIn: expiresIn)), date: date, now: .zero)
          == .next(
            authorize(.expired, by: .seconds(120), replacing: model("t0", expiresIn: expiresIn))),
        "a model expiring in \(expiresIn) s is inside the 60 s leeway")
      #expect(machine.cachedModel == model("t0", expiresIn: expiresIn), "kept, but not served")
      #expect(machine.servableModel(at: date) == nil)
    }
  }

  @Test func aModelWithinTheLeewayCountsAsExpired() {
    var machine = self.machine(holding: model("t1", expiresIn: 61))
    #expect(
      machine.request(.ifNeeded, date: date, now: .zero, newFlightID: noNewFlight())
        == .serve(model("t1", expiresIn: 61)))
    #expect(
      machine.request(
        .ifNeeded, date: date.addingTimeInterval(2), now: .seconds(10), newFlightID: 2)
        == .start(flight: 2, load(by: .seconds(17))), "the store is read again first")
    #expect(
      machine.advance(
        2, .loaded(model("t1", expiresIn: 61)), date: date.addingTimeInterval(2),
        now: .seconds(11))
        == .next(authorize(.expired, by: .seconds(131), replacing: model("t1", expiresIn: 61))),
      "the store holds the same model: it is inside the leeway too")
  }

  @Test func anAuthorizationPersistsThenCompletes() {
    var machine = self.machine(holding: nil)
    #expect(
      machine.request(.ifNeeded, date: date, now: .seconds(10), newFlightID: 2)
        == .start(flight: 2, load(by: .seconds(17))))
    #expect(
      machine.advance(2, .loaded(nil), date: date, now: .seconds(11))
        == .next(authorize(.missing, by: .seconds(131))))
    #expect(
      machine.advance(2, .authorized(.success(model("t2"))), date: date, now: .seconds(50))
        == .next(persist(model("t2"), by: .seconds(57))))
    #expect(machine.cachedModel == nil, "the model is cached only once persisted")
    #expect(machine.servableModel(at: date) == nil)
    #expect(machine.flightID == 2)
    #expect(
      machine.request(.ifNeeded, date: date, now: .seconds(51), newFlightID: noNewFlight())
        == .join(flight: 2))
    let end = machine.advance(2, .saved, date: date, now: .seconds(52))
    #expect(end == .end(Ending(flight: 2, result: .succeeded(model("t2")))))
    #expect(machine.cachedModel == model("t2"))
    #expect(machine.flightID == nil)
    #expect(
      machine.request(.ifNeeded, date: date, now: .seconds(53), newFlightID: noNewFlight())
        == .serve(model("t2")))
  }

  @Test func aFailedAuthorizationEndsTheFlightAndIsNotCached() {
    var machine = self.machine(holding: nil)
    _ = machine.request(.ifNeeded, date: date, now: .zero, newFlightID: 2)
    _ = machine.advance(2, .loaded(nil), date: date, now: .zero)
    let action = machine.advance(
      2, .authorized(.failure(.init(.userCancelled))), date: date, now: .zero)
    #expect(action == .end(Ending(flight: 2, result: .failed(.init(.userCancelled)))))
    if case .end(let ending) = action {
      #expect(!ending.stopsWork)
      #expect(ending.followers == .askAgain)
    }
    #expect(machine.flightID == nil)
    #expect(machine.cachedModel == nil)
    #expect(
      machine.request(.ifNeeded, date: date, now: .seconds(1), newFlightID: 3)
        == .start(flight: 3, load(by: .seconds(8))))
    #expect(
      machine.advance(3, .loaded(nil), date: date, now: .seconds(2))
        == .next(authorize(.missing, by: .seconds(122))))
  }

  @Test func aFailedRenewalKeepsTheExpiredModelUnserved() {
    var machine = self.machine(holding: model("t0", expiresIn: 10))
    #expect(machine.cachedModel == model("t0", expiresIn: 10))
    #expect(machine.servableModel(at: date) == nil)
    #expect(
      machine.request(.ifNeeded, date: date, now: .zero, newFlightID: 2)
        == .start(flight: 2, load(by: .seconds(7))))
    #expect(
      machine.advance(2, .loaded(model("t0", expiresIn: 10)), date: date, now: .zero)
        == .next(authorize(.expired, by: .seconds(120), replacing: model("t0", expiresIn: 10))))
  }

  @Test(arguments: FlightInProgress.allCases)
  func staleOutcomesChangeNothing(_ phase: FlightInProgress) {
    var (machine, id) = self.machine(in: phase)
    let cached = machine.cachedModel
    #expect(machine.advance(99, .loaded(model("x")), date: date, now: .zero) == .ignore)
    #expect(machine.advance(99, .loaded(nil), date: date, now: .zero) == .ignore)
    #expect(machine.advance(99, .saved, date: date, now: .zero) == .ignore)
    #expect(
      machine.advance(99, .authorized(.success(model("x"))), date: date, now: .zero)
        == .discardLateResult)
    #expect(
      machine.advance(99, .authorized(.failure(.init(.userCancelled))), date: date, now: .zero)
        == .discardLateResult)
    for outcome: Machine.StepOutcome in [
      .signedOutElsewhere, .predecessorsFinished, .leaseAttempted(.acquired),
      .leaseAttempted(.heldElsewhere(until: date)), .leaseAttempted(.failed(.init(.storeFailed))),
      .leaseHolderChanged, .lateResultSaved(model("x")), .lateResultSaved(nil),
      .lateResultSignedOut,
    ] {
      #expect(machine.advance(99, outcome, date: date, now: .zero) == .ignore, "\(outcome)")
    }
    #expect(machine.predecessors.isEmpty)
    #expect(machine.lastWaiterLeft(99) == .ignore)
    #expect(machine.exchangeBegan(99, now: .zero) == nil)
    for deadline in [AuthEvent.FlightPhase.load, .authorization, .exchange, .save] {
      #expect(machine.deadlineReached(99, phase: deadline, date: date) == nil)
    }
    #expect(machine.flightID == id)
    #expect(machine.cachedModel == cached)
    // The flight goes on undisturbed.
    switch phase {
    case .loading, .rereading:
      #expect(
        machine.advance(id, .loaded(nil), date: date, now: .zero)
          == .next(authorize(.missing, by: .seconds(120))))
    case .authorizing:
      #expect(
        machine.advance(id, .authorized(.success(model("t2"))), date: date, now: .zero)
          == .next(persist(model("t2"), by: .seconds(7))))
    case .persisting:
      #expect(
        machine.advance(id, .saved, date: date, now: .zero)
          == .end(Ending(flight: id, result: .succeeded(model("t2")))))
    }
  }

  @Test func outcomesForAnIdleKeyAreStale() {
    var machine = self.machine(holding: model("t1"))
    #expect(machine.advance(1, .loaded(model("x")), date: date, now: .zero) == .ignore)
    #expect(machine.advance(1, .saved, date: date, now: .zero) == .ignore)
    #expect(
      machine.advance(1, .authorized(.success(model("x"))), date: date, now: .zero)
        == .discardLateResult)
    #expect(machine.lastWaiterLeft(1) == .ignore)
    #expect(machine.cachedModel == model("t1"), "a late result is never cached")
  }

  @Test func servableModelIsTheCachedModelWhileValid() {
    var cold = coldMachine()
    #expect(cold.servableModel(at: date) == nil)
    _ = cold.request(.ifNeeded, date: date, now: .zero, newFlightID: 1)
    _ = cold.advance(1, .loaded(nil), date: date, now: .zero)
    #expect(cold.servableModel(at: date) == nil, "known to be empty")

    let warm = machine(holding: model("t1", expiresIn: 3600))
    #expect(warm.servableModel(at: date) == model("t1", expiresIn: 3600))
    #expect(
      warm.servableModel(at: date.addingTimeInterval(3539)) == model("t1", expiresIn: 3600))
    #expect(warm.servableModel(at: date.addingTimeInterval(3540)) == nil, "inside the leeway")
    #expect(warm.cachedModel == model("t1", expiresIn: 3600), "still cached")

    let forever = machine(holding: model("t1", expiresIn: nil))
    #expect(
      forever.servableModel(at: date.addingTimeInterval(1e9)) == model("t1", expiresIn: nil))
  }

  @Test(arguments: FlightInProgress.allCases)
  func anOrdinaryRequestJoinsTheFlightInProgress(_ phase: FlightInProgress) {
    var (machine, id) = self.machine(in: phase)
    #expect(
      machine.request(.ifNeeded, date: date, now: .seconds(1), newFlightID: noNewFlight())
        == .join(flight: id))
    #expect(machine.flightID == id)
  }
}

// MARK: - Fixture

/// The flight a machine can be put in by ``StateMachineFixture/machine(in:policy:)``.
enum FlightInProgress: CaseIterable, Sendable {
  /// Flight 1 reading the store of a cold key.
  case loading
  /// Flight 2 re-reading the store of a key known to be empty, before it authorizes (no lease).
  case rereading
  /// Flight 2 authorizing a key known to be empty (reason `.missing`), after its re-read found
  /// nothing.
  case authorizing
  /// Flight 2 saving the model `t2` it authorized.
  case persisting

  /// The outcome the phase's step would report.
  var lateOutcome: AccountStateMachine<TestFlight>.StepOutcome {
    switch self {
    case .loading, .rereading: return .loaded(nil)
    case .authorizing:
      return .authorized(
        .success(AuthModel(uid: "2088", accessToken: "late", mcUid: "u1", expiresAt: nil)))
    case .persisting: return .saved
    }
  }
}

/// The machine, not the flight's task, decides what a model of another user is worth.
@Suite struct AccountStateMachineOwnUserTests: StateMachineFixture {
  func stranger(_ token: String) -> AuthModel {
    AuthModel(
      uid: "2088", accessToken: token, mcUid: "u2", expiresAt: date.addingTimeInterval(3600))
  }

  @Test func aStoredModelOfAnotherUserReadsAsNothing() {
    var machine = coldMachine()
    _ = machine.request(.ifNeeded, date: date, now: .zero, newFlightID: 1)
    #expect(
      machine.advance(1, .loaded(stranger("s")), date: date, now: .seconds(1))
        == .next(authorize(.missing, by: .seconds(121))))
    #expect(machine.cachedModel == nil)
  }

  @Test func aModelOfAnotherUserReadWithTheGrantReadsAsNothing() {
    var machine = coldMachine(policy(usesLease: true))
    _ = machine.request(.ifNeeded, date: date, now: .zero, newFlightID: 1)
    _ = machine.advance(1, .loaded(nil), date: date, now: .seconds(1))
    #expect(
      machine.advance(
        1, .leaseAttempted(.acquiredWithRead(stranger("s"))), date: date, now: .seconds(2))
        == .next(authorize(.missing, by: nil)))
  }

  @Test func aStoredModelOfAUserWhoseRemovalFailedReadsAsNothing() {
    var machine = coldMachine(policy(usesLease: true))
    _ = machine.request(.ifNeeded, date: date, now: .zero, newFlightID: 1)
    #expect(
      machine.advance(1, .loaded(model("t-old")), date: date, now: .seconds(1), removalFailed: true)
        == .next(.init(kind: .acquireLease, deadline: .seconds(121))))
    #expect(machine.cachedModel == nil, "the signed-out user's model is not served")
    #expect(
      machine.advance(
        1, .leaseAttempted(.acquiredWithRead(model("t-old"))), date: date, now: .seconds(2),
        removalFailed: true)
        == .next(authorize(.missing, by: nil)))
  }

  @Test func anAuthorizersModelOfAnotherUserFailsTheFlight() {
    var machine = coldMachine()
    _ = machine.request(.ifNeeded, date: date, now: .zero, newFlightID: 1)
    _ = machine.advance(1, .loaded(nil), date: date, now: .seconds(1))
    guard
      case .end(let ending) = machine.advance(
        1, .authorized(.success(stranger("s"))), date: date, now: .seconds(2)),
      case .failed(let error) = ending.result
    else {
      Issue.record("a model of another user did not fail the flight")
      return
    }
    #expect(error.code == .authorizationFailed)
    #expect(machine.cachedModel == nil)
  }
}

/// Fixed dates, a policy with distinct timeouts (store 7 s, authorization 120 s, exchange 20 s),
/// and machines driven to a given state through the public events only.
protocol StateMachineFixture {}

/// The effects a machine under test holds: an identity, and whether its work was stopped.
final class TestFlight: FlightEffects {
  var workStopped = false

  static func == (lhs: TestFlight, rhs: TestFlight) -> Bool { lhs === rhs }
}

extension StateMachineFixture {
  typealias Machine = AccountStateMachine<TestFlight>
  typealias Ending = Machine.Ending

  var date: Date { Date(timeIntervalSince1970: 1_800_000_000) }
  var key: AccountKey { AccountKey(account: "u1") }
  var policy: Machine.Policy { policy() }

  func policy(
    maxForced: Int = 3, whenAbandoned: AuthCoordinator.AbandonPolicy = .cancel,
    usesLease: Bool = false
  ) -> Machine.Policy {
    Machine.Policy(
      refreshLeeway: 60, maxForcedAuthorizations: maxForced, loopWindow: .seconds(60),
      whenAbandoned: whenAbandoned, authorizationTimeout: .seconds(120),
      exchangeTimeout: .seconds(20), storeTimeout: .seconds(7), usesLease: usesLease)
  }

  func model(
    _ token: String, expiresIn: TimeInterval? = 3600, refreshToken: String? = nil
  ) -> AuthModel {
    AuthModel(
      uid: "2088", accessToken: token, mcUid: "u1",
      expiresAt: expiresIn.map { date.addingTimeInterval($0) }, refreshToken: refreshToken)
  }

  /// For requests that must not start a flight: drawing an id is a failure.
  func noNewFlight(_ location: SourceLocation = #_sourceLocation) -> UInt64 {
    Issue.record(
      "the request drew a flight id but must not start a flight", sourceLocation: location)
    return 0
  }

  func load(by deadline: Duration) -> Machine.Step { .init(kind: .load, deadline: deadline) }

  func authorize(
    _ reason: AuthorizationReason, by deadline: Duration?, replacing: AuthModel? = nil
  ) -> Machine.Step {
    .init(kind: .authorize(reason, replacing: replacing), deadline: deadline)
  }

  func persist(_ model: AuthModel, by deadline: Duration) -> Machine.Step {
    .init(kind: .persist(model), deadline: deadline)
  }

  func coldMachine(_ policy: Machine.Policy? = nil) -> Machine {
    Machine(key: key, policy: policy ?? self.policy)
  }

  /// An idle machine whose store was read in flight 1 and held `model`; when that is nothing or
  /// an expired model, the flight's authorization failed.
  func machine(holding model: AuthModel?, policy: Machine.Policy? = nil) -> Machine {
    var machine = coldMachine(policy)
    _ = machine.request(.ifNeeded, date: date, now: .zero, newFlightID: 1)
    if case .next = machine.advance(1, .loaded(model), date: date, now: .zero) {
      _ = machine.advance(
        1, .authorized(.failure(.init(.authorizationFailed))), date: date, now: .zero)
    }
    #expect(machine.flightID == nil)
    return machine
  }

  /// An idle machine that authorized `model` for a missing key in flight 1 and saved it at `date`.
  func machine(cachedFromAuthorization model: AuthModel, policy: Machine.Policy? = nil)
    -> Machine
  {
    var machine = coldMachine(policy)
    _ = machine.request(.ifNeeded, date: date, now: .zero, newFlightID: 1)
    _ = machine.advance(1, .loaded(nil), date: date, now: .zero)
    _ = machine.advance(1, .authorized(.success(model)), date: date, now: .zero)
    #expect(
      machine.advance(1, .saved, date: date, now: .zero)
        == .end(Ending(flight: 1, result: .succeeded(model))))
    return machine
  }

  /// A machine with a flight in `phase`, started at `.zero`, and the flight's id.
  func machine(in phase: FlightInProgress, policy: Machine.Policy? = nil) -> (Machine, UInt64) {
    switch phase {
    case .loading:
      var machine = coldMachine(policy)
      _ = machine.request(.ifNeeded, date: date, now: .zero, newFlightID: 1)
      return (machine, 1)
    case .rereading, .authorizing, .persisting:
      var machine = self.machine(holding: nil, policy: policy)
      _ = machine.request(.ifNeeded, date: date, now: .zero, newFlightID: 2)
      if phase != .rereading {
        _ = machine.advance(2, .loaded(nil), date: date, now: .zero)
      }
      if phase == .persisting {
        _ = machine.advance(2, .authorized(.success(model("t2"))), date: date, now: .zero)
      }
      #expect(machine.flightID == 2)
      return (machine, 2)
    }
  }
}
