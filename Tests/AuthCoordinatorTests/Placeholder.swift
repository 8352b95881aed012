import Testing
@Test func placeholderAuthCoordinatorTests() { #expect(Bool(true)) }
