// Conversions between `Duration` and seconds as a `Double` (a `TimeInterval`). A `Double` that
// comes from a file, a server or the difference of two `Date`s can be anything (NaN, ±∞, 1e300),
// and `Duration.seconds(_:)` traps when its value does not fit, so every such value goes through
// ``Duration/saturating(seconds:limit:)`` instead.
extension Duration {
  /// The duration in seconds, as a `Double` (a `TimeInterval`).
  package var seconds: Double {
    let (seconds, attoseconds) = components
    return Double(seconds) + Double(attoseconds) / 1e18
  }

  /// The longest duration ``saturating(seconds:limit:)`` returns unless told otherwise: about a
  /// century, the longest wait the coordinator arms.
  package static let saturationLimit: Duration = .seconds(100 * 365 * 86_400)

  /// `seconds` as a duration, clamped to `0...limit`; never traps.
  ///
  /// NaN, negative values and `-∞` give `.zero`; values above `limit` and `+∞` give `limit`.
  ///
  /// - Parameters:
  ///   - seconds: Any `Double`, typically a `Date` difference or a number read from a file or a
  ///     server.
  ///   - limit: The largest result (a negative limit counts as zero); about a century by
  ///     default.
  package static func saturating(seconds: Double, limit: Duration = saturationLimit) -> Duration {
    let limit = max(limit, .zero)
    // `!(seconds > 0)` is also true for NaN.
    guard seconds > 0 else { return .zero }
    guard seconds < limit.seconds else { return limit }
    // Below `limit`, at most `Int64.max` seconds: within what `Duration.seconds(_:)` converts.
    return min(.seconds(seconds), limit)
  }
}
