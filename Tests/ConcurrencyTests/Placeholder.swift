import Testing
@Test func placeholderConcurrencyTests() { #expect(Bool(true)) }
