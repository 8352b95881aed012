import AuthCoordinator
import Foundation

/// Finds out, without risking the run, whether the coordinator in this build works: the
/// benchmark re-runs itself with `--probe-coordinator`, which makes one miss and one hit. A
/// placeholder that traps (or hangs) only ends that child process; the coordinator's rows are
/// then skipped and the report says why.
enum CoordinatorProbe {
  /// In the child: one authorization, then one cache hit.
  static func callOnce() async -> Bool {
    let fixture = AuthorizerFixture(gate: nil, now: { Date() })
    let source = CoordinatorSource(seed: [:], fixture: fixture, now: { Date() })
    let key = AccountKey(mcUid: "probe")
    guard let first = try? await source.get(key), let second = try? await source.get(key) else {
      return false
    }
    return fixture.isFresh(first, for: key) && second == first && fixture.authorizations == 1
  }

  /// In the parent: nil when the coordinator works, otherwise why not.
  static func problem() -> String? {
    guard let executable = executablePath() else { return "cannot locate this executable" }
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = ["--probe-coordinator"]
    process.standardOutput = FileHandle.nullDevice
    process.standardError = FileHandle.nullDevice
    do { try process.run() } catch { return "cannot start the probe: \(error)" }
    let deadline = Date().addingTimeInterval(20)
    while process.isRunning && Date() < deadline { Thread.sleep(forTimeInterval: 0.01) }
    if process.isRunning {
      process.terminate()
      return "the probe did not finish within 20 s"
    }
    if process.terminationReason == .uncaughtSignal {
      return "the probe crashed (signal \(process.terminationStatus)): placeholder coordinator?"
    }
    return process.terminationStatus == 0
      ? nil : "the probe failed (exit status \(process.terminationStatus))"
  }

  private static func executablePath() -> String? {
    #if os(Linux)
      if let path = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
        return path
      }
    #endif
    return Bundle.main.executablePath
  }
}
