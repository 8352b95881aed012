import Foundation

/// `application/x-www-form-urlencoded` encoding shared by the token requests: the Alipay
/// exchanger's form and query, the OAuth 2 authorizer's form and its HTTP Basic credentials
/// (RFC 6749 §2.3.1 form-urlencodes the client id and secret before Base64).
package enum FormEncoding {
  /// Percent-encodes everything but RFC 3986's unreserved characters (so `+`, `&`, `=`, `:` and
  /// spaces survive a form, a query or a Basic credential).
  ///
  /// - Parameter text: Any text.
  /// - Returns: The encoded text.
  package static func encode(_ text: String) -> String {
    text.addingPercentEncoding(withAllowedCharacters: unreserved) ?? text
  }

  /// `name=value` pairs joined by `&`, each side encoded with ``encode(_:)``, in the given order.
  ///
  /// - Parameter items: The pairs.
  /// - Returns: The form body.
  package static func form(_ items: [(String, String)]) -> String {
    items.map { "\(encode($0.0))=\(encode($0.1))" }.joined(separator: "&")
  }

  private static let unreserved: CharacterSet = {
    var allowed = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyz")
    allowed.insert(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~")
    return allowed
  }()
}
