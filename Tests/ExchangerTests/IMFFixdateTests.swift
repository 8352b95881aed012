import Foundation
import HTTPSupport
import Testing

/// The hand-written IMF-fixdate against Foundation's `DateFormatter`, the reference it replaces.
@Suite struct IMFFixdateTests {
  static let reference: DateFormatter = {
    let formatter = DateFormatter()
    formatter.locale = Locale(identifier: "en_US_POSIX")
    formatter.timeZone = TimeZone(identifier: "GMT")
    formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
    return formatter
  }()

  /// Dates from 1601 to 2399, every 7,919 hours and 37 seconds (weekdays, leap years and
  /// centuries all come round), plus the edges.
  static var dates: [Date] {
    var dates = stride(from: -11_644_473_600.0, to: 13_569_465_600.0, by: 7_919 * 3_600 + 37)
      .map { Date(timeIntervalSince1970: $0) }
    for text in [
      "Thu, 01 Jan 1970 00:00:00 GMT", "Wed, 31 Dec 1969 23:59:59 GMT",
      "Tue, 29 Feb 2000 12:00:00 GMT", "Thu, 01 Mar 1900 00:00:00 GMT",
      "Sun, 06 Nov 1994 08:49:37 GMT", "Fri, 31 Dec 9999 23:59:59 GMT",
    ] {
      dates.append(reference.date(from: text)!)
    }
    return dates
  }

  @Test func formatsAsDateFormatterDoes() {
    var mismatches: [String] = []
    for date in Self.dates where IMFFixdate.format(date) != Self.reference.string(from: date) {
      mismatches.append("\(date.timeIntervalSince1970): \(IMFFixdate.format(date))")
    }
    #expect(mismatches.isEmpty, "\(mismatches.prefix(5))")
    #expect(
      IMFFixdate.format(Date(timeIntervalSince1970: 784_111_777.9))
        == "Sun, 06 Nov 1994 08:49:37 GMT")
  }

  @Test func readsWhatItWritesAndWhatDateFormatterReads() {
    var mismatches: [String] = []
    for date in Self.dates {
      let text = Self.reference.string(from: date)
      if IMFFixdate.parse(text) != Self.reference.date(from: text) { mismatches.append(text) }
      if IMFFixdate.parse(IMFFixdate.format(date)) != Self.reference.date(from: text) {
        mismatches.append("round trip: \(text)")
      }
    }
    #expect(mismatches.isEmpty, "\(mismatches.prefix(5))")
  }

  @Test func refusesWhatIsNotAnIMFFixdate() {
    for text in [
      "", "Sun, 06 Nov 1994 08:49:37 UTC", "Sun, 06 Nov 1994 08:49:37 GMT ",
      "Sun 06 Nov 1994 08:49:37 GMT", "Sun, 6 Nov 1994 08:49:37 GMT",
      "Sun, 06 Nov 94 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT",
      "Sun Nov  6 08:49:37 1994", "Sun, 30 Feb 2024 08:49:37 GMT",
      "Sun, 29 Feb 1900 08:49:37 GMT", "Sun, 00 Nov 1994 08:49:37 GMT",
      "Sun, 06 Now 1994 08:49:37 GMT", "Sun, 06 Nov 1994 24:00:00 GMT",
      "Sun, 06 Nov 1994 08:60:00 GMT", "Sun, 06 Nov 1994 08:49:61 GMT",
      "Xyz, 06 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994 08:4a:37 GMT",
      "Sun, 06 Nov 1994 08:49:37 GMТ",  // a Cyrillic Т
    ] {
      #expect(IMFFixdate.parse(text) == nil, "\(text)")
    }
    // A leap second counts as the next second.
    #expect(
      IMFFixdate.parse("Sat, 31 Dec 2016 23:59:60 GMT")
        == IMFFixdate.parse("Sun, 01 Jan 2017 00:00:00 GMT"))
  }

  @Test func retryAfterStillReadsTheObsoleteForms() {
    let expected = IMFFixdate.parse("Sun, 06 Nov 1994 08:49:37 GMT")!
    let now = expected.addingTimeInterval(-30)
    for value in [
      "Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994",
    ] {
      #expect(
        RetryAfter.delay(value, serverDate: nil, now: now, limit: .seconds(3_600)) == .seconds(30),
        "\(value)")
    }
  }
}
