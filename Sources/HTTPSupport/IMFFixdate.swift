import Foundation

/// IMF-fixdate (RFC 9110 §5.6.7), the form every HTTP sender must use: `Sun, 06 Nov 1994
/// 08:49:37 GMT`. Read and written by hand: a `DateFormatter` costs the ICU set-up of a locale
/// and a calendar each time one is made (a third of the fleet simulation's time went there,
/// one per token response's `Date` header), and this fixed layout needs neither.
package enum IMFFixdate {
  private static let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
  private static let months = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
  ]

  /// The date `text` names, or `nil` when it is not an IMF-fixdate of a real day and time
  /// (the day name is not checked against the date; a leap second counts as the next second).
  package static func parse(_ text: String) -> Date? {
    let bytes = Array(text.utf8)
    guard bytes.count == 29, bytes[3] == UInt8(ascii: ","), bytes[4] == space,
      bytes[7] == space, bytes[11] == space, bytes[16] == space, bytes[19] == colon,
      bytes[22] == colon, bytes[25] == space,
      String(decoding: bytes[26..<29], as: UTF8.self) == "GMT",
      days.contains(String(decoding: bytes[0..<3], as: UTF8.self)),
      let monthIndex = months.firstIndex(of: String(decoding: bytes[8..<11], as: UTF8.self)),
      let day = number(bytes[5..<7]), let year = number(bytes[12..<16]),
      let hour = number(bytes[17..<19]), let minute = number(bytes[20..<22]),
      let second = number(bytes[23..<25])
    else { return nil }
    let month = monthIndex + 1
    guard (1...daysIn(month, of: year)).contains(day), hour < 24, minute < 60, second <= 60
    else { return nil }
    let seconds = daysFromCivil(year, month, day) * 86_400 + hour * 3_600 + minute * 60 + second
    return Date(timeIntervalSince1970: TimeInterval(seconds))
  }

  /// `date` as an IMF-fixdate (its whole seconds).
  package static func format(_ date: Date) -> String {
    let total = Int(date.timeIntervalSince1970.rounded(.down))
    let (dayCount, secondOfDay) = total.floorDivided(by: 86_400)
    let (year, month, day) = civil(fromDays: dayCount)
    let weekday = (dayCount % 7 + 11) % 7  // 1970-01-01 was a Thursday
    return "\(days[weekday]), \(two(day)) \(months[month - 1]) \(four(year)) "
      + "\(two(secondOfDay / 3_600)):\(two(secondOfDay % 3_600 / 60)):\(two(secondOfDay % 60)) GMT"
  }

  private static let space = UInt8(ascii: " ")
  private static let colon = UInt8(ascii: ":")

  private static func number(_ digits: ArraySlice<UInt8>) -> Int? {
    var value = 0
    for byte in digits {
      guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
      value = value * 10 + Int(byte - UInt8(ascii: "0"))
    }
    return value
  }

  private static func two(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }

  private static func four(_ value: Int) -> String {
    String(repeating: "0", count: max(0, 4 - String(value).count)) + String(value)
  }

  private static func daysIn(_ month: Int, of year: Int) -> Int {
    switch month {
    case 2: return year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) ? 29 : 28
    case 4, 6, 9, 11: return 30
    default: return 31
    }
  }

  /// Days from 1970-01-01 to the proleptic Gregorian date (H. Hinnant's `days_from_civil`).
  private static func daysFromCivil(_ year: Int, _ month: Int, _ day: Int) -> Int {
    let y = month <= 2 ? year - 1 : year
    let era = (y >= 0 ? y : y - 399) / 400
    let yearOfEra = y - era * 400
    let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
    let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
    return era * 146_097 + dayOfEra - 719_468
  }

  /// The proleptic Gregorian date `days` after 1970-01-01 (`civil_from_days`).
  private static func civil(fromDays days: Int) -> (year: Int, month: Int, day: Int) {
    let z = days + 719_468
    let era = (z >= 0 ? z : z - 146_096) / 146_097
    let dayOfEra = z - era * 146_097
    let yearOfEra =
      (dayOfEra - dayOfEra / 1_460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
    let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
    let shifted = (5 * dayOfYear + 2) / 153
    let day = dayOfYear - (153 * shifted + 2) / 5 + 1
    let month = shifted < 10 ? shifted + 3 : shifted - 9
    return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
  }
}

extension Int {
  /// The quotient rounded down and the remainder that goes with it (never negative).
  fileprivate func floorDivided(by divisor: Int) -> (quotient: Int, remainder: Int) {
    let (quotient, remainder) = quotientAndRemainder(dividingBy: divisor)
    return remainder < 0 ? (quotient - 1, remainder + divisor) : (quotient, remainder)
  }
}
