extension AuthModel {
  /// An equal model that shares no storage with this one: its strings, its extra information
  /// and its refresh token are copied into buffers of their own.
  ///
  /// A copy of a model retains its strings' buffers, and a retain is an atomic write to the
  /// buffer's reference count. The coordinator keeps one replica per thread of a model it
  /// serves often, so that threads serving the same key never write the same memory.
  package func replica() -> AuthModel {
    var copy = self
    copy.uid = Self.unshared(uid)
    copy.accessToken = Self.unshared(accessToken)
    copy.mcUid = Self.unshared(mcUid)
    // Assigned even when empty: a model with neither shares one static record, whose
    // reference count every copy would write.
    copy.rare = Rare(
      extraInfo: Dictionary(
        uniqueKeysWithValues: extraInfo.map { (Self.unshared($0.key), Self.unshared($0.value)) }),
      refreshToken: refreshToken.map(Self.unshared))
    return copy
  }

  /// `string` in a buffer of its own (a string of up to 15 UTF-8 bytes has none: it is stored
  /// inline).
  private static func unshared(_ string: String) -> String {
    var string = string
    return string.withUTF8 { bytes in
      String(unsafeUninitializedCapacity: bytes.count) { buffer in
        _ = buffer.initialize(fromContentsOf: bytes)
        return bytes.count
      }
    }
  }
}
