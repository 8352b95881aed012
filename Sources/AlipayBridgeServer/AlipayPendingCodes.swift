import AuthCoordinator
import SyncPrimitives

/// A small locked inbox of auth codes waiting to be redeemed, one per account key: what
/// ``AlipayTokenService/signIn(authCode:mcUid:)`` deposits and ``AlipayTokenAuthorizer`` takes.
///
/// A code is taken at most once: ``take(for:)`` removes it. A later deposit for the same key
/// replaces an earlier one that was never taken (the newer code is the user's latest consent).
public final class AlipayPendingCodes: Sendable {
  private let codes = LockedState<[AccountKey: String]>([:])

  /// Creates an empty inbox.
  public init() {}

  /// Deposits `code` for `key`, replacing a code not yet taken.
  ///
  /// - Parameters:
  ///   - code: The auth code.
  ///   - key: The account it signs in.
  public func deposit(_ code: String, for key: AccountKey) {
    codes.withLock { $0[key] = code }
  }

  /// Takes the code deposited for `key`, if any: it is removed, so no one takes it again.
  ///
  /// - Parameter key: The account.
  /// - Returns: The code, or `nil` when none waits.
  public func take(for key: AccountKey) -> String? {
    codes.withLock { $0.removeValue(forKey: key) }
  }

  /// Removes the code deposited for `key` if it is still `code` (a sign-in that ended without
  /// its code being taken).
  ///
  /// - Parameters:
  ///   - code: The code deposited.
  ///   - key: The account.
  /// - Returns: Whether the code was still waiting.
  @discardableResult
  public func withdraw(_ code: String, for key: AccountKey) -> Bool {
    codes.withLock { codes in
      guard codes[key] == code else { return false }
      codes[key] = nil
      return true
    }
  }

  /// Whether `code` still waits for `key` (no flight took it yet).
  ///
  /// - Parameters:
  ///   - code: An auth code deposited for `key`.
  ///   - key: The account.
  /// - Returns: `true` while it waits.
  public func holds(_ code: String, for key: AccountKey) -> Bool {
    codes.withLock { $0[key] == code }
  }

  /// Whether a code waits for `key`.
  ///
  /// - Parameter key: The account.
  /// - Returns: `true` when a code waits.
  public func hasCode(for key: AccountKey) -> Bool {
    codes.withLock { $0[key] != nil }
  }
}
