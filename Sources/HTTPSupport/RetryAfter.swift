import Foundation

/// A server's `Retry-After` (RFC 9110 §10.2.3): delay-seconds or an HTTP-date.
package enum RetryAfter {
  /// The delay a `Retry-After` value asks for, clamped to `0...limit`.
  ///
  /// - Parameters:
  ///   - value: The header's value (`"7"`, `"Wed, 21 Oct 2026 07:28:00 GMT"`), or `nil`.
  ///   - serverDate: The response's `Date` header, if any: an HTTP-date is measured from it,
  ///     so that a client whose clock is off still waits what the server meant.
  ///   - now: The client's clock, for an HTTP-date without a `Date` header.
  ///   - limit: The longest delay honoured.
  /// - Returns: The delay, or `nil` when there is no value or it is neither form.
  package static func delay(
    _ value: String?, serverDate: String?, now: Date, limit: Duration
  ) -> Duration? {
    guard let value = value?.trimmingCharacters(in: .whitespaces), !value.isEmpty else {
      return nil
    }
    let seconds: Double
    if value.allSatisfy(\.isASCIIDigit) {
      seconds = Double(value) ?? .infinity
    } else if let date = httpDate(value) {
      let from = serverDate.flatMap(httpDate) ?? now
      seconds = date.timeIntervalSince(from)
    } else {
      return nil
    }
    let clamped = min(max(seconds, 0), Double(limit.components.seconds))
    return .milliseconds(Int64((clamped * 1000).rounded()))
  }

  /// An HTTP-date in any of the three forms RFC 9110 §5.6.7 says a recipient accepts.
  package static func httpDate(_ text: String) -> Date? {
    // The form every sender must use, read by hand; a formatter only for the obsolete ones.
    if let date = IMFFixdate.parse(text) { return date }
    for format in obsoleteFormats {
      let formatter = DateFormatter()
      formatter.locale = Locale(identifier: "en_US_POSIX")
      formatter.timeZone = TimeZone(identifier: "GMT")
      formatter.dateFormat = format
      if let date = formatter.date(from: text) { return date }
    }
    return nil
  }

  /// The obsolete RFC 850 and asctime forms, and an IMF-fixdate-like date in another zone.
  private static let obsoleteFormats = [
    "EEE, dd MMM yyyy HH:mm:ss zzz", "EEEE, dd-MMM-yy HH:mm:ss zzz", "EEE MMM d HH:mm:ss yyyy",
  ]

  /// `date` as an IMF-fixdate (for a `Date` header).
  package static func imfFixdate(_ date: Date) -> String {
    IMFFixdate.format(date)
  }
}

extension Character {
  fileprivate var isASCIIDigit: Bool { ("0"..."9").contains(self) }
}
