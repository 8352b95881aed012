/// Medians of repeated runs and ratios taken within the same run.
///
/// Every scenario measures all implementations once per repetition (in an order rotated each
/// repetition), so sample `i` of every series comes from repetition `i`. A ratio is computed per
/// repetition and the median of those ratios is reported: drift of this noisy shared machine
/// between repetitions cancels out.
enum Stats {
  /// The median (mean of the middle two for an even count); NaN when empty.
  static func median(_ values: [Double]) -> Double {
    let sorted = values.filter { !$0.isNaN }.sorted()
    guard !sorted.isEmpty else { return .nan }
    let middle = sorted.count / 2
    return sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
  }

  /// `numerator[i] / denominator[i]` for each repetition both have.
  static func ratios(_ numerator: [Double], _ denominator: [Double]) -> [Double] {
    zip(numerator, denominator).map { $0 / $1 }
  }

  /// The element-wise minimum of several series (the fastest baseline of each repetition).
  static func elementwiseMin(_ series: [[Double]]) -> [Double] {
    guard let count = series.map(\.count).min(), count > 0 else { return [] }
    return (0..<count).map { index in series.map { $0[index] }.min()! }
  }

  /// `items` rotated left by `by` places, so no implementation always runs first.
  static func rotated<T>(_ items: [T], by: Int) -> [T] {
    guard !items.isEmpty else { return items }
    let shift = by % items.count
    return Array(items[shift...] + items[..<shift])
  }

  /// The nearest-rank percentile `p` (0-100) of `values`; NaN when empty. With 5 values p99 is
  /// the largest.
  static func percentile(_ values: [Double], _ p: Double) -> Double {
    let sorted = values.filter { !$0.isNaN }.sorted()
    guard !sorted.isEmpty else { return .nan }
    let rank = Int((p / 100 * Double(sorted.count)).rounded(.up))
    return sorted[min(max(rank, 1), sorted.count) - 1]
  }
}
