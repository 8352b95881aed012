import Foundation

#if canImport(Darwin)
  import Darwin
#elseif canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#endif

// Who may have written what the file holds: a store or lease whose directory or file another
// local user owns, or that group or others may write (or, for the store's file, read), is not
// trusted. Every check is an `fstat` of a descriptor the caller then uses (the directory's, to
// open the file relative to it; the file's, to read it), never a `stat` of a path before an
// `open` of it.
extension DurableFile {
  /// What a store or lease does with a directory or file it does not trust.
  enum OwnershipPolicy: Sendable {
    /// Throw ``TokenStoreError/Code/insecurePermissions``: Linux, macOS, other platforms.
    case refuse
    /// Report it to `onIssue` (once per path and problem) and go on: iOS, tvOS, watchOS,
    /// visionOS, where the sandbox, not Unix modes, keeps apps apart, every app runs as the
    /// same user, and an app group container's modes are the system's choice.
    case report

    static var platformDefault: OwnershipPolicy {
      #if canImport(Darwin) && !os(macOS)
        .report
      #else
        .refuse
      #endif
    }
  }

  /// What kind of entry `info` describes, for the checks below.
  enum Entry {
    case directory
    /// The file itself: `holdsSecrets` forbids group and others reading it too.
    case file
    case lockFile
  }

  /// Opens the file's directory (following links in its path: `/var` is one on macOS) and
  /// checks it.
  ///
  /// - Returns: The descriptor (close it), or `nil` when the directory does not exist.
  func openCheckedDirectory() throws(TokenStoreError) -> Int32? {
    let fd = open(directoryPath, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    guard fd >= 0 else {
      let code = errno
      if code == ENOENT { return nil }
      throw Self.systemError(
        "open", code, "The directory of \(noun) cannot be opened.", path: directoryPath)
    }
    do throws(TokenStoreError) {
      var info = stat()
      guard fstat(fd, &info) == 0 else {
        throw Self.systemError(
          "fstat", errno, "The directory of \(noun) cannot be examined.", path: directoryPath)
      }
      try check(info, as: .directory, path: directoryPath, fd: fd)
      return fd
    } catch {
      close(fd)
      throw error
    }
  }

  /// Checks the owner and mode of an opened directory, file or lock file (`fd`, whose
  /// `fstat` is `info`): owned by this process's effective user, and not writable by group or
  /// others. A file holding tokens that group or others may read, but is otherwise trusted,
  /// is made `0600` through `fd` and reported to `onIssue` (what it holds may have been read).
  func check(_ info: stat, as entry: Entry, path: String, fd: Int32) throws(TokenStoreError) {
    let mode = UInt32(info.st_mode) & 0o7777
    var problems: [String] = []
    if info.st_uid != geteuid() {
      problems.append("is owned by user id \(info.st_uid), not this process's \(geteuid())")
    }
    if mode & 0o022 != 0 {
      problems.append("has mode \(String(mode, radix: 8)), writable by group or others")
    }
    if problems.isEmpty, entry == .file, holdsSecrets, mode & 0o044 != 0 {
      let tightened = fchmod(fd, mode_t(mode & ~0o077)) == 0
      onIssue?(
        TokenStoreError(
          .insecurePermissions,
          "\(capitalizedNoun) had mode \(String(mode, radix: 8)), readable by group or others:"
            + " the tokens it holds may have been read. "
            + (tightened ? "Its mode is now 0600." : "Its mode could not be changed to 0600."),
          path: path))
      return
    }
    guard !problems.isEmpty else { return }
    let what =
      switch entry {
      case .directory: "The directory of \(noun)"
      case .file: capitalizedNoun
      case .lockFile: "The lock file of \(noun)"
      }
    let error = TokenStoreError(
      .insecurePermissions,
      "\(what) \(problems.joined(separator: " and ")): another local user could have written"
        + " what it holds, so it is not used. Give it to this user with mode 0700 (directory)"
        + " or 0600 (files), or choose another directory.",
      path: path)
    switch ownershipPolicy {
    case .refuse:
      throw error
    case .report:
      let first = reportedOwnership.withLock { $0.insert("\(path)|\(error.message)").inserted }
      if first { onIssue?(error) }
    }
  }
}
