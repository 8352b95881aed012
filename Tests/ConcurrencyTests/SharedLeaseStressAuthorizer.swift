import AuthCoordinator
import Foundation
import SyncPrimitives

/// One simulated process's view of the shared ``InMemoryAuthorizationLease``: passes everything
/// through, and tells the ledger who holds which key until when, and when this process recorded
/// a sign-out. With faults on, some renewals throw (a transient failure of the lease's storage).
/// With pauses on, every operation waits while the process is paused, and the process may stop
/// just after a grant (``SharedStressPauses/Kind/acquire``) or during a renewal
/// (``SharedStressPauses/Kind/renewal``).
struct SharedStressLease: AuthorizationLease {
  struct RenewalFault: Error {}

  let inner: InMemoryAuthorizationLease
  let process: Int
  let ledger: SharedStressLedger
  let faults: SharedStressFaults
  let pauses: SharedStressPauses

  func acquire(_ key: AccountKey, owner: String, timeToLive: Duration) async -> LeaseAttempt {
    await pauses.gate(process)
    let attempt = await inner.acquire(key, owner: owner, timeToLive: timeToLive)
    if case .acquired(let grant) = attempt {
      ledger.held(key, process: process, fence: grant.fence, expiresAt: grant.expiresAt)
      if pauses.draw(.acquire, process: process, afterOperation: true) != nil {
        await pauses.gate(process)
      }
    }
    return attempt
  }

  func renew(_ grant: LeaseGrant, timeToLive: Duration) async throws -> LeaseGrant? {
    await pauses.gate(process)
    let after = pauses.enabled && pauses.drawAfterOperation()
    if !after, pauses.draw(.renewal, process: process) != nil { await pauses.gate(process) }
    if faults.renewalFails() { throw RenewalFault() }
    let renewed = await inner.renew(grant, timeToLive: timeToLive)
    if let renewed {
      ledger.held(
        renewed.key, process: process, fence: renewed.fence, expiresAt: renewed.expiresAt)
    }
    if after, pauses.draw(.renewal, process: process, afterOperation: true) != nil {
      await pauses.gate(process)
    }
    return renewed
  }

  func release(_ grant: LeaseGrant) async {
    await pauses.gate(process)
    // Forgotten first: a holder that takes the lease right after the release records itself
    // after this.
    ledger.released(grant.key, fence: grant.fence)
    await inner.release(grant)
  }

  func release(_ grant: LeaseGrant, backingOff backOff: LeaseBackOff) async {
    await pauses.gate(process)
    ledger.released(grant.key, fence: grant.fence)
    await inner.release(grant, backingOff: backOff)
  }

  func signOut(account: String, by owner: String) async {
    await pauses.gate(process)
    await inner.signOut(account: account, by: owner)
    ledger.signOutRecorded(process: process, mcUid: account)
  }

  func signOutAll(by owner: String) async {
    await pauses.gate(process)
    await inner.signOutAll(by: owner)
  }
  func revokeGrants(ofAccount account: String) async {
    await pauses.gate(process)
    await inner.revokeGrants(ofAccount: account)
  }
  func revokeAllGrants() async {
    await pauses.gate(process)
    await inner.revokeAllGrants()
  }
  func isCurrent(_ grant: LeaseGrant) async -> Bool {
    await pauses.gate(process)
    return await inner.isCurrent(grant)
  }
  func changes() -> AsyncStream<LeaseChange> { inner.changes() }
}

