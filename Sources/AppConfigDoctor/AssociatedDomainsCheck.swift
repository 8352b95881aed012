import Foundation

/// Checks an app's entitlements for the associated domain its Alipay universal link needs: an
/// app that passes AlipaySDK a universal link (`payOrder:fromScheme:fromUniversalLink:callback:`)
/// is opened by it only when its `com.apple.developer.associated-domains` entitlement lists
/// `applinks:<host>` for the link's host.
///
/// Only an app that uses a universal link for Alipay needs it, so `authcoord doctor` runs this
/// check only when given `--universal-link` (and `--entitlements`); an app that did not opt in
/// gets no finding about associated domains.
///
/// An entry matches the link's host when it is `applinks:<host>` (case-insensitive), optionally
/// with Apple's `?mode=developer` or `?mode=managed` suffix, or a wildcard
/// `applinks:*.<domain>` for a host under `<domain>` (not `<domain>` itself). Other services
/// (`webcredentials:`, `activitycontinuation:`) do not count. The check cannot see the
/// `apple-app-site-association` file the domain must serve; that stays the app's to verify.
///
/// ```swift
/// let entitlements = try InfoPlistDoctor.load(contentsOf: URL(fileURLWithPath: "App.entitlements"))
/// let findings = AssociatedDomainsCheck.check(
///   entitlements: entitlements, universalLinkHost: "example.com")
/// ```
public enum AssociatedDomainsCheck {
  /// The entitlement key: `com.apple.developer.associated-domains`.
  public static let key = "com.apple.developer.associated-domains"

  /// The host of a universal link, when it is one: an `https` URL with a host, no user info.
  ///
  /// - Parameter universalLink: The app's universal link for Alipay, such as
  ///   `https://example.com/alipay/`.
  /// - Returns: The host, lowercased; `nil` when the text is no `https` URL with a host.
  public static func host(ofUniversalLink universalLink: String) -> String? {
    guard let components = URLComponents(string: universalLink),
      components.scheme?.lowercased() == "https", let host = components.host, !host.isEmpty,
      components.user == nil, components.password == nil
    else { return nil }
    return host.lowercased()
  }

  /// Checks parsed entitlements for `applinks:<universalLinkHost>`.
  ///
  /// - Parameters:
  ///   - entitlements: The entitlements plist's top-level dictionary.
  ///   - universalLinkHost: The host of the app's universal link for Alipay (see
  ///     ``host(ofUniversalLink:)``).
  /// - Returns: No finding when an entry matches; otherwise one error with the code
  ///   ``Finding/Code/associatedDomainMissing`` (the key or the entry is missing) or
  ///   ``Finding/Code/associatedDomainsInvalid`` (the value is not an array of strings), plus
  ///   one per entry that is not a string.
  public static func check(entitlements: [String: Any], universalLinkHost: String) -> [Finding] {
    let host = universalLinkHost.lowercased()
    let needed = "\"applinks:\(host)\""
    let hint = "iOS will not open the app for Alipay's universal-link returns"
    guard let value = entitlements[key] else {
      return [
        .init(.error, key, "missing; add \(needed), or \(hint)", code: .associatedDomainMissing)
      ]
    }
    guard let array = value as? [Any] else {
      return [
        .init(
          .error, key,
          "must be an array of strings, found \(InfoPlistDoctor.typeName(value)); it needs "
            + needed,
          code: .associatedDomainsInvalid)
      ]
    }
    var findings: [Finding] = []
    var entries: [String] = []
    for (index, element) in array.enumerated() {
      guard let entry = element as? String else {
        findings.append(
          .init(
            .error, "\(key)[\(index)]",
            "must be a string, found \(InfoPlistDoctor.typeName(element))",
            code: .associatedDomainsInvalid))
        continue
      }
      entries.append(entry)
    }
    if !entries.contains(where: { matches($0, host: host) }) {
      findings.append(
        .init(.error, key, "does not contain \(needed); \(hint)", code: .associatedDomainMissing))
    }
    return findings
  }

  /// Whether one entitlement entry covers `host` (lowercased) for universal links.
  static func matches(_ entry: String, host: String) -> Bool {
    let text = entry.trimmingCharacters(in: .whitespaces).lowercased()
    guard text.hasPrefix("applinks:") else { return false }
    var domain = Substring(text.dropFirst("applinks:".count))
    if let question = domain.firstIndex(of: "?") { domain = domain[..<question] }
    if domain.hasPrefix("*.") {
      let parent = domain.dropFirst(2)
      return !parent.isEmpty && host.hasSuffix("." + parent)
    }
    return domain == host
  }
}
