import Foundation

/// Checks an app's Info.plist for what Alipay account connect needs (see the mPaaS guide
/// "iOS 小程序接入账户通").
///
/// The checks:
/// - `LSApplicationQueriesSchemes` is an array of strings containing `alipay` and `alipays`, or
///   the app cannot open Alipay.
/// - `CFBundleURLTypes` is an array of dictionaries whose `CFBundleURLSchemes` declare at least
///   one valid URL scheme (and the expected one, when given), or Alipay cannot return to the app.
/// - `MPAuthIdentity`, when present, is a dictionary whose `instBizSceneCode` and
///   `instCampaignIds` are non-empty strings that are not placeholders (see
///   ``isPlaceholder(_:)``; a value that only may be one, ``mayBePlaceholder(_:)``, is a
///   warning).
///
/// Errors are what the vendor guide requires; warnings are suspicious but may be correct
/// (`alipay` after the 50th query scheme, a value such as `TEST_001`). Only Info.plist is
/// checked: the guide's other steps (the `mPaaS_AliAccount` pod, the new
/// `ANX_ALIPAY_INSIDE_CONFIG`, the security-guard image, ...) are outside its reach.
///
/// ```swift
/// let plist = try InfoPlistDoctor.load(contentsOf: URL(fileURLWithPath: "Info.plist"))
/// let findings = InfoPlistDoctor.check(plist: plist, scheme: "mpaasinsidedemo")
/// ```
public enum InfoPlistDoctor {
  /// The schemes `LSApplicationQueriesSchemes` must contain.
  public static let requiredQuerySchemes = ["alipay", "alipays"]
  /// iOS honours only this many `LSApplicationQueriesSchemes` entries.
  public static let maxQuerySchemes = 50

  /// Checks a parsed Info.plist.
  ///
  /// - Parameters:
  ///   - plist: The plist's top-level dictionary.
  ///   - scheme: The app's own URL scheme, which `CFBundleURLTypes` must declare; `nil` to only
  ///     require some scheme.
  /// - Returns: The findings, in plist order; empty when the plist is fit for account connect.
  public static func check(plist: [String: Any], scheme: String?) -> [Finding] {
    checkQuerySchemes(plist) + checkURLTypes(plist, scheme: scheme) + checkAuthIdentity(plist)
  }

