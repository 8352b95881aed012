import AuthCoordinator
import SyncPrimitives

/// A view of a shared `FencedTokenStore` whose fenced saves wait at ``gate``: a
/// process paused at its save while the test acts in the gap (a logout elsewhere, a takeover).
/// Each fenced save's answer, and what the shared store held for the key right after, is
/// recorded in ``saves``; the save then waits at ``recorded``, so that a test knows it is done
/// before it looks. Everything else goes straight to the store it wraps.
///
/// ```swift
/// let appStore = GatedFencedStore(shared)
/// let refreshing = Task { try await app.authModel(for: key) }
/// try await appStore.gate.waitUntilHeld()      // the app's save is held
/// await widget.accountStatusChanged(.logout(account: "u1"))
/// appStore.gate.open()
/// try await appStore.recorded.waitUntilHeld()  // the save is done and recorded
/// appStore.recorded.open()
/// #expect(appStore.saves.first?.stored == false)
/// ```
public final class GatedFencedStore: FencedTokenStore {
  /// One fenced save: whether it was stored, and what the store held for its key right after.
  public struct Save: Sendable {
    /// The store's answer.
    public var stored: Bool
    /// The model the store held for the key right after the save.
    public var heldAfter: AuthModel?
  }

  /// The store every call goes to.
  public let inner: any FencedTokenStore
  /// Holds each fenced save before it reaches ``inner`` (closed at first).
  public let gate = Gate(closed: true)
  /// Holds each fenced save after it was recorded (closed at first).
  public let recorded = Gate(closed: true)
  private let log = LockedState<[Save]>([])

  /// Wraps `inner`.
  ///
  /// - Parameter inner: The shared store.
  public init(_ inner: any FencedTokenStore) { self.inner = inner }

  /// The fenced saves so far, in order.
  public var saves: [Save] { log.withLock { $0 } }

  /// Reads `inner`.
  ///
  /// - Parameter key: The account.
  /// - Returns: What `inner` holds.
  /// - Throws: What `inner` throws.
  public func model(for key: AccountKey) async throws -> AuthModel? {
    try await inner.model(for: key)
  }

  /// Saves to `inner`, without a fence and without waiting.
  ///
  /// - Parameters:
  ///   - model: The model.
  ///   - key: The account.
  /// - Throws: What `inner` throws.
  public func save(_ model: AuthModel, for key: AccountKey) async throws {
    try await inner.save(model, for: key)
  }

  /// Waits at ``gate``, saves to `inner` with `fence`, records the answer and what `inner`
  /// then holds, and waits at ``recorded``.
  ///
  /// - Parameters:
  ///   - model: The model.
  ///   - key: The account.
  ///   - fence: The grant's fence.
  /// - Returns: `inner`'s answer.
  /// - Throws: What `inner` throws.
  public func save(_ model: AuthModel, for key: AccountKey, fence: UInt64) async throws -> Bool {
    await gate.pass()
    let stored = try await inner.save(model, for: key, fence: fence)
    let heldAfter = try await inner.model(for: key)
    log.withLock { $0.append(Save(stored: stored, heldAfter: heldAfter)) }
    await recorded.pass()
    return stored
  }

  /// Removes from `inner`.
  ///
  /// - Parameter account: The account.
  /// - Throws: What `inner` throws.
  public func removeModels(forAccount account: String) async throws {
    try await inner.removeModels(forAccount: account)
  }

  /// Removes from `inner`, with the revoked fence.
  ///
  /// - Parameters:
  ///   - account: The account.
  ///   - fence: The largest revoked fence.
  /// - Throws: What `inner` throws.
  public func removeModels(forAccount account: String, refusingFencesThrough fence: UInt64)
    async throws
  {
    try await inner.removeModels(forAccount: account, refusingFencesThrough: fence)
  }

  /// Removes everything from `inner`.
  ///
  /// - Throws: What `inner` throws.
  public func removeAll() async throws { try await inner.removeAll() }

  /// Removes everything from `inner`, with the revoked fence.
  ///
  /// - Parameter fence: The largest revoked fence.
  /// - Throws: What `inner` throws.
  public func removeAll(refusingFencesThrough fence: UInt64) async throws {
    try await inner.removeAll(refusingFencesThrough: fence)
  }
}
