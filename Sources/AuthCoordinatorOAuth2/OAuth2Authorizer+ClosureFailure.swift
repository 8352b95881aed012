import AuthCoordinator
import Foundation

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

extension OAuth2Authorizer {
  /// Runs an integrator's closure that makes what a grant sends (a subject token, an actor
  /// token, an assertion), and reports its failure as the client assertion's is reported: a
  /// `URLError` transiently with its code only, an ``/AuthCoordinator/AuthCoordinatorError`` as
  /// it is, `CancellationError` as it is, anything else terminally with its type's name only
  /// (its description might hold key material or a token).
  ///
  /// - Parameters:
  ///   - code: The code of the error a failure becomes.
  ///   - what: What the closure makes, for the message ("the subject token").
  ///   - body: The closure's call.
  /// - Returns: What `body` returns.
  static func integratorValue<T: Sendable>(
    _ code: AuthCoordinatorError.Code, _ what: String, _ body: () async throws -> T
  ) async throws -> T {
    let value: T
    do {
      value = try await body()
    } catch let error as CancellationError {
      throw error
    } catch let error as AuthCoordinatorError {
      throw error
    } catch let error as URLError {
      // Only the code: the error's user info may carry a URL with credentials.
      throw AuthCoordinatorError(
        code,
        "\(what) could not be made: its closure failed with URLError \(error.code.rawValue)",
        underlying: URLError(error.code), transient: true)
    } catch {
      throw AuthCoordinatorError(
        code, "\(what) could not be made: its closure threw \(Swift.type(of: error))",
        transient: false)
    }
    try Task.checkCancellation()
    return value
  }
}