/// What a real refresh-token authorizer does, on the real clock, with faults: with
/// `request.replacing?.refreshToken` it spends that token at the ``SharedLeaseIssuer``,
/// otherwise it logs in. Before answering it waits a random time (sometimes past `latency`, this
/// process's authorization deadline unless the run says otherwise); some calls ignore
/// cancellation (the request reaches the server anyway), others stop at it without reaching the
/// server; some fail transiently before reaching the server. With faults on, some hang for
/// `hangFor` (past the maximum hold), ignoring cancellation, and then fail without reaching the
/// server.
///
/// In a run with pauses (``SharedStressPauses``), the request leaves when the coordinator calls
/// the authorizer, or when the process's pause ends if it is paused then (the wait that follows
/// is the network's and the server's), and its response reaches a paused process only when the
/// pause ends. `unavailablePercent` of the calls get the server's 503 with a `Retry-After` (a
/// transient ``AuthCoordinatorError``: the coordinator's silent-refresh policy retries it under
/// the lease) and the process may stop through the back-off
/// (``SharedStressPauses/Kind/backOff``); a process may stop after the server rotated the token,
/// before the response is back (``SharedStressPauses/Kind/afterRequest``). How long the process
/// was paused (by any pause) at the send, and between its request leaving and the response
/// arriving, is recorded in the ledger for the reuse classification. A refresh of a family the
/// server revoked logs in again (the user signs in anew), so that a reuse inside the stated
/// window does not end the run for that user.
final class SharedStressAuthorizer: Authorizer {
  struct TransientFailure: Error {}

  let process: Int
  let seed: UInt64
  let latency: Duration
  let hangFor: Duration
  let issuer: SharedLeaseIssuer
  let ledger: SharedStressLedger
  let faults: SharedStressFaults
  let pauses: SharedStressPauses
  let unavailablePercent: Double
  let isInteractive: Bool
  /// The process's lease time to live.
  let timeToLive: Duration
  private let calls = LockedState(UInt64(0))

  init(
    process: Int, seed: UInt64, latency: Duration, hangFor: Duration,
    issuer: SharedLeaseIssuer, ledger: SharedStressLedger, faults: SharedStressFaults,
    pauses: SharedStressPauses, timeToLive: Duration, unavailablePercent: Double = 0,
    isInteractive: Bool = true
  ) {
    self.process = process
    self.seed = seed
    self.latency = latency
    self.hangFor = hangFor
    self.issuer = issuer
    self.ledger = ledger
    self.faults = faults
    self.pauses = pauses
    self.unavailablePercent = unavailablePercent
    self.isInteractive = isInteractive
    self.timeToLive = timeToLive
  }

