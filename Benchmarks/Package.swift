// swift-tools-version: 6.2
import PackageDescription

// The benchmark (docs/benchmarks.md), a package of its own as swift-nio and swift-log keep
// theirs: the root package's build and `swift test` never compile it, and it sees the library
// only through its public API. Built in a plain release build: no unsafe flags.
//
//   swift run -c release --package-path Benchmarks authcoord-bench --quick
let package = Package(
  name: "AuthCoordinatorBenchmarks",
  platforms: [.macOS(.v13), .iOS(.v16), .tvOS(.v16), .watchOS(.v9)],
  dependencies: [.package(name: "AuthCoordinator", path: "..")],
  targets: [
    .executableTarget(
      name: "authcoord-bench",
      dependencies: [.product(name: "AuthCoordinator", package: "AuthCoordinator")],
      path: "AuthCoordinatorBenchmarks"
    )
  ]
)
