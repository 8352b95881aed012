import Foundation

/// Reads the values `JSONSerialization` produces from a server's reply the same way on every
/// platform.
///
/// A JSON number comes back as an `NSNumber`. On Apple platforms `true` and `false` are the
/// distinct `CFBoolean` instances; swift-corelibs-foundation bridges every `NSNumber` whose value
/// is 0 or 1 (the integers and `1.0` alike) to `Bool`, so `value is Bool` holds for `0` and `1`
/// there and a check that refuses booleans refuses those numbers. Both platforms give a JSON
/// boolean the `char` type encoding (`"c"`), which a JSON number never has: that is the test
/// used here.
package enum JSONValues {
  /// Whether `value` is a JSON `true` or `false` (not the number 0 or 1).
  ///
  /// - Parameter value: A value from `JSONSerialization`.
  /// - Returns: `true` only for a boolean.
  package static func isBoolean(_ value: Any) -> Bool {
    guard let number = value as? NSNumber else { return false }
    return String(cString: number.objCType) == "c"
  }

  /// `value` as a number, when it is a JSON number (0 and 1 included, booleans not).
  ///
  /// - Parameter value: A value from `JSONSerialization`.
  /// - Returns: The number's value, or `nil` for a boolean or anything that is not a number.
  package static func number(_ value: Any) -> Double? {
    guard let number = value as? NSNumber, !isBoolean(value) else { return nil }
    return number.doubleValue
  }

  /// `value` as text: a string as it is, a JSON number (0 and 1 included) as its decimal
  /// `NSNumber.stringValue`; `nil` for a boolean or anything else.
  ///
  /// - Parameter value: A value from `JSONSerialization`.
  /// - Returns: The text, or `nil`.
  package static func text(_ value: Any?) -> String? {
    guard let value else { return nil }
    if let string = value as? String { return string }
    guard let number = value as? NSNumber, !isBoolean(value) else { return nil }
    return number.stringValue
  }
}
