import AuthCoordinator
import AuthCoordinatorOAuth2
import AuthCoordinatorTestKit
import Foundation
import Testing

@testable import TokenStore

// SIMULATED SERVERS, REAL PRODUCTS, VIRTUAL TIME (issue 24): the coordinator's silent-refresh
// policy with the real OAuth2Authorizer and BearerClient over the TestKit's in-process token
// server, on a ManualClock, the jitter pinned at the middle (each back-off is three quarters of
// its nominal length). Nothing sleeps; every time in these tests is the manual clock's.
@Suite(.timeLimit(.minutes(2))) struct SilentRefreshVirtualTimeTests {
  let clock = ManualClock()
  let tokenServer: SimulatedTokenServer
  let recorder: RequestTimes
  static let endpoint = URL(string: "https://auth.example.test/oauth/token")!
  static let reports = URL(string: "https://api.example.test/reports")!
  let key = AccountKey(account: "reports")

  init() {
    tokenServer = SimulatedTokenServer(
      clock: clock, tokenLifetime: .seconds(3600), date: clock.dateSource)
    recorder = RequestTimes(tokenServer, clock: clock)
  }

  /// A coordinator on the recording transport, with `silent` (by default the authorizer's
  /// own, which is `authorizers`), on `store` and `lease` (a replica of a fleet) when given.
  func coordinator(
    _ silent: SilentRefreshPolicy = .authorizersOwn,
    store: InMemoryTokenStore = InMemoryTokenStore(),
    lease: (any AuthorizationLease)? = nil, authorizers: SilentRefreshPolicy? = .recommended
  ) -> AuthCoordinator {
    var authorizer = OAuth2Authorizer(
      tokenEndpoint: Self.endpoint, clientID: "reports", timeout: .seconds(5),
      transport: recorder, now: clock.dateSource)
    authorizer.silentRefresh = authorizers
    var configuration = AuthCoordinator.Configuration(authorizationTimeout: .seconds(120))
    configuration.clock = clock
    configuration.now = clock.dateSource
    configuration.random = { 0.5 }
    configuration.silentRefresh = silent
    return AuthCoordinator(
      store: store, lease: lease, authorizer: authorizer, configuration: configuration)
  }

  func client(_ coordinator: AuthCoordinator) -> BearerClient {
    BearerClient(
      coordinator: coordinator, key: key, origin: Self.reports,
      transport: SimulatedResourceServer(tokenServer: tokenServer), deadline: .seconds(600),
      clock: clock)
  }

  /// `count` concurrent calls through `client`; their statuses.
  func calls(_ count: Int, _ client: BearerClient) async throws -> [Int] {
    try await withThrowingTaskGroup(of: Int.self) { group in
      for _ in 0..<count {
        group.addTask { try await client.data(from: Self.reports).1.statusCode }
      }
      return try await group.reduce(into: []) { $0.append($1) }
    }
  }

  @Test func aHitInTheWindowIsServedAtOnceAndOneBackgroundRefreshReplacesTheToken()
    async throws
  {
    let coordinator = coordinator()
    let client = client(coordinator)
    #expect(try await calls(1, client) == [200])
    let first = try await coordinator.authModel(for: key)
    // An hour's token: a 15-minute window, three quarters of it with the jitter pinned: the
    // refresh ahead is due 675 s before expiry, at 2925 s.
    clock.advance(by: .seconds(2920))
    #expect(try await calls(10, client) == Array(repeating: 200, count: 10))
    #expect(tokenServer.counters.tokenRequests == 1, "not yet due")
    clock.advance(by: .seconds(80))
    let events = coordinator.events
    #expect(try await calls(50, client) == Array(repeating: 200, count: 50))
    var ahead: UInt64?
    for await event in events {
      if case .refreshAheadStarted(_, let flight) = event { ahead = flight }
      if case .flightSucceeded(_, let flight, let waiters) = event, flight == ahead {
        #expect(waiters == 0, "nobody waited for it")
        break
      }
    }
    #expect(tokenServer.counters.tokenRequests == 2, "one background refresh for 50 hits")
    #expect(tokenServer.counters.refreshTokenGrants == 1)
    #expect(coordinator.statistics.refreshesAhead == 1)
    #expect(try await coordinator.authModel(for: key).accessToken != first.accessToken)
  }

  @Test func replicasSharingAStoreAndALeaseRefreshAheadWithOneTokenRequest() async throws {
    // Two replicas of a service: one store, one lease, one token server.
    let store = InMemoryTokenStore()
    let lease = InMemoryAuthorizationLease(now: clock.dateSource)
    let first = coordinator(store: store, lease: lease)
    let second = coordinator(store: store, lease: lease)
    let token = try await first.authModel(for: key)
    #expect(try await second.authModel(for: key) == token, "read from the shared store")
    clock.advance(by: .seconds(3000))
    // The first replica's hit refreshes ahead...
    let events = first.events
    #expect(try await first.authModel(for: key) == token)
    for await event in events {
      if case .flightSucceeded = event { break }
    }
    let renewed = try await first.authModel(for: key)
    #expect(renewed != token)
    // ...and the second's refresh ahead finds the renewed token in the store: no request.
    let secondEvents = second.events
    #expect(try await second.authModel(for: key) == token, "served at once")
    for await event in secondEvents {
      if case .flightSucceeded = event { break }
    }
    #expect(try await second.authModel(for: key) == renewed)
    #expect(recorder.times.count == 2, "one grant, one refresh ahead for the fleet")
    #expect(second.statistics.adoptedFromStore == 1)
  }

  @Test func aServerDownForFiveMinutesSeesOneRequestPerBackOffStepThenOneRefresh()
    async throws
  {
    let coordinator = coordinator()
    _ = try await coordinator.authModel(for: key)
    clock.advance(by: .seconds(3600))
    tokenServer.outage = .init(status: 503)
    let outageBegan = recorder.times.count
    // The first flight retries twice inside itself (0.75 s, then 1.5 s) with its caller.
    let first = Task { [key] in try await coordinator.authModel(for: key) }
    for step in [Duration.milliseconds(750), .milliseconds(1500)] {
      // The deadline scheduler and the back-off.
      await clock.waitForSleepers(2)
      clock.advance(by: step)
    }
    let error = await #expect(throws: AuthCoordinatorError.self) { try await first.value }
    #expect(error?.code == .tokenEndpointError)
    // Then one caller a second for five minutes. Each later back-off is longer than a flight
    // may wait (5 s): the flight fails at once and the key cools down for it.
    var failures = 0
    for _ in 0..<300 {
      clock.advance(by: .seconds(1))
      do { _ = try await coordinator.authModel(for: key) } catch { failures += 1 }
    }
    #expect(failures == 300, "nothing valid to serve while the server is down")
    let outage = Array(recorder.times[outageBegan...])
    let gaps = zip(outage.dropFirst(), outage).map { $0 - $1 }
    #expect(gaps.first == .milliseconds(750))
    #expect(gaps.allSatisfy { $0 >= .milliseconds(750) })
    #expect(zip(gaps.dropFirst(), gaps).allSatisfy { $0 >= $1 }, "the back-off never shrinks")
    #expect(gaps.suffix(5).allSatisfy { $0 >= .milliseconds(22_500) }, "capped at 30 s")
    #expect(outage.count <= 20, "\(outage.count) token requests for 301 callers")
    #expect(coordinator.statistics.failedFast > 250)

    // The server comes back: the first caller after the cooldown refreshes, once.
    tokenServer.outage = nil
    let before = recorder.times.count
    var served = 0
    for _ in 0..<60 {
      clock.advance(by: .seconds(1))
      if (try? await coordinator.authModel(for: key)) != nil { served += 1 }
    }
    #expect(recorder.times.count == before + 1, "exactly one token request after the outage")
    #expect(tokenServer.counters.refreshTokenGrants == 1)
    #expect(served >= 60 - 23, "served from the refresh on")
  }

  /// The lease a fleet's replicas share: in memory, or a file (read through real file I/O), both
  /// on the manual clock.
  enum FleetLease: CaseIterable, Sendable { case inMemory, file }

  @Test(arguments: FleetLease.allCases)
  func aFleetOfThreeReplicasSeesOneRequestPerBackOffStepThenOneRefresh(
    _ kind: FleetLease
  ) async throws {
    // Three replicas of a service: one store, one lease, one token server. One attempt per
    // flight, so that no flight waits on the manual clock inside itself.
    var silent = SilentRefreshPolicy.recommended
    silent.maxAttempts = 1
    let store = InMemoryTokenStore()
    let directory = FileManager.default.temporaryDirectory
      .appendingPathComponent("fleet-\(UUID().uuidString)", isDirectory: true)
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    let lease: any AuthorizationLease
    switch kind {
    case .inMemory:
      lease = InMemoryAuthorizationLease(now: clock.dateSource)
    case .file:
      // The host's boot clock, as the lease reads it, is the manual clock here.
      let clock = self.clock
      let host = HostClock(
        wall: clock.dateSource,
        boot: {
          let offset = clock.now.offset.components
          return BootInstant(
            boot: "manual",
            nanoseconds: UInt64(offset.seconds) * 1_000_000_000
              + UInt64(offset.attoseconds / 1_000_000_000))
        })
      lease = FileAuthorizationLease(url: directory.appendingPathComponent("lease"), clock: host)
    }
    let replicas = (0..<3).map { _ in coordinator(silent, store: store, lease: lease) }
    _ = try await replicas[0].authModel(for: key)
    clock.advance(by: .seconds(3600))
    tokenServer.outage = .init(status: 503)
    let outageBegan = recorder.times.count
    // Five minutes, each replica called once a second, a different one first each second:
    // whichever takes the lease after a back-off, the next back-off grows from the fleet's
    // failures, not from its own.
    var failures = 0
    for second in 0..<300 {
      clock.advance(by: .seconds(1))
      for index in 0..<3 {
        let replica = replicas[(second + index) % 3]
        do { _ = try await replica.authModel(for: key) } catch { failures += 1 }
      }
    }
    #expect(failures == 900, "nothing valid to serve while the server is down")
    let outage = Array(recorder.times[outageBegan...])
    let gaps = zip(outage.dropFirst(), outage).map { $0 - $1 }
    #expect(gaps.allSatisfy { $0 >= .seconds(1) }, "one request per back-off step: \(gaps)")
    #expect(zip(gaps.dropFirst(), gaps).allSatisfy { $0 >= $1 }, "the back-off never shrinks")
    #expect(gaps.suffix(5).allSatisfy { $0 >= .milliseconds(22_500) }, "capped at 30 s")
    #expect(outage.count <= 20, "\(outage.count) token requests for 900 callers of 3 replicas")
    for replica in replicas.dropFirst() {
      #expect(replica.statistics.cooldownsEntered > 0, "told to back off by the lease")
    }

    // The server comes back: the first caller after the back-off refreshes, once, for the
    // fleet; the others adopt its token from the store.
    tokenServer.outage = nil
    let before = recorder.times.count
    for second in 0..<60 {
      clock.advance(by: .seconds(1))
      for index in 0..<3 {
        _ = try? await replicas[(second + index) % 3].authModel(for: key)
      }
    }
    #expect(recorder.times.count == before + 1, "exactly one token request after the outage")
    #expect(tokenServer.counters.refreshTokenGrants == 1)
    var tokens: Set<String> = []
    for replica in replicas { tokens.insert(try await replica.authModel(for: key).accessToken) }
    #expect(tokens.count == 1, "every replica serves the one refreshed token")
  }

  @Test func staleIfErrorServesTheUnexpiredTokenWhileTheServerIsDownAndNeverPastItsExpiry()
    async throws
  {
    var silent = SilentRefreshPolicy.recommended
    silent.refreshAhead = nil
    silent.servesStaleOnError = true
    let coordinator = coordinator(silent)
    let client = client(coordinator)
    let events = coordinator.events
    #expect(try await calls(1, client) == [200])
    let cached = try await coordinator.authModel(for: key)
    // Inside the 60 s leeway, the server down and asking for 20 s.
    clock.advance(by: .seconds(3570))
    tokenServer.outage = .init(status: 503, retryAfter: "20")
    #expect(try await calls(5, client) == Array(repeating: 200, count: 5))
    let stale = try await coordinator.authModel(for: key)
    #expect(stale == cached, "the same model, with its own expiry")
    #expect(coordinator.statistics.staleServed == 6)
    #expect(tokenServer.counters.tokenRequests == 2, "one failed refresh, then the cooldown")
    for await event in events {
      if case .staleServed = event { break }
    }
    // Past its expiry it is never served, however long the outage.
    clock.advance(by: .seconds(31))
    let expired = await #expect(throws: AuthCoordinatorError.self) {
      try await coordinator.authModel(for: key)
    }
    #expect(expired?.code == .tokenEndpointError)
  }
}

