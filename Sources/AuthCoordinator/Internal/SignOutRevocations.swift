import Foundation

/// What one sign-out revokes at the server (``Authorizer/revokesOnSignOut``): the decision,
/// kept apart from its effects (the store reads it asks for, the revocations the coordinator
/// runs after the sign-out took effect).
///
/// Each signed-out key contributes the model memory held, or, when memory never read the key
/// (its cache unknown), the store's model, which the coordinator reads inside the removal's
/// turn, before the removal. A logout of an account no key of which is in memory reads the
/// account's default key. A token is revoked once per sign-out, even when several keys held
/// it; a sign-out heard from another process never builds one (the process that signed out
/// revokes).
struct SignOutRevocations: Sendable {
  /// The models to revoke, in the order they were found.
  private(set) var models: [(key: AccountKey, model: AuthModel)] = []
  /// The keys whose model only the store knows.
  private(set) var keysToRead: [AccountKey] = []
  /// The token each planned revocation names (its refresh token, else its access token).
  private var tokens: Set<String> = []

  /// A key memory signs out.
  ///
  /// - Parameters:
  ///   - key: The key.
  ///   - cached: The model memory held, valid or not.
  ///   - cacheKnown: Whether memory knew the key's state (a model, or known empty); when not,
  ///     the store is asked.
  mutating func signedOut(_ key: AccountKey, cached: AuthModel?, cacheKnown: Bool) {
    if let cached {
      add(key, cached)
    } else if !cacheKnown {
      keysToRead.append(key)
    }
  }

  /// A logout of `account` that found none of its keys in memory: its default key is read.
  mutating func accountUnknownInMemory(_ account: String) {
    keysToRead.append(AccountKey(account: account))
  }

  /// What the store held for a key of ``keysToRead``.
  mutating func read(_ key: AccountKey, _ model: AuthModel?) {
    if let model { add(key, model) }
  }

  private mutating func add(_ key: AccountKey, _ model: AuthModel) {
    let token = model.refreshToken.flatMap { $0.isEmpty ? nil : $0 } ?? model.accessToken
    guard !token.isEmpty, tokens.insert(token).inserted else { return }
    models.append((key, model))
  }
}
