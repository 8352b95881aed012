import Foundation
import Testing

@testable import AuthCoordinatorPostgreSQL

/// The connection password never shows: not in an error about a connection string libpq cannot
/// parse (it quotes the token, or the whole URI), nor in a description or a `dump` of the
/// configuration or the database. No server is needed for the errors: each string fails before
/// a connection is made, or at a closed port.
@Suite("PostgreSQL passwords never show", .timeLimit(.minutes(1)))
struct PostgresPasswordRedactionTests {
  /// Every way a value can be shown.
  static func renderings(of value: Any) -> [String] {
    var dumped = ""
    dump(value, to: &dumped)
    var renderings = [String(describing: value), String(reflecting: value), dumped]
    if let error = value as? any Error { renderings.append(error.localizedDescription) }
    if let error = value as? PostgresError { renderings.append(error.message) }
    return renderings
  }

  /// `password` and its percent-decoded form, for the checks.
  static func forms(of password: String) -> [String] {
    [password] + (password.removingPercentEncoding.map { [$0] } ?? [])
  }

  @Test(
    "an error about a connection string libpq cannot use never shows its password",
    arguments: [
      // An unencoded `%`: libpq quotes the token.
      ("postgresql://svc:Sup3r%-Secret@127.0.0.1:1/app", "Sup3r%-Secret"),
      ("postgresql://svc@127.0.0.1:1/app?password=Sup3r%-Secret", "Sup3r%-Secret"),
      // A typo in the host: libpq quotes the whole URI.
      ("postgresql://svc:Sup3r-Secret@[127.0.0.1/app", "Sup3r-Secret"),
      ("postgresql://svc:Sup3r-Secret@[::1]x/app", "Sup3r-Secret"),
      ("postgresql://svc:Sup3r%2DSecret@[::1]x/app", "Sup3r%2DSecret"),
      ("postgres://svc:Sup3r-Secret@127.0.0.1:1:2/app", "Sup3r-Secret"),
      // Keyword strings: a bad option, an unterminated quote, a refused connection.
      ("host=127.0.0.1 port=1 password='Sup3r Secret' dbnme=app", "Sup3r Secret"),
      ("host=127.0.0.1 port=1 password='Sup3r\\'Secret", "Sup3r'Secret"),
      ("host=127.0.0.1 port=1 dbname=app password=Sup3r%Secret", "Sup3r%Secret"),
    ])
  func badConnectionStrings(connectionString: String, password: String) async throws {
    let configuration = PostgresConfiguration(
      connectionString: connectionString, connectTimeout: .seconds(2), callTimeout: .seconds(4))
    let error = await #expect(throws: PostgresError.self) {
      _ = try await PostgresDatabase(configuration)
    }
    guard let error else { return }
    #expect(error.code == .connectionFailed)
    for rendering in Self.renderings(of: error) + Self.renderings(of: configuration) {
      for form in Self.forms(of: password) {
        #expect(!rendering.contains(form), "\(form) in: \(rendering)")
      }
    }
  }

  @Test("a message that quotes a URI's userinfo or a password keyword is redacted, parsed or not")
  func patterns() {
    let redactor = Redactor(connectionStrings: ["host=db password='Sup3r Secret'"])
    let message = """
      "postgresql://svc:Other-Secret@[db/app" password = 'Third Secret' PASSWORD=Fourth&x=1 \
      and Sup3r Secret
      """
    let redacted = redactor.redact(message)
    for secret in ["Other-Secret", "Third Secret", "Fourth", "Sup3r Secret"] {
      #expect(!redacted.contains(secret), "\(redacted)")
    }
    #expect(redacted.contains("postgresql://svc:<redacted>@[db/app") && redacted.contains("&x=1"))
    var dumped = ""
    dump(redactor, to: &dumped)
    #expect(!dumped.contains("Sup3r"))
  }

  @Test("a configuration's description, debug description and dump hide both connection strings")
  func configurationRenderings() {
    let configuration = PostgresConfiguration(
      connectionString: "postgresql://svc:Sup3r-Secret@db/app",
      listenerConnectionString: "host=db user=svc password=Other-Secret")
    let renderings = Self.renderings(of: configuration) + Self.renderings(of: [configuration])
    for rendering in renderings {
      #expect(
        !rendering.contains("Sup3r-Secret") && !rendering.contains("Other-Secret"), "\(rendering)")
    }
    // Still useful: the settings that are no secret are shown.
    #expect(renderings.allSatisfy { $0.contains("authcoord") })
  }

  @Test(
    "an open database's dump hides the password", .enabled(if: TestServer.isAvailable))
  func databaseDump() async throws {
    // The test server trusts local connections: the password is sent to no one, and shown to
    // no one.
    var configuration = TestServer.configuration(schema: TestServer.freshSchema())
    configuration.connectionString += " password=Sup3r-Secret"
    let database = try await PostgresDatabase(configuration)
    defer { database.close() }
    for rendering in Self.renderings(of: database) + Self.renderings(of: database.configuration) {
      #expect(!rendering.contains("Sup3r-Secret"), "\(rendering)")
    }
  }
}
