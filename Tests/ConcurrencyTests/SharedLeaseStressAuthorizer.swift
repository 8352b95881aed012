import AuthCoordinator
import Foundation
import SyncPrimitives

/// One simulated process's view of the shared ``InMemoryAuthorizationLease``: passes everything
/// through, and tells the ledger who holds which key until when, and when this process recorded
/// a sign-out. With faults on, some renewals throw (a transient failure of the lease's storage).
struct SharedStressLease: AuthorizationLease {
  struct RenewalFault: Error {}

  let inner: InMemoryAuthorizationLease
  let process: Int
  let ledger: SharedStressLedger
  let faults: SharedStressFaults

  func acquire(_ key: AccountKey, owner: String, timeToLive: Duration) async -> LeaseAttempt {
    let attempt = await inner.acquire(key, owner: owner, timeToLive: timeToLive)
    if case .acquired(let grant) = attempt {
      ledger.held(key, process: process, fence: grant.fence, expiresAt: grant.expiresAt)
    }
    return attempt
  }

  func renew(_ grant: LeaseGrant, timeToLive: Duration) async throws -> LeaseGrant? {
    if faults.renewalFails() { throw RenewalFault() }
    let renewed = await inner.renew(grant, timeToLive: timeToLive)
    if let renewed {
      ledger.held(
        renewed.key, process: process, fence: renewed.fence, expiresAt: renewed.expiresAt)
    }
    return renewed
  }

  func release(_ grant: LeaseGrant) async {
    // Forgotten first: a holder that takes the lease right after the release records itself
    // after this.
    ledger.released(grant.key, fence: grant.fence)
    await inner.release(grant)
  }

  func signOut(account: String, by owner: String) async {
    await inner.signOut(account: account, by: owner)
    ledger.signOutRecorded(process: process, mcUid: account)
  }

  func signOutAll(by owner: String) async { await inner.signOutAll(by: owner) }
  func revokeGrants(ofAccount account: String) async {
    await inner.revokeGrants(ofAccount: account)
  }
  func revokeAllGrants() async { await inner.revokeAllGrants() }
  func isCurrent(_ grant: LeaseGrant) async -> Bool { await inner.isCurrent(grant) }
  func changes() -> AsyncStream<LeaseChange> { inner.changes() }
}

/// What a real refresh-token authorizer does, on the real clock, with faults: with
/// `request.replacing?.refreshToken` it spends that token at the ``SharedLeaseIssuer``,
/// otherwise it logs in. Before answering it waits a random time (sometimes past this process's
/// authorization deadline); some calls ignore cancellation (the request reaches the server
/// anyway), others stop at it without reaching the server; some fail transiently before
/// reaching the server. With faults on, some hang for `hangFor` (past the maximum hold),
/// ignoring cancellation, and then fail without reaching the server.
final class SharedStressAuthorizer: Authorizer {
  struct TransientFailure: Error {}

  let process: Int
  let seed: UInt64
  let deadline: Duration
  let hangFor: Duration
  let issuer: SharedLeaseIssuer
  let ledger: SharedStressLedger
  let faults: SharedStressFaults
  private let calls = LockedState(UInt64(0))

  init(
    process: Int, seed: UInt64, deadline: Duration, hangFor: Duration,
    issuer: SharedLeaseIssuer, ledger: SharedStressLedger, faults: SharedStressFaults
  ) {
    self.process = process
    self.seed = seed
    self.deadline = deadline
    self.hangFor = hangFor
    self.issuer = issuer
    self.ledger = ledger
    self.faults = faults
  }

  func authorize(_ request: AuthorizationRequest) async throws -> AuthModel {
    let number = calls.withLock { count -> UInt64 in
      count += 1
      return count
    }
    var rng = SplitMix64(seed: SplitMix64.hash(seed, UInt64(process), number))
    let refreshToken = request.replacing?.refreshToken
    let family = refreshToken.flatMap(issuer.family(ofRefreshToken:))
    let flight = ledger.authorizationBegan(process: process, key: request.key, family: family)
    defer { ledger.authorizationEnded(flight) }
    if faults.callHangs() {
      ledger.authorizationHangs(flight)
      await Task { [hangFor] in try? await Task.sleep(for: hangFor) }.value
      throw TransientFailure()
    }

    let deadlineMs =
      Int(deadline.components.seconds * 1000)
      + Int(deadline.components.attoseconds / 1_000_000_000_000_000)
    let delay: Duration =
      rng.chance(15)
      ? .milliseconds(Int.random(in: deadlineMs * 6 / 10...deadlineMs * 3 / 2, using: &rng))
      : .milliseconds(Int.random(in: 0...deadlineMs / 2, using: &rng))
    let ignoresCancellation = rng.chance(30)
    let failsTransiently = rng.chance(8)
    let lifetime = Double.random(in: 0.05...0.5, using: &rng)
    let ledger = ledger
    try await withTaskCancellationHandler {
      if ignoresCancellation {
        // An unstructured task does not inherit the cancellation.
        await Task { try? await Task.sleep(for: delay) }.value
      } else {
        try await Task.sleep(for: delay)
      }
    } onCancel: {
      ledger.authorizationCancelled(flight)
    }
    if failsTransiently { throw TransientFailure() }
    let caller = "process \(process) call \(number) (\(request.reason))"
    if let refreshToken {
      return try issuer.refresh(
        refreshToken, mcUid: request.key.mcUid, lifetime: lifetime, by: caller)
    }
    return issuer.login(mcUid: request.key.mcUid, lifetime: lifetime, by: caller)
  }
}

/// The shared ``InMemoryTokenStore`` with a random latency before and after every operation
/// (up to `latency` in all, as a file store's reads and writes take a little time), so that a
/// logout's removal, a holder's save and a re-read interleave across processes. It takes part
/// in the lease (fenced saves). With faults on, some saves throw before they write (a full disk,
/// a lock held too long).
struct SharedStressStore: FencedTokenStore {
  struct SaveFault: Error {}

  let inner: InMemoryTokenStore
  let latency: Duration
  let rng: LockedState<SplitMix64>
  let faults: SharedStressFaults

  init(inner: InMemoryTokenStore, latency: Duration, seed: UInt64, faults: SharedStressFaults) {
    self.inner = inner
    self.latency = latency
    rng = LockedState(SplitMix64(seed: seed))
    self.faults = faults
  }

  private func pause() async {
    let microseconds =
      Int(latency.components.seconds * 1_000_000)
      + Int(latency.components.attoseconds / 1_000_000_000_000)
    guard microseconds > 1 else { return }
    let pause = rng.withLock { Int.random(in: 0...microseconds / 2, using: &$0) }
    if pause > 0 { try? await Task.sleep(for: .microseconds(pause)) }
  }

  func model(for key: AccountKey) async -> AuthModel? {
    await pause()
    let model = await inner.model(for: key)
    await pause()
    return model
  }

  func save(_ model: AuthModel, for key: AccountKey) async throws {
    await pause()
    if faults.saveFails() { throw SaveFault() }
    await inner.save(model, for: key)
    await pause()
  }

  func save(_ model: AuthModel, for key: AccountKey, fence: UInt64) async throws -> Bool {
    await pause()
    if faults.saveFails() { throw SaveFault() }
    let saved = await inner.save(model, for: key, fence: fence)
    await pause()
    return saved
  }

  func removeModels(forAccount account: String) async {
    await pause()
    await inner.removeModels(forAccount: account)
    await pause()
  }

  func removeAll() async {
    await pause()
    await inner.removeAll()
    await pause()
  }
}
