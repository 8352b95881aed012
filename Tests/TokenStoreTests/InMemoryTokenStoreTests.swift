import Testing

@testable import TokenStore

@Suite(.timeLimit(.minutes(2))) struct InMemoryTokenStoreTests {
  @Test func emptyStoreHasNoModels() async {
    let store = InMemoryTokenStore()
    #expect(await store.model(for: key(1)) == nil)
    #expect(store.snapshot.isEmpty)
  }

  @Test func saveReadReplaceRemove() async {
    let store = InMemoryTokenStore()
    let first = sampleModel(1)
    let second = sampleModel(1)
    await store.save(first, for: key(1))
    #expect(await store.model(for: key(1)) == first)
    await store.save(second, for: key(1))
    #expect(await store.model(for: key(1)) == second)
    await store.removeModel(for: key(1))
    #expect(await store.model(for: key(1)) == nil)
    await store.removeModel(for: key(1))  // removing a missing key is fine
    #expect(store.snapshot.isEmpty)
  }

  @Test func keysAreIndependentAndRemoveAllClearsEverything() async {
    let store = InMemoryTokenStore([key(9): sampleModel(9)])
    await store.save(sampleModel(1), for: key(1))
    await store.save(sampleModel(2), for: AccountKey(account: "u1", mode: "other"))
    #expect(store.snapshot.count == 3)
    await store.removeModel(for: key(1))
    #expect(await store.model(for: AccountKey(account: "u1", mode: "other")) != nil)
    await store.removeAll()
    #expect(store.snapshot.isEmpty)
  }

  @Test func concurrentWritersDoNotLoseKeys() async {
    let store = InMemoryTokenStore()
    await withTaskGroup(of: Void.self) { group in
      for n in 0..<200 {
        group.addTask { await store.save(sampleModel(n), for: key(n)) }
      }
    }
    #expect(store.snapshot.count == 200)
  }
}