extension SilentRefreshVirtualTimeTests {
  // Before the fix the configuration's policy was an optional, `nil` by default, and
  // `configuration.silentRefresh?.servesStaleOnError = true` changed nothing: the first wave
  // in the outage failed with `token_endpoint_error` (issue 37).
  @Test func aFieldSetOnAFreshConfigurationChangesTheAuthorizersOwnPolicy() async throws {
    var authorizers = SilentRefreshPolicy.recommended
    authorizers.refreshAhead = nil
    authorizers.maxAttempts = 1
    var fresh = AuthCoordinator.Configuration().silentRefresh
    fresh.servesStaleOnError = true
    let coordinator = coordinator(fresh, authorizers: authorizers)
    let client = client(coordinator)
    let events = coordinator.events
    #expect(try await calls(1, client) == [200])
    let cached = try await coordinator.authModel(for: key)
    // Well inside the 15-minute window of the recommended policy: the authorizer's own has no
    // refresh ahead, and that is what applies.
    clock.advance(by: .seconds(3000))
    #expect(try await calls(5, client) == Array(repeating: 200, count: 5))
    #expect(tokenServer.counters.tokenRequests == 1, "no refresh ahead")
    // Inside the leeway, the server down: stale-if-error, set on the configuration, serves the
    // cached model after the authorizer's one attempt.
    clock.advance(by: .seconds(570))
    tokenServer.outage = .init(status: 503, retryAfter: "20")
    #expect(try await calls(5, client) == Array(repeating: 200, count: 5))
    #expect(try await coordinator.authModel(for: key) == cached)
    #expect(coordinator.statistics.staleServed == 6)
    #expect(tokenServer.counters.tokenRequests == 2, "one attempt, then the remembered failure")
    for await event in events {
      #expect(!isRefreshAhead(event))
      if case .staleServed = event { break }
    }
  }

  private func isRefreshAhead(_ event: AuthEvent) -> Bool {
    if case .refreshAheadStarted = event { return true }
    return false
  }
}

/// The token server's transport, recording the manual clock's time of every token request.
final class RequestTimes: HTTPTransport, @unchecked Sendable {
  private let server: SimulatedTokenServer
  private let clock: ManualClock
  private let lock = NSLock()
  private var recorded: [Duration] = []

  init(_ server: SimulatedTokenServer, clock: ManualClock) {
    self.server = server
    self.clock = clock
  }

  /// The times of the token requests so far, in order.
  var times: [Duration] { lock.withLock { recorded } }

  func send(_ request: HTTPTransportRequest) async throws -> HTTPTransportOutcome {
    let now = clock.now.offset
    lock.withLock { recorded.append(now) }
    return try await server.send(request)
  }
}
