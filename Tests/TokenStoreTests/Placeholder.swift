import Testing
@Test func placeholderTokenStoreTests() { #expect(Bool(true)) }
