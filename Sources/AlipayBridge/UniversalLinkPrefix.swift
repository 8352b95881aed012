import Foundation

/// The app's universal-link prefix for Alipay results, such as `https://example.com/alipay/`:
/// the links under it are Alipay's, every other link belongs to the app.
///
/// Recent AlipaySDK versions can return to the app through a universal link on the app's
/// associated domain instead of its URL scheme: the app passes that link to
/// `payOrder:fromScheme:fromUniversalLink:callback:` (AlipaySDK's header gives
/// `https://render.alipay.com/` as an example value) and iOS delivers the return as an
/// `NSUserActivity` whose `webpageURL` is under it. ``AlipayCallbackRouter`` reads only links
/// inside the prefix (see ``AlipayCallbackRouter/handleUniversalLink(_:)``), so the app's other
/// universal links keep working.
///
/// A link is inside the prefix when
/// - its scheme is `https` and its host equals the prefix's host (both case-insensitive), with
///   the same port (none, unless the prefix names one) and no user info;
/// - its path is the prefix's path or starts with it at a `/` boundary (case-sensitive, as
///   paths are): with the prefix `https://example.com/alipay/`, `/alipay`, `/alipay/` and
///   `/alipay/result` are inside; `/alipayx`, `/other/alipay/` and `/ALIPAY/` are not;
/// - its path has no `.` or `..` segment (literal or percent-encoded), so that
///   `/alipay/../account` never counts as inside.
///
/// ```swift
/// let prefix = UniversalLinkPrefix("https://example.com/alipay/")!
/// prefix.contains(URL(string: "https://example.com/alipay/result?x=1")!)  // true
/// prefix.contains(URL(string: "https://example.com/orders/17")!)  // false
/// ```
public struct UniversalLinkPrefix: Sendable, Hashable, CustomStringConvertible {
  /// The host, lowercased.
  public let host: String
  /// The port, when the prefix names one.
  public let port: Int?
  /// The path, always ending in `/` (`https://example.com/alipay` is read as `/alipay/`).
  public let path: String

  /// Reads a prefix; `nil` unless it is an `https` URL with a host and no user info, query or
  /// fragment.
  ///
  /// - Parameter prefix: The prefix, such as `https://example.com/alipay/`; an empty path means
  ///   the whole domain.
  public init?(_ prefix: String) {
    guard let components = URLComponents(string: prefix),
      components.scheme?.lowercased() == "https",
      let host = components.host, !host.isEmpty,
      components.user == nil, components.password == nil,
      components.query == nil, components.fragment == nil,
      !Self.hasDotSegment(components.percentEncodedPath)
    else { return nil }
    self.host = host.lowercased()
    self.port = components.port
    let path = components.percentEncodedPath
    self.path = path.hasSuffix("/") ? path : path + "/"
  }

  /// The prefix as text: `https://<host>[:<port>]<path>`.
  public var description: String {
    "https://\(host)\(port.map { ":\($0)" } ?? "")\(path)"
  }

  /// Whether `url` is inside the prefix (the rules are in the type's discussion).
  ///
  /// - Parameter url: A universal link the app was opened with (`userActivity.webpageURL`).
  /// - Returns: `true` for a link under the prefix.
  public func contains(_ url: URL) -> Bool {
    contains(urlString: url.absoluteString)
  }

  /// Whether the text of a URL is inside the prefix; never traps.
  func contains(urlString: String) -> Bool {
    guard let components = URLComponents(string: urlString),
      components.scheme?.lowercased() == "https",
      components.host?.lowercased() == host, components.port == port,
      components.user == nil, components.password == nil
    else { return false }
    let linkPath = components.percentEncodedPath
    guard !Self.hasDotSegment(linkPath) else { return false }
    return linkPath == path || linkPath == String(path.dropLast()) || linkPath.hasPrefix(path)
  }

  /// Whether a percent-encoded path has a `.` or `..` segment, literal or encoded (`%2e`).
  private static func hasDotSegment(_ path: String) -> Bool {
    path.split(separator: "/", omittingEmptySubsequences: false).contains { segment in
      let decoded = segment.removingPercentEncoding ?? String(segment)
      return decoded == "." || decoded == ".."
    }
  }
}
