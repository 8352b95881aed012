import Foundation

/// Draws the chart of docs/benchmarks.md: cost per waiter against N on a log-scaled N axis,
/// one line per implementation (B2 wake-up), plus the coordinator's B3 cost per cancellation
/// (dashed). Medians of the run's repetitions. Plain SVG 1.1, no scripts, no external fonts.
enum SVGChart {
  struct Series {
    var label: String
    var points: [(x: Double, y: Double)]
    var color: String
    var dashed: Bool
  }

  private static let palette = [
    "#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#7f7f7f",
  ]

  /// The series this run can draw (empty when B2 did not run).
  static func series(from run: RunSummary) -> [Series] {
    var result: [Series] = []
    func points(_ implementation: String, _ scenario: String, _ metric: Metric)
      -> [(x: Double, y: Double)]
    {
      run.measurements
        .filter {
          $0.scenario == scenario && $0.implementation == implementation && $0.metric == metric
        }
        .compactMap { row in row.x.map { (x: $0, y: row.median) } }
        .filter { $0.y.isFinite }
        .sorted { $0.x < $1.x }
    }
    for (index, impl) in Impl.allCases.enumerated() {
      let wake = points(impl.rawValue, "B2", .wakeNsPerWaiter)
      if !wake.isEmpty {
        result.append(
          Series(
            label: "\(impl.rawValue): wake-up (B2)", points: wake,
            color: palette[index % palette.count], dashed: false))
      }
    }
    let cancel = points(Impl.coordinator.rawValue, "B3", .cancelNsPerCancel)
    if !cancel.isEmpty {
      result.append(
        Series(
          label: "coordinator: cancellation (B3)", points: cancel,
          color: palette[0], dashed: true))
    }
    return result
  }

  static func render(_ run: RunSummary) -> String? {
    let series = series(from: run)
    let all = series.flatMap(\.points)
    guard !all.isEmpty else { return nil }
    let width = 900.0
    let height = 520.0
    let left = 80.0
    let right = 300.0
    let top = 60.0
    let bottom = 70.0
    let plotWidth = width - left - right
    let plotHeight = height - top - bottom

    var low = log10(all.map(\.x).min()!)
    var high = log10(all.map(\.x).max()!)
    if high - low < 1e-9 {
      low -= 0.5
      high += 0.5
    }
    low -= 0.1
    high += 0.1
    let (yMax, yStep) = niceScale(all.map(\.y).max()! * 1.1)
    func px(_ x: Double) -> Double { left + (log10(x) - low) / (high - low) * plotWidth }
    func py(_ y: Double) -> Double { top + plotHeight - y / yMax * plotHeight }

    var svg = """
      <svg xmlns="http://www.w3.org/2000/svg" width="\(Int(width))" height="\(Int(height))" \
      viewBox="0 0 \(Int(width)) \(Int(height))" font-family="Helvetica, Arial, sans-serif" \
      font-size="13">
      <rect width="100%" height="100%" fill="white"/>
      <text x="\(left)" y="28" font-size="16" font-weight="bold">\
      Cost per waiter vs N (medians of \(run.repetitions) runs)</text>
      <text x="\(left)" y="46" fill="#555">\
      \(escape("\(run.machine.cpu), \(run.machine.activeProcessorCount) cores, \(run.date)"))</text>

      """
    // Horizontal grid and y labels.
    var tick = 0.0
    while tick <= yMax + yStep / 2 {
      let y = py(tick)
      svg += line(left, y, left + plotWidth, y, stroke: "#e5e5e5")
      svg += text(left - 8, y + 4, Report.format(tick), anchor: "end")
      tick += yStep
    }
    // Vertical grid at each decade, with readable labels.
    var decade = ceil(low)
    while decade <= floor(high) {
      let x = left + (decade - low) / (high - low) * plotWidth
      svg += line(x, top, x, top + plotHeight, stroke: "#e5e5e5")
      svg += text(x, top + plotHeight + 20, countLabel(pow(10, decade)), anchor: "middle")
      decade += 1
    }
    svg += line(left, top, left, top + plotHeight, stroke: "#333")
    svg += line(left, top + plotHeight, left + plotWidth, top + plotHeight, stroke: "#333")
    svg += text(left + plotWidth / 2, height - 20, "waiters N (log scale)", anchor: "middle")
    let yTitleX = 22.0
    let yTitleY = top + plotHeight / 2
    svg += "<text x=\"\(yTitleX)\" y=\"\(yTitleY)\" text-anchor=\"middle\" "
    svg += "transform=\"rotate(-90 \(yTitleX) \(yTitleY))\">ns per waiter</text>\n"

    for item in series {
      let path = item.points.map { "\(fmt(px($0.x))),\(fmt(py($0.y)))" }.joined(separator: " ")
      let dash = item.dashed ? " stroke-dasharray=\"6 4\"" : ""
      svg += "<polyline points=\"\(path)\" fill=\"none\" stroke=\"\(item.color)\" "
      svg += "stroke-width=\"2\"\(dash)/>\n"
      for point in item.points {
        svg += "<circle cx=\"\(fmt(px(point.x)))\" cy=\"\(fmt(py(point.y)))\" r=\"3.5\" "
        svg += "fill=\"\(item.color)\"/>\n"
      }
    }
    // Legend, right of the plot.
    let legendX = left + plotWidth + 20
    for (index, item) in series.enumerated() {
      let y = top + 10 + Double(index) * 22
      let dash = item.dashed ? " stroke-dasharray=\"6 4\"" : ""
      svg += "<line x1=\"\(fmt(legendX))\" y1=\"\(fmt(y))\" x2=\"\(fmt(legendX + 28))\" "
      svg += "y2=\"\(fmt(y))\" stroke=\"\(item.color)\" stroke-width=\"2\"\(dash)/>\n"
      svg += text(legendX + 36, y + 4, item.label, anchor: "start")
    }
    svg += "</svg>\n"
    return svg
  }

  /// A round upper bound and tick step (1, 2 or 5 times a power of ten, about 5 ticks).
  static func niceScale(_ maximum: Double) -> (max: Double, step: Double) {
    let target = max(maximum, 1) / 5
    let power = pow(10, floor(log10(target)))
    let step = [1.0, 2, 5, 10].map { $0 * power }.first { $0 >= target } ?? 10 * power
    return (ceil(max(maximum, 1) / step) * step, step)
  }

  static func countLabel(_ value: Double) -> String {
    switch value {
    case 1_000_000...: return Report.format(value / 1_000_000) + "M"
    case 1_000...: return Report.format(value / 1_000) + "k"
    default: return Report.format(value)
    }
  }

  private static func line(
    _ x1: Double, _ y1: Double, _ x2: Double, _ y2: Double,
    stroke: String
  ) -> String {
    "<line x1=\"\(fmt(x1))\" y1=\"\(fmt(y1))\" x2=\"\(fmt(x2))\" y2=\"\(fmt(y2))\" "
      + "stroke=\"\(stroke)\"/>\n"
  }

  private static func text(_ x: Double, _ y: Double, _ content: String, anchor: String)
    -> String
  {
    "<text x=\"\(fmt(x))\" y=\"\(fmt(y))\" text-anchor=\"\(anchor)\">\(escape(content))</text>\n"
  }

  private static func fmt(_ value: Double) -> String { String(format: "%.1f", value) }

  private static func escape(_ text: String) -> String {
    text.replacingOccurrences(of: "&", with: "&amp;")
      .replacingOccurrences(of: "<", with: "&lt;")
      .replacingOccurrences(of: ">", with: "&gt;")
  }
}
