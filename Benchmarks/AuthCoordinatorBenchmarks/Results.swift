/// What a metric measures, with its unit.
enum Metric: String, Codable, Sendable {
  case nsPerOp = "ns/op"
  case wakeNsPerWaiter = "wake-up ns/waiter"
  case bytesPerWaiter = "heap B/parked caller"
  case bytesPerAccount = "heap B/account authorizing"
  case cancelNsPerCancel = "ns/cancellation"
  case issueNsPerCancel = "ns/cancel issued"
  case authorizations = "authorizations"
  case totalMs = "total ms"
  case saveMicros = "save µs/op"
  case loadMicros = "load µs/op"
  case scaleRatio = "cost at largest N ÷ smallest N"
  case adoptions = "adopted from store"
  case distinctTokens = "distinct tokens"
  case spreadMs = "save → last process serves, ms"
  case goToServedMs = "go → last process serves, ms"
  case releaseMs = "save → holder's release returned, ms"
}

/// One series: every repetition's value of one metric for one implementation and parameter.
struct Measurement: Codable, Sendable {
  var scenario: String
  var implementation: String
  var parameter: String
  /// The parameter's numeric value (N, tasks), for the chart.
  var x: Double?
  var metric: Metric
  var samples: [Double]
  var median: Double { Stats.median(samples) }

  enum CodingKeys: String, CodingKey {
    case scenario, implementation, parameter, x, metric, samples, median
  }

  init(scenario: String, implementation: String, parameter: String, x: Double?, metric: Metric) {
    self.scenario = scenario
    self.implementation = implementation
    self.parameter = parameter
    self.x = x
    self.metric = metric
    samples = []
  }

  init(from decoder: any Decoder) throws {
    let container = try decoder.container(keyedBy: CodingKeys.self)
    scenario = try container.decode(String.self, forKey: .scenario)
    implementation = try container.decode(String.self, forKey: .implementation)
    parameter = try container.decode(String.self, forKey: .parameter)
    x = try container.decodeIfPresent(Double.self, forKey: .x)
    metric = try container.decode(Metric.self, forKey: .metric)
    samples = try container.decode([Double].self, forKey: .samples)
  }

  func encode(to encoder: any Encoder) throws {
    var container = encoder.container(keyedBy: CodingKeys.self)
    try container.encode(scenario, forKey: .scenario)
    try container.encode(implementation, forKey: .implementation)
    try container.encode(parameter, forKey: .parameter)
    try container.encodeIfPresent(x, forKey: .x)
    try container.encode(metric, forKey: .metric)
    try container.encode(samples.map(Self.finite), forKey: .samples)
    try container.encode(Self.finite(median), forKey: .median)
  }

  /// JSON has no NaN: a missing figure is written as -1.
  private static func finite(_ value: Double) -> Double { value.isFinite ? value : -1 }
}

/// Everything one benchmark run measured, in the order it was measured.
struct Results: Sendable {
  private(set) var measurements: [Measurement] = []
  private var index: [String: Int] = [:]
  /// Wrong authorization counts, wrong results, hangs: each makes the run exit non-zero.
  private(set) var violations: [String] = []

  mutating func add(
    _ scenario: String, _ impl: Impl, _ parameter: String, x: Double? = nil,
    _ metric: Metric, _ value: Double
  ) {
    add(scenario, impl.rawValue, parameter, x: x, metric, value)
  }

  mutating func add(
    _ scenario: String, _ implementation: String, _ parameter: String, x: Double? = nil,
    _ metric: Metric, _ value: Double
  ) {
    let key = "\(scenario)|\(implementation)|\(parameter)|\(metric.rawValue)"
    if let position = index[key] {
      measurements[position].samples.append(value)
    } else {
      index[key] = measurements.count
      var measurement = Measurement(
        scenario: scenario, implementation: implementation, parameter: parameter, x: x,
        metric: metric)
      measurement.samples.append(value)
      measurements.append(measurement)
    }
  }

  mutating func violation(_ message: String) { violations.append(message) }

  /// The samples of one series, or nil when it was not measured.
  func samples(_ scenario: String, _ impl: Impl, _ parameter: String, _ metric: Metric)
    -> [Double]?
  {
    samples(scenario, impl.rawValue, parameter, metric)
  }

  func samples(
    _ scenario: String, _ implementation: String, _ parameter: String,
    _ metric: Metric
  ) -> [Double]? {
    let key = "\(scenario)|\(implementation)|\(parameter)|\(metric.rawValue)"
    return index[key].map { measurements[$0].samples }
  }
}
