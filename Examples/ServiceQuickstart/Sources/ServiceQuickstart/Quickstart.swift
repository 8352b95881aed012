// The service quick start of the README: the lines between the markers are the README's
// example, word for word (Tests/OAuth2Tests/ReadmeServiceExampleTests.swift compares them).
// main.swift runs it against the simulated token server.

// README: begin
import AuthCoordinatorOAuth2
import Foundation

#if canImport(FoundationNetworking)
  import FoundationNetworking  // URLSession on Linux
#endif

func makeReportsClient(tokenEndpoint: URL, api: URL, clientSecret: String) -> BearerClient {
  let authorizer = OAuth2Authorizer(
    tokenEndpoint: tokenEndpoint, clientID: "reports-service", clientSecret: clientSecret)
  // Callers fail after 2 s rather than wait; a token is renewed 1 s before it expires.
  let coordinator = AuthCoordinator(
    store: InMemoryTokenStore(), authorizer: authorizer,
    configuration: .init(authorizationTimeout: .seconds(2), refreshLeeway: .seconds(1)))
  let connections = URLSessionConfiguration.ephemeral
  connections.httpMaximumConnectionsPerHost = 32  // concurrent calls to one host
  // The token goes to the API's origin only; every call ends within 10 s.
  return BearerClient(
    coordinator: coordinator, key: AccountKey(account: "reports-service"), origin: api,
    session: URLSession(configuration: connections), deadline: .seconds(10))
}

// One token for every concurrent call; a 401 refreshes it once and retries once.
func fetch(_ url: URL, with client: BearerClient) async throws -> (Data, HTTPURLResponse) {
  try await client.data(from: url)
}
// README: end
