// swift-tools-version: 6.2
import PackageDescription

// The service quick start of the README, as a package of its own that depends on this
// repository by path: it uses the public API only (no @testable, no package access). CI builds
// it and runs it against the simulated token server (scripts/ci-example.sh).
let package = Package(
  name: "ServiceQuickstart",
  platforms: [.macOS(.v13)],
  products: [.executable(name: "service-quickstart", targets: ["ServiceQuickstart"])],
  dependencies: [.package(name: "AuthCoordinator", path: "../..")],
  targets: [
    .executableTarget(
      name: "ServiceQuickstart",
      dependencies: [
        .product(name: "AuthCoordinator", package: "AuthCoordinator"),
        .product(name: "AuthCoordinatorOAuth2", package: "AuthCoordinator"),
      ])
  ],
  swiftLanguageModes: [.v6]
)
