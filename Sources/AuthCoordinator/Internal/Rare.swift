/// A value that is usually absent, kept out of line: `nil` costs one pointer, and a value a box
/// of its own, replaced (never shared with a copy) on every change. For the rare parts of a
/// record that many copies of it carry (every key's state machine).
@propertyWrapper
struct Rare<Wrapped> {
  private final class Box {
    let value: Wrapped
    init(_ value: Wrapped) { self.value = value }
  }

  private var box: Box?

  init(wrappedValue: Wrapped?) { box = wrappedValue.map(Box.init) }

  var wrappedValue: Wrapped? {
    get { box?.value }
    set { box = newValue.map(Box.init) }
  }
}

extension Rare: Equatable where Wrapped: Equatable {
  static func == (lhs: Rare, rhs: Rare) -> Bool { lhs.wrappedValue == rhs.wrappedValue }
}