  func authorize(_ request: AuthorizationRequest) async throws -> AuthModel {
    let number = calls.withLock { count -> UInt64 in
      count += 1
      return count
    }
    let caller = "process \(process) call \(number) (\(request.reason))"
    // A paused process sends its request when the pause ends: a pause that began after the
    // coordinator's last step (its last check of the grant) and before the request left.
    let liveAtEntry = ledger.holdsLiveLease(request.key, process: process)
    await pauses.gate(process)
    if request.replacing?.refreshToken != nil {
      ledger.requestLeft(
        caller: caller, at: ContinuousClock.now, liveAtEntry: liveAtEntry,
        liveAtLeft: ledger.holdsLiveLease(request.key, process: process))
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

    let latencyMs =
      Int(latency.components.seconds * 1000)
      + Int(latency.components.attoseconds / 1_000_000_000_000_000)
    let delay: Duration =
      rng.chance(15)
      ? .milliseconds(Int.random(in: latencyMs * 6 / 10...latencyMs * 3 / 2, using: &rng))
      : .milliseconds(Int.random(in: 0...latencyMs / 2, using: &rng))
    let ignoresCancellation = rng.chance(30)
    let failsTransiently = rng.chance(8)
    let lifetime = Double.random(in: 0.05...0.5, using: &rng)
    let unavailable = rng.chance(unavailablePercent)
    let retryAfter = Duration.milliseconds(Int.random(in: 5...30, using: &rng))
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
    if unavailable {
      issuer.answerUnavailable()
      // The process may stop while it backs off; its coordinator's next step under the lease
      // (the retry's confirmation, or the release) waits until the pause ends.
      pauses.draw(.backOff, process: process)
      throw AuthCoordinatorError(
        .authorizationFailed, "the token endpoint answered 503", transient: true,
        retryAfter: retryAfter)
    }
    let model: AuthModel
    if let refreshToken, !(family.map(issuer.isRevoked) ?? false) {
      do {
        model = try issuer.refresh(
          refreshToken, mcUid: request.key.account, lifetime: lifetime, by: caller)
      } catch {
        if let reuse = issuer.reuse(by: caller) {
          let first = reuse.firstSpentBy.split(separator: " ").dropFirst().first.flatMap {
            Int($0)
          }
          ledger.noteReuse(
            by: caller,
            context: "pauses in the last 2 s of the reuser's process: "
              + "\(pauses.recentPauses(of: process, within: .seconds(2))), of the first "
              + "spender's: \(first.map { pauses.recentPauses(of: $0, within: .seconds(2)) } ?? [])"
          )
        }
        throw error
      }
    } else {
      model = issuer.login(mcUid: request.key.account, lifetime: lifetime, by: caller)
    }
    pauses.draw(.afterRequest, process: process)
    // The response reaches a paused process when the pause ends.
    await pauses.gate(process)
    return model
  }
}

/// One simulated process's view of the shared ``InMemoryTokenStore``, with a random latency
/// before and after every operation (up to `latency` in all, as a file store's reads and writes
/// take a little time), so that a logout's removal, a holder's save and a re-read interleave
/// across processes. It takes part in the lease (fenced saves). With faults on, some saves throw
/// before they write (a full disk, a lock held too long). With pauses on, every operation waits
/// while the process is paused, and the process may stop during a read it makes while it holds
/// the key's lease (``SharedStressPauses/Kind/reread``), before or after the read itself.
struct SharedStressStore: FencedTokenStore {
  struct SaveFault: Error {}

  let inner: InMemoryTokenStore
  let latency: Duration
  let rng: LockedState<SplitMix64>
  let faults: SharedStressFaults
  let process: Int
  let ledger: SharedStressLedger
  let pauses: SharedStressPauses

  init(
    inner: InMemoryTokenStore, latency: Duration, seed: UInt64, faults: SharedStressFaults,
    process: Int, ledger: SharedStressLedger, pauses: SharedStressPauses
  ) {
    self.inner = inner
    self.latency = latency
    rng = LockedState(SplitMix64(seed: seed))
    self.faults = faults
    self.process = process
    self.ledger = ledger
    self.pauses = pauses
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
    await pauses.gate(process)
    await pause()
    let holds = pauses.enabled && ledger.holdsLease(key, process: process)
    let after = holds && pauses.drawAfterOperation()
    if holds, !after, pauses.draw(.reread, process: process) != nil { await pauses.gate(process) }
    let model = await inner.model(for: key)
    if after, pauses.draw(.reread, process: process, afterOperation: true) != nil {
      await pauses.gate(process)
    }
    await pause()
    return model
  }

  func save(_ model: AuthModel, for key: AccountKey) async throws {
    await pauses.gate(process)
    await pause()
    if faults.saveFails() { throw SaveFault() }
    await inner.save(model, for: key)
    ledger.stored(refreshToken: model.refreshToken, key: key, process: process)
    await pause()
  }

  func save(_ model: AuthModel, for key: AccountKey, fence: UInt64) async throws -> Bool {
    await pauses.gate(process)
    await pause()
    if faults.saveFails() { throw SaveFault() }
    let saved = await inner.save(model, for: key, fence: fence)
    if saved { ledger.stored(refreshToken: model.refreshToken, key: key, process: process) }
    await pause()
    return saved
  }

  func removeModels(forAccount account: String) async {
    await pauses.gate(process)
    await pause()
    await inner.removeModels(forAccount: account)
    await pause()
  }

  func removeAll() async {
    await pauses.gate(process)
    await pause()
    await inner.removeAll()
    await pause()
  }
}
