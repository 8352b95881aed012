import Dispatch
import Foundation

#if canImport(Darwin)
  import Darwin
#elseif canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#endif

/// Noticing other processes' changes to the lease file while a lease has subscribers: a
/// kernel notification on the file's directory (inotify on Linux, a vnode dispatch source on
/// Apple platforms) plus a poll of the file's identity every `pollInterval`, for missed events
/// and filesystems without notifications. Every handler runs on the lease's queue.
///
/// Confined to the lease's queue (`start`, `stop` and the handlers run there; `stop` also runs
/// from the lease's `deinit`, when nothing else can reach it), hence `@unchecked Sendable`.
final class LeaseFileWatcher: @unchecked Sendable {
  private(set) var sources: [any DispatchSourceProtocol] = []
  /// Whether to use a kernel notification at all (tests turn it off, before the first
  /// subscriber, to exercise the poll alone).
  var usesKernelNotifications = true
  private let queue: DispatchQueue
  private let directoryPath: String
  private let fileName: String
  private let pollInterval: Duration

  init(queue: DispatchQueue, directoryPath: String, fileName: String, pollInterval: Duration) {
    self.queue = queue
    self.directoryPath = directoryPath
    self.fileName = fileName
    self.pollInterval = pollInterval
  }

  /// Starts the notification source (when the platform and directory allow one) and the poll.
  func start(lease: FileAuthorizationLease) {
    let notified: @Sendable () -> Void = { [weak lease] in lease?.refresh(always: true) }
    let poll: @Sendable () -> Void = { [weak lease] in lease?.refresh() }
    if usesKernelNotifications,
      let source = makeNotificationSource(
        onChange: notified, report: { [weak lease] in lease?.report($0) })
    {
      sources.append(source)
    }
    let timer = DispatchSource.makeTimerSource(queue: queue)
    let interval = Self.dispatchInterval(pollInterval)
    timer.schedule(deadline: .now() + interval, repeating: interval, leeway: .milliseconds(100))
    timer.setEventHandler(handler: poll)
    timer.resume()
    sources.append(timer)
  }

  func stop() {
    for source in sources { source.cancel() }
    sources.removeAll()
  }

  private static func dispatchInterval(_ duration: Duration) -> DispatchTimeInterval {
    let milliseconds =
      Duration.saturating(seconds: duration.seconds, limit: .seconds(365 * 86_400))
      .seconds * 1000
    return .milliseconds(max(10, Int(milliseconds)))
  }

  #if canImport(Glibc)
    /// inotify on the directory: the lease file is replaced by `rename`, which a watch on the
    /// file itself would miss (the watched inode is the old one). Events for other names in
    /// the directory (the lock file, the token store) are read and ignored.
    private func makeNotificationSource(
      onChange: @escaping @Sendable () -> Void,
      report: @escaping @Sendable (TokenStoreError) -> Void
    ) -> (any DispatchSourceProtocol)? {
      let fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
      guard fd >= 0 else {
        report(notificationError("inotify_init1", errno))
        return nil
      }
      let mask = UInt32(IN_MOVED_TO | IN_CLOSE_WRITE | IN_CREATE | IN_DELETE | IN_ONLYDIR)
      guard inotify_add_watch(fd, directoryPath, mask) >= 0 else {
        report(notificationError("inotify_add_watch", errno))
        close(fd)
        return nil
      }
      let source = DispatchSource.makeReadSource(fileDescriptor: fd, queue: queue)
      let name = Array(fileName.utf8)
      source.setEventHandler {
        if Self.drainEvents(fd, matching: name) { onChange() }
      }
      source.setCancelHandler { close(fd) }
      source.resume()
      return source
    }

    /// Reads every pending event.
    ///
    /// - Returns: Whether one concerns `name` (or events were lost: a queue overflow).
    private static func drainEvents(_ fd: Int32, matching name: [UInt8]) -> Bool {
      var matched = false
      var buffer = [UInt8](repeating: 0, count: 4096)
      while true {
        let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if count < 0 && errno == EINTR { continue }
        guard count > 0 else { return matched }
        buffer.withUnsafeBytes { bytes in
          // struct inotify_event { int wd; uint32_t mask, cookie, len; char name[len]; }
          var offset = 0
          while offset + 16 <= count {
            let mask = bytes.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self)
            let length = Int(bytes.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self))
            let nameBytes = bytes[(offset + 16)..<min(count, offset + 16 + length)]
            let eventName = nameBytes.prefix { $0 != 0 }
            if mask & UInt32(IN_Q_OVERFLOW) != 0 || eventName.elementsEqual(name) {
              matched = true
            }
            offset += 16 + length
          }
        }
      }
    }
  #elseif canImport(Darwin)
    /// A vnode source on the directory (opened with `O_EVTONLY`, so it does not keep the
    /// volume busy): `.write` fires when an entry is added, removed or renamed, which is how
    /// the lease file is replaced. It fires for the directory's other entries too (the token
    /// store, temporary and lock files); each event costs one read of the small lease file.
    private func makeNotificationSource(
      onChange: @escaping @Sendable () -> Void,
      report: @escaping @Sendable (TokenStoreError) -> Void
    ) -> (any DispatchSourceProtocol)? {
      let fd = open(directoryPath, O_EVTONLY | O_CLOEXEC)
      guard fd >= 0 else {
        report(notificationError("open", errno))
        return nil
      }
      let source = DispatchSource.makeFileSystemObjectSource(
        fileDescriptor: fd, eventMask: .write, queue: queue)
      source.setEventHandler(handler: onChange)
      source.setCancelHandler { close(fd) }
      source.resume()
      return source
    }
  #else
    private func makeNotificationSource(
      onChange: @escaping @Sendable () -> Void,
      report: @escaping @Sendable (TokenStoreError) -> Void
    ) -> (any DispatchSourceProtocol)? {
      nil
    }
  #endif

  private func notificationError(_ call: String, _ code: Int32) -> TokenStoreError {
    TokenStoreError(
      .ioFailure,
      "The lease file's directory cannot be watched; changes are noticed by polling every"
        + " \(pollInterval).", path: directoryPath,
      underlying: POSIXErrorDescription(call: call, errno: code))
  }
}
