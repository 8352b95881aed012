import Testing

@testable import AuthCoordinator

/// The default jitter source (``JitterSource``): a generator without a system call per draw,
/// whose draws must still behave as the silent-refresh policy assumes (uniform in `0..<1`).
@Suite struct JitterSourceTests {
  @Test func drawsLieInTheUnitIntervalAndSpreadOverIt() {
    let draws = (0..<20_000).map { _ in JitterSource.next() }
    #expect(draws.allSatisfy { $0 >= 0 && $0 < 1 })
    #expect(Set(draws).count == draws.count, "no draw repeats")
    let mean = draws.reduce(0, +) / Double(draws.count)
    #expect(abs(mean - 0.5) < 0.02, "mean \(mean)")
    // Each tenth of the interval gets its share (2,000 expected; 5 standard deviations ≈ 210).
    var tenths = [Int](repeating: 0, count: 10)
    for draw in draws { tenths[Int(draw * 10)] += 1 }
    #expect(tenths.allSatisfy { abs($0 - 2_000) < 250 }, "\(tenths)")
  }

  /// What the policy assumes of whatever the default configuration draws from. (That the
  /// default is this source, and so no system call per draw, is measured: docs/benchmarks.md,
  /// "system calls".)
  @Test func theDefaultConfigurationDrawsInTheUnitInterval() {
    let random = AuthCoordinator.Configuration().random
    let draws = (0..<1_000).map { _ in random() }
    #expect(draws.allSatisfy { $0 >= 0 && $0 < 1 })
    #expect(Set(draws).count > 990)
  }
}
