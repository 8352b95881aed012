import Foundation
import Testing

@testable import TokenStore

/// ``FencedTokenStore``: a save under an older grant never overwrites a model a later grant
/// saved; checked atomically in the store, and kept in the file across instances (processes).
@Suite(.timeLimit(.minutes(5))) struct FencedSaveTests {
  /// Made once: a model's expiry is taken from the clock.
  let models = (0...6).map { sampleModel($0) }

  @Test func aFileStoreRefusesASaveWithAnOlderFenceAcrossInstances() async throws {
    let directory = try TemporaryDirectory()
    defer { directory.remove() }
    let first = FileTokenStore(url: directory.file())
    let second = FileTokenStore(url: directory.file())
    #expect(try await first.save(models[1], for: key(1), fence: 7))
    // Another process, holding a grant that was taken over (fence 3 < 7).
    #expect(try await !second.save(models[2], for: key(1), fence: 3))
    #expect(try await first.model(for: key(1)) == models[1])
    #expect(try await second.model(for: key(1)) == models[1])
    // The same holder again (a retry), and a later holder: both land.
    #expect(try await second.save(models[3], for: key(1), fence: 7))
    #expect(try await first.save(models[4], for: key(1), fence: 9))
    #expect(try await second.model(for: key(1)) == models[4])
    // An ordinary save keeps the fence; a removal forgets it with the model.
    try await first.save(models[5], for: key(1))
    #expect(try await !second.save(models[6], for: key(1), fence: 8))
    try await first.removeModel(for: key(1))
    #expect(try await second.save(models[6], for: key(1), fence: 1))
  }

  @Test func theFenceIsInTheFileAndAnOlderFileHasNone() throws {
    let data = try StoreFileFormat.encode([key(1): models[1]], fences: [key(1): 42])
    #expect(String(decoding: data, as: UTF8.self).contains("\"fence\":42"))
    let contents = try StoreFileFormat.decodeContents(data)
    #expect(contents.fences == [key(1): 42])
    #expect(contents.models == [key(1): models[1]])
    let unfenced = try StoreFileFormat.decodeContents(StoreFileFormat.encode([key(1): models[1]]))
    #expect(unfenced.fences.isEmpty)
  }

  @Test func anInMemoryStoreRefusesASaveWithAnOlderFence() async {
    let store = InMemoryTokenStore()
    #expect(await store.save(models[1], for: key(1), fence: 5))
    #expect(await !store.save(models[2], for: key(1), fence: 4))
    #expect(await store.model(for: key(1)) == models[1])
    await store.removeModels(forAccount: key(1).account)
    #expect(await store.save(models[2], for: key(1), fence: 4))
  }
}
