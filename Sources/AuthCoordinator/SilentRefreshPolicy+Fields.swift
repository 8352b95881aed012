// A silent-refresh policy's fields as one value, and the set of those a configuration changed
// over the authorizer's own policy.

extension SilentRefreshPolicy {
  /// A policy's fields.
  struct Values: Sendable, Hashable {
    var refreshAhead: Window?
    var refreshAheadJitter: Double
    var maxAttempts: Int
    var retryDelay: Duration
    var maxRetryDelay: Duration
    var maxRetryWait: Duration
    var failureCooldown: Duration
    var servesStaleOnError: Bool

    /// Takes `fields` from `other`.
    mutating func merge(_ other: Values, fields: Fields) {
      if fields.contains(.refreshAhead) { refreshAhead = other.refreshAhead }
      if fields.contains(.refreshAheadJitter) { refreshAheadJitter = other.refreshAheadJitter }
      if fields.contains(.maxAttempts) { maxAttempts = other.maxAttempts }
      if fields.contains(.retryDelay) { retryDelay = other.retryDelay }
      if fields.contains(.maxRetryDelay) { maxRetryDelay = other.maxRetryDelay }
      if fields.contains(.maxRetryWait) { maxRetryWait = other.maxRetryWait }
      if fields.contains(.failureCooldown) { failureCooldown = other.failureCooldown }
      if fields.contains(.servesStaleOnError) { servesStaleOnError = other.servesStaleOnError }
    }

    /// These values with the fields not in `fields` reset to the defaults.
    func masked(_ fields: Fields) -> Values {
      var masked = SilentRefreshPolicy.recommended.values
      masked.merge(self, fields: fields)
      return masked
    }
  }

  /// A set of a policy's fields.
  struct Fields: OptionSet, Sendable, Hashable {
    let rawValue: UInt8
    static let refreshAhead = Fields(rawValue: 1 << 0)
    static let refreshAheadJitter = Fields(rawValue: 1 << 1)
    static let maxAttempts = Fields(rawValue: 1 << 2)
    static let retryDelay = Fields(rawValue: 1 << 3)
    static let maxRetryDelay = Fields(rawValue: 1 << 4)
    static let maxRetryWait = Fields(rawValue: 1 << 5)
    static let failureCooldown = Fields(rawValue: 1 << 6)
    static let servesStaleOnError = Fields(rawValue: 1 << 7)
  }
}
