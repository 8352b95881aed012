import Foundation
import Testing

/// Runs the built `authcoord` as a child process, for the tests of its commands. (The demos
/// install a process-wide executor hook, their virtual world, so they never run inside the test
/// process.)
///
/// The child is waited for on threads of their own, never on the cooperative pool: a demo run
/// takes seconds, and blocking the pool's threads (two on a 2-core machine) that long starved
/// every other test of the process. Full runs stalled that way, with real-time tests failing
/// beside them (a token request that did not reach its server within 10 s, a multi-process
/// test that never finished).
enum AuthcoordProcess {
  /// Runs `authcoord` with `arguments`.
  ///
  /// - Returns: Its exit status and what it printed on stdout and stderr.
  static func run(_ arguments: [String]) async throws -> (status: Int32, out: String, err: String) {
    let binary = try #require(
      IntegrationGuideSnippetsTests.authcoordExecutable(), "authcoord was not built")
    let child = Child()
    child.process.executableURL = binary
    child.process.arguments = arguments
    let output = Pipe()
    let errors = Pipe()
    child.process.standardOutput = output
    child.process.standardError = errors
    try child.process.run()
    // Both pipes are drained at once, so that neither can fill up and block the child.
    async let out = offThePool { output.fileHandleForReading.readDataToEndOfFile() }
    async let err = offThePool { errors.fileHandleForReading.readDataToEndOfFile() }
    let (outData, errData) = await (out, err)
    let status = await offThePool { child.waitForExit() }
    return (
      status, String(decoding: outData, as: UTF8.self), String(decoding: errData, as: UTF8.self)
    )
  }

  /// Runs the blocking `body` on a thread of its own and returns its result.
  private static func offThePool<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
      Thread.detachNewThread { continuation.resume(returning: body()) }
    }
  }

  /// A `Process`, handed to the thread that waits for it.
  private final class Child: @unchecked Sendable {
    let process = Process()

    func waitForExit() -> Int32 {
      process.waitUntilExit()
      return process.terminationStatus
    }
  }
}
