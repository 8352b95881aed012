import AuthCoordinatorOAuth2
import Foundation
import RotatingTokenServer
import Testing

/// JSON numbers in the token endpoint's reply are numbers on every platform, 0 and 1
/// included: swift-corelibs-foundation bridges those two to `Bool` (`value is Bool` holds for
/// them), which a check that refuses booleans took for `true` and `false`. A real `true` is
/// still not a number.
@Suite(.timeLimit(.minutes(5))) struct JSONNumberTests {
  @Test(arguments: [0, 1, 2])
  func smallIntegersAreNumbersOfSecondsAndUserIDs(_ value: Int) async throws {
    let server = try RotatingTokenServer()
    defer { server.stop() }
    try await script(
      server, status: 200,
      body: #"{"access_token":"at-n","expires_in":\#(value),"user_id":\#(value)}"#)
    let date = TestDate()

    let model = try await authorizer(server, now: date.source).authorize(request())

    #expect(model.expiresAt == date.date.addingTimeInterval(TimeInterval(value)))
    #expect(model.uid == "\(value)")
  }

  @Test func oneWrittenAsARealIsANumberToo() async throws {
    let server = try RotatingTokenServer()
    defer { server.stop() }
    try await script(
      server, status: 200, body: #"{"access_token":"at-n","expires_in":1.0,"user_id":0}"#)
    let date = TestDate()

    let model = try await authorizer(server, now: date.source).authorize(request())

    #expect(model.expiresAt == date.date.addingTimeInterval(1))
    #expect(model.uid == "0")
  }

  @Test func aBooleanIsNeitherASecondCountNorAUserID() async throws {
    let server = try RotatingTokenServer()
    defer { server.stop() }
    try await script(
      server, status: 200, body: #"{"access_token":"at-n","expires_in":true}"#)
    let error = await coordinatorError { try await authorizer(server).authorize(request()) }
    #expect(error?.code == .tokenEndpointError)
    #expect(error?.message.contains("expires_in") == true)

    try await script(server, status: 200, body: #"{"access_token":"at-n","user_id":true}"#)
    #expect(try await authorizer(server).authorize(request()).uid == "")
  }
}
