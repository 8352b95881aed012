// A minimal stand-in for the one TokenStore type that
// Sources/AuthCoordinator/AuthCoordinatorError.swift mentions, so that scripts/fuzz-callback.sh
// can compile that file alone as the fuzz target's `AuthCoordinator` module. Keep it in step
// with Sources/TokenStore/AccountKey.swift (only the members used here).

/// Stand-in for `AccountKey` (used by an `AuthCoordinatorError` helper).
public struct AccountKey {
  public var account: String
}
