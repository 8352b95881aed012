import CLibPQ
import Foundation

/// Replaces the connection strings' passwords in every message that could carry one.
///
/// libpq quotes what it cannot use: the token with a bad percent-encoding, or the whole URI
/// (a typo in the host), and it does so before it has parsed a password out of the string. So
/// the passwords are found here by libpq's parser when it can, and by a lenient reading of the
/// string when it cannot (the userinfo of a URI, a `password` query parameter, a `password=`
/// keyword, quoted or not), in the forms written and percent-decoded. A message is then
/// redacted twice: each password found is replaced wherever it appears, and so is whatever
/// follows `password=` or sits between `://user:` and `@`.
struct Redactor: Sendable, CustomReflectable {
  static let replacement = "<redacted>"

  /// The passwords, longest first (one that contains another is replaced whole).
  private let secrets: [String]

  init(connectionStrings: [String]) {
    var secrets = Set<String>()
    for connectionString in connectionStrings {
      for password in Self.passwords(in: connectionString) where !password.isEmpty {
        secrets.insert(password)
        if let decoded = password.removingPercentEncoding, !decoded.isEmpty {
          secrets.insert(decoded)
        }
      }
    }
    self.secrets = secrets.sorted { ($0.count, $0) > ($1.count, $1) }
  }

  /// Nothing: a dump of a database shows no password.
  var customMirror: Mirror { Mirror(self, children: [:]) }

  func redact(_ text: String) -> String {
    let replaced = secrets.reduce(text) {
      $0.replacingOccurrences(of: $1, with: Self.replacement)
    }
    return Self.patterns.reduce(replaced) { text, pattern in
      let range = NSRange(text.startIndex..., in: text)
      return pattern.expression.stringByReplacingMatches(
        in: text, range: range, withTemplate: pattern.template)
    }
  }

  /// What follows `password=` (quoted or not), and the password of a URI's userinfo. Made for
  /// each message (only errors are redacted), as a regular expression is not `Sendable`.
  private static var patterns: [(expression: NSRegularExpression, template: String)] {
    [
      (
        try! NSRegularExpression(
          pattern: #"(password\s*=\s*)('(?:\\.|[^'\\])*'?|[^\s&"]+)"#, options: [.caseInsensitive]),
        "$1\(replacement)"
      ),
      (
        try! NSRegularExpression(
          pattern: #"(postgres(?:ql)?://[^:/@\s"]*:)[^\s"]*@"#, options: [.caseInsensitive]),
        "$1\(replacement)@"
      ),
    ]
  }

  /// Every candidate for a password in `connectionString`, parsed or not.
  static func passwords(in connectionString: String) -> [String] {
    parsedPasswords(connectionString) + uriPasswords(connectionString)
      + keywordPasswords(connectionString)
  }

  /// The password libpq parses out of the string, when it can.
  private static func parsedPasswords(_ connectionString: String) -> [String] {
    var secrets: [String] = []
    var error: UnsafeMutablePointer<CChar>?
    if let options = PQconninfoParse(connectionString, &error) {
      var option = options
      while let keyword = option.pointee.keyword {
        if String(cString: keyword) == "password", let value = option.pointee.val {
          secrets.append(String(cString: value))
        }
        option += 1
      }
      PQconninfoFree(options)
    }
    if let error { PQfreemem(error) }
    return secrets
  }

  /// A URI's userinfo password, read up to the first `@` and up to the last (libpq stops at
  /// the first; a password with an unencoded `@` reaches the last), and its `password` query
  /// parameters.
  private static func uriPasswords(_ connectionString: String) -> [String] {
    let text = connectionString.trimmingCharacters(in: .whitespaces)
    guard let scheme = text.range(of: "://"),
      ["postgresql", "postgres"].contains(text[..<scheme.lowerBound].lowercased())
    else { return [] }
    let rest = text[scheme.upperBound...]
    var secrets: [String] = []
    for at in [rest.firstIndex(of: "@"), rest.lastIndex(of: "@")].compactMap({ $0 }) {
      let userinfo = rest[..<at]
      if let colon = userinfo.firstIndex(of: ":") {
        secrets.append(String(userinfo[userinfo.index(after: colon)...]))
      }
    }
    if let question = rest.firstIndex(of: "?") {
      for parameter in rest[rest.index(after: question)...].split(separator: "&") {
        let parts = parameter.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
        if parts.count == 2, (String(parts[0]).removingPercentEncoding ?? "") == "password" {
          secrets.append(String(parts[1]))
        }
      }
    }
    return secrets
  }

  /// The values of `password=` keywords, quoted (up to the closing quote, or the end of an
  /// unterminated one; as written and unescaped) or not (up to a space, and up to an `&`).
  private static func keywordPasswords(_ connectionString: String) -> [String] {
    let characters = Array(connectionString)
    let keyword = Array("password")
    var secrets: [String] = []
    var index = 0
    while index + keyword.count <= characters.count {
      let candidate = characters[index..<(index + keyword.count)]
      guard String(candidate).lowercased() == "password" else {
        index += 1
        continue
      }
      var position = index + keyword.count
      while position < characters.count, characters[position].isWhitespace { position += 1 }
      guard position < characters.count, characters[position] == "=" else {
        index += 1
        continue
      }
      position += 1
      while position < characters.count, characters[position].isWhitespace { position += 1 }
      var raw = ""
      var unescaped = ""
      if position < characters.count, characters[position] == "'" {
        position += 1
        while position < characters.count, characters[position] != "'" {
          if characters[position] == "\\", position + 1 < characters.count {
            raw.append(characters[position])
            position += 1
          }
          raw.append(characters[position])
          unescaped.append(characters[position])
          position += 1
        }
      } else {
        while position < characters.count, !characters[position].isWhitespace {
          raw.append(characters[position])
          position += 1
        }
        unescaped = raw
      }
      secrets += [raw, unescaped]
      if let beforeAmpersand = raw.split(separator: "&").first {
        secrets.append(String(beforeAmpersand))
      }
      index = max(position, index + 1)
    }
    return secrets
  }
}
