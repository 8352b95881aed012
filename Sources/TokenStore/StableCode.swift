/// The shape of every error code in the package: an open, string-backed value with a stable
/// name, compared by that name, that other modules (and your own code) extend with static
/// constants, and that prints as its name.
///
/// `TokenStoreError.Code`, `AuthCoordinatorError.Code`, `TokenExchangeError.Code`,
/// `InsideResult.Code` and the PostgreSQL package's `PostgresError.Code` conform; each declares
/// its stored `rawValue` and `init(rawValue:)` and its constants, nothing else.
public protocol StableCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible
where RawValue == String {}

extension StableCode {
  /// The code's stable name.
  public var description: String { rawValue }
}
