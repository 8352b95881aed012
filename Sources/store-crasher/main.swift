// store-crasher: a helper for the FileTokenStore crash and multi-process tests.
//
//   store-crasher write <path> --key <mcUid> [--start <i>] [--count <n>]
//                       [--self-kill-after-us <µs>]
//     Saves model i, i+1, ... for the key in a tight loop (forever unless --count is given) and
//     prints each index to stdout, unbuffered, once its save has returned. Model i has uid
//     2088 followed by i in 12 digits and access token "tok-i" (a fake token: the tests need to
//     recognise it; real tokens are never printed). With --self-kill-after-us the process sends
//     itself SIGKILL after that many microseconds, from a second thread, wherever the loop is.
//     Prints "done" after --count saves.
//   store-crasher read <path> [--as-uid <uid>]
//     Drops to the given user id first (when run as root), then loads the store and prints
//     "ok <number of models>" or "error <code>".
//   store-crasher lease-hold <path> --key <mcUid> --ttl-ms <n>
//     Acquires the key's lease in the FileAuthorizationLease file at <path> (real wall clock,
//     owner "store-crasher-<pid>") for n milliseconds, prints "held <fence>" and sleeps until
//     killed, holding no lock. Prints "busy <owner>" (exit 1) when another holder has it.
//
// Two writers: the tests start two `write` processes on one store at once, with different
// --key values (no update may be lost) or the same key (no torn file).
//
// Exit status: 0 on success, 2 on a usage error, 1 when a save throws.

import Foundation
import TokenStore

#if canImport(Darwin)
  import Darwin
#elseif canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#endif

/// Writes a line to stdout with one unbuffered `write(2)`, so a SIGKILL never loses a line
/// that was reported as written.
func emit(_ line: String) {
  var bytes = Array((line + "\n").utf8)
  var offset = 0
  while offset < bytes.count {
    let written = bytes.withUnsafeMutableBytes {
      write(1, $0.baseAddress! + offset, $0.count - offset)
    }
    if written < 0 {
      if errno == EINTR { continue }
      exit(1)
    }
    offset += written
  }
}

func usage() -> Never {
  FileHandle.standardError.write(
    Data(
      """
      usage: store-crasher write <path> --key <mcUid> [--start <i>] [--count <n>] \
      [--self-kill-after-us <µs>]
             store-crasher read <path> [--as-uid <uid>]
             store-crasher lease-hold <path> --key <mcUid> --ttl-ms <n>

      """.utf8))
  exit(2)
}

/// The model the tests expect for index `i`.
func model(_ i: Int, mcUid: String) -> AuthModel {
  let digits = String(i)
  let uid = "2088" + String(repeating: "0", count: max(0, 12 - digits.count)) + digits
  return AuthModel(uid: uid, accessToken: "tok-\(i)", mcUid: mcUid)
}

var arguments = Array(CommandLine.arguments.dropFirst())
guard arguments.count >= 2 else { usage() }
let mode = arguments.removeFirst()
let url = URL(fileURLWithPath: arguments.removeFirst())
var options: [String: String] = [:]
while !arguments.isEmpty {
  let name = arguments.removeFirst()
  guard name.hasPrefix("--"), !arguments.isEmpty else { usage() }
  options[String(name.dropFirst(2))] = arguments.removeFirst()
}

switch mode {
case "write":
  guard let mcUid = options["key"] else { usage() }
  let start = Int(options["start"] ?? "0") ?? 0
  let count = options["count"].flatMap { Int($0) }
  let store = FileTokenStore(url: url)
  let key = AccountKey(account: mcUid)
  if let delay = options["self-kill-after-us"].flatMap({ UInt32($0) }) {
    Thread.detachNewThread {
      usleep(delay)
      kill(getpid(), SIGKILL)
    }
  }
  var i = start
  while count.map({ i < start + $0 }) ?? true {
    do {
      try await store.save(model(i, mcUid: mcUid), for: key)
    } catch {
      emit("error \(error.code)")
      exit(1)
    }
    emit(String(i))
    i += 1
  }
  emit("done")

case "read":
  if let uid = options["as-uid"].flatMap({ uid_t($0) }), getuid() == 0 {
    guard setgid(gid_t(uid)) == 0, setuid(uid) == 0 else {
      emit("error setuid")
      exit(1)
    }
  }
  do {
    let models = try await FileTokenStore(url: url).loadAll()
    emit("ok \(models.count)")
  } catch {
    emit("error \(error.code)")
  }

case "lease-hold":
  guard let mcUid = options["key"], let ttl = options["ttl-ms"].flatMap({ Int($0) }) else {
    usage()
  }
  let lease = FileAuthorizationLease(url: url)
  do {
    switch try await lease.acquire(
      AccountKey(account: mcUid), owner: "store-crasher-\(getpid())",
      timeToLive: .milliseconds(ttl))
    {
    case .acquired(let grant):
      emit("held \(grant.fence)")
    case .heldElsewhere(let owner, _):
      emit("busy \(owner)")
      exit(1)
    case .backingOff(_, _, let code):
      emit("backing-off \(code)")
      exit(1)
    }
  } catch {
    emit("error \(error.code)")
    exit(1)
  }
  // Holds the lease (a record in the file, no lock) until killed.
  while true { pause() }

default:
  usage()
}