  /// Reads an XML, binary or OpenStep property list whose top level is a dictionary.
  ///
  /// - Parameter url: The file.
  /// - Returns: The top-level dictionary.
  /// - Throws: ``InfoPlistLoadError`` with code `unreadable`, `invalid` or `notADictionary`.
  public static func load(contentsOf url: URL) throws(InfoPlistLoadError) -> [String: Any] {
    let data: Data
    do {
      data = try Data(contentsOf: url)
    } catch {
      let reason: String
      var isDirectory: ObjCBool = false
      if !FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory) {
        reason = "no such file"
      } else if isDirectory.boolValue {
        reason = "is a directory"
      } else {
        reason = "cannot be read"
      }
      throw InfoPlistLoadError(.unreadable, path: url.path, message: reason)
    }
    return try load(data: data, path: url.path)
  }

  /// Parses property-list data whose top level is a dictionary.
  ///
  /// - Parameters:
  ///   - data: XML, binary or OpenStep property-list data.
  ///   - path: The name to report in errors.
  /// - Returns: The top-level dictionary.
  /// - Throws: ``InfoPlistLoadError`` with code `invalid` or `notADictionary`.
  public static func load(data: Data, path: String) throws(InfoPlistLoadError) -> [String: Any] {
    let value: Any
    do {
      value = try PropertyListSerialization.propertyList(from: data, options: [], format: nil)
    } catch {
      throw InfoPlistLoadError(.invalid, path: path, message: "not a valid property list")
    }
    guard let dictionary = value as? [String: Any] else {
      throw InfoPlistLoadError(
        .notADictionary, path: path, message: "the top level is not a dictionary")
    }
    return dictionary
  }

  /// Whether a configuration value is certainly a placeholder left from a template instead of
  /// a real value.
  ///
  /// Placeholders: the guide's own text (`业务场景标识（替换为实际值）`, anything saying 替换 "replace",
  /// 请填写 "please fill in" or 实际值 "actual value"), runs of `x` (`xxx`, `x.x.x`), bracketed
  /// names (`<scene code>`, `${CODE}`, `{{code}}`, `[code]`), values starting with `your`
  /// (`your_scene_code`), anything containing `placeholder`, `replace` or `changeme`, and the
  /// bare words `todo`, `tbd`, `fixme`, `changeme`, `replace me`, `example`, `sample`, `dummy`,
  /// `none`, `null`, `test` (without digits). A value such as `TEST_001` is not certain: see
  /// ``mayBePlaceholder(_:)``.
  ///
  /// - Parameter value: The value, as written in the plist.
  /// - Returns: `true` for a placeholder.
  public static func isPlaceholder(_ value: String) -> Bool {
    let text = value.trimmingCharacters(in: .whitespacesAndNewlines)
    let lower = text.lowercased()
    for marker in ["替换", "请填写", "实际值", "填写", "示例"] where text.contains(marker) {
      return true
    }
    let letters = lower.filter { $0.isLetter || $0.isNumber }
    if !letters.isEmpty, letters.allSatisfy({ $0 == "x" }) { return true }
    let brackets: [(String, String)] = [("<", ">"), ("${", "}"), ("{{", "}}"), ("[", "]")]
    for (open, close) in brackets where lower.hasPrefix(open) && lower.hasSuffix(close) {
      return true
    }
    if lower.hasPrefix("your") { return true }
    if !lower.contains(where: \.isNumber), placeholderWords.contains(lower.filter(\.isLetter)) {
      return true
    }
    return ["placeholder", "replace", "changeme"].contains { lower.contains($0) }
  }

  /// Whether a value that is not certainly a placeholder (see ``isPlaceholder(_:)``) still looks
  /// like one: a placeholder word with digits or separators (`TEST_001`, `sample-2`), or a value
  /// starting with `test`, `sample`, `example`, `dummy` or `demo`. Real values can look like
  /// this, so the doctor only warns.
  ///
  /// - Parameter value: The value, as written in the plist.
  /// - Returns: `true` for a suspicious value that is not a certain placeholder.
  public static func mayBePlaceholder(_ value: String) -> Bool {
    guard !isPlaceholder(value) else { return false }
    let lower = value.trimmingCharacters(in: .whitespacesAndNewlines).lowercased()
    if placeholderWords.contains(lower.filter(\.isLetter)) { return true }
    return ["test", "sample", "example", "dummy", "demo"].contains { lower.hasPrefix($0) }
  }

  private static let placeholderWords: Set<String> = [
    "todo", "tbd", "fixme", "placeholder", "changeme", "replaceme", "example", "sample",
    "dummy", "none", "null", "test",
  ]

  // MARK: - LSApplicationQueriesSchemes

  private static func checkQuerySchemes(_ plist: [String: Any]) -> [Finding] {
    let key = "LSApplicationQueriesSchemes"
    let needed = requiredQuerySchemes.map { "\"\($0)\"" }.joined(separator: " and ")
    guard let value = plist[key] else {
      return [.init(.error, key, "missing; add \(needed) so the app can open Alipay")]
    }
    guard let array = value as? [Any] else {
      return [.init(.error, key, "must be an array of strings, found \(typeName(value))")]
    }
    var findings: [Finding] = []
    var schemes: [String] = []
    for (index, element) in array.enumerated() {
      guard let scheme = element as? String else {
        findings.append(
          .init(.error, "\(key)[\(index)]", "must be a string, found \(typeName(element))"))
        continue
      }
      schemes.append(scheme.lowercased())
    }
    for required in requiredQuerySchemes {
      guard let index = schemes.firstIndex(of: required) else {
        findings.append(
          .init(.error, key, "does not contain \"\(required)\"; the app cannot open Alipay"))
        continue
      }
      if index >= maxQuerySchemes {
        findings.append(
          .init(
            .warning, key,
            "\"\(required)\" is entry \(index + 1); iOS honours only the first "
              + "\(maxQuerySchemes)"))
      }
    }
    return findings
  }

  // MARK: - CFBundleURLTypes

  private static func checkURLTypes(_ plist: [String: Any], scheme: String?) -> [Finding] {
    let key = "CFBundleURLTypes"
    let hint = "Alipay cannot return to the app"
    guard let value = plist[key] else {
      return [.init(.error, key, "missing; declare the app's URL scheme, or \(hint)")]
    }
    guard let types = value as? [Any] else {
      return [.init(.error, key, "must be an array of dictionaries, found \(typeName(value))")]
    }
    var findings: [Finding] = []
    var declared: [String] = []
    for (index, element) in types.enumerated() {
      let path = "\(key)[\(index)]"
      guard let type = element as? [String: Any] else {
        findings.append(.init(.error, path, "must be a dictionary, found \(typeName(element))"))
        continue
      }
      guard let schemesValue = type["CFBundleURLSchemes"] else { continue }
      let schemesPath = "\(path).CFBundleURLSchemes"
      guard let schemes = schemesValue as? [Any] else {
        findings.append(
          .init(
            .error, schemesPath, "must be an array of strings, found \(typeName(schemesValue))"))
        continue
      }
      for (schemeIndex, schemeValue) in schemes.enumerated() {
        let schemePath = "\(schemesPath)[\(schemeIndex)]"
        guard let declaredScheme = schemeValue as? String else {
          findings.append(
            .init(.error, schemePath, "must be a string, found \(typeName(schemeValue))"))
          continue
        }
        findings += checkDeclaredScheme(declaredScheme, at: schemePath)
        declared.append(declaredScheme)
      }
    }
    if declared.isEmpty {
      findings.append(.init(.error, key, "declares no URL scheme in CFBundleURLSchemes; \(hint)"))
    } else if let scheme,
      !declared.contains(where: { $0.caseInsensitiveCompare(scheme) == .orderedSame })
    {
      let list = declared.map { "\"\($0)\"" }.joined(separator: ", ")
      findings.append(
        .init(.error, key, "does not declare the scheme \"\(scheme)\" (declared: \(list))"))
    }
    return findings
  }

  private static func checkDeclaredScheme(_ scheme: String, at path: String) -> [Finding] {
    if scheme.isEmpty { return [.init(.error, path, "is empty")] }
    if !isValidScheme(scheme) {
      return [
        .init(
          .error, path,
          "\"\(scheme)\" is not a valid URL scheme (a letter, then letters, digits, +, - or .)")
      ]
    }
    if requiredQuerySchemes.contains(scheme.lowercased()) {
      return [.init(.warning, path, "\"\(scheme)\" is Alipay's own scheme, not the app's")]
    }
    if isPlaceholder(scheme) || mayBePlaceholder(scheme) {
      return [.init(.warning, path, "\"\(scheme)\" looks like a placeholder")]
    }
    return []
  }

  /// RFC 3986: `ALPHA *( ALPHA / DIGIT / "+" / "-" / "." )`.
  private static func isValidScheme(_ scheme: String) -> Bool {
    guard let first = scheme.unicodeScalars.first, first.isASCII,
      CharacterSet.letters.contains(first)
    else { return false }
    return scheme.unicodeScalars.allSatisfy { scalar in
      scalar.isASCII
        && (CharacterSet.alphanumerics.contains(scalar) || "+-.".unicodeScalars.contains(scalar))
    }
  }

  // MARK: - MPAuthIdentity

  private static func checkAuthIdentity(_ plist: [String: Any]) -> [Finding] {
    let key = "MPAuthIdentity"
    guard let value = plist[key] else { return [] }
    guard let identity = value as? [String: Any] else {
      return [.init(.error, key, "must be a dictionary, found \(typeName(value))")]
    }
    var findings: [Finding] = []
    for field in ["instBizSceneCode", "instCampaignIds"] {
      let path = "\(key).\(field)"
      guard let fieldValue = identity[field] else {
        findings.append(.init(.error, path, "missing; ask Alipay support for the value"))
        continue
      }
      guard let text = fieldValue as? String else {
        findings.append(.init(.error, path, "must be a string, found \(typeName(fieldValue))"))
        continue
      }
      if text.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty {
        findings.append(.init(.error, path, "is empty; ask Alipay support for the value"))
      } else if isPlaceholder(text) {
        findings.append(
          .init(.error, path, "\"\(text)\" is a placeholder; replace it with the real value"))
      } else if mayBePlaceholder(text) {
        findings.append(
          .init(
            .warning, path,
            "\"\(text)\" may be a placeholder; check that it is the value Alipay support issued"))
      }
    }
    return findings
  }

  // MARK: - Helpers

  /// The plist type name of a value, for messages.
  static func typeName(_ value: Any) -> String {
    switch value {
    case is String: return "a string"
    case is [Any]: return "an array"
    case is [String: Any]: return "a dictionary"
    case is Data: return "data"
    case is Date: return "a date"
    case let number as NSNumber:
      return String(cString: number.objCType) == "c" ? "a boolean" : "a number"
    default: return "\(type(of: value))"
    }
  }
}
