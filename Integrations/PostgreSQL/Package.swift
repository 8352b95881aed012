// swift-tools-version: 6.2
import PackageDescription

// The PostgreSQL token store and lease: one authorization per key for a whole fleet of
// replicas. A package of its own so that the root package stays free of any system library:
// it depends on the root package by path and on the system's libpq (Debian: libpq-dev).
// Its tests need a server: `scripts/with-postgres.sh swift test --package-path
// Integrations/PostgreSQL` starts a throwaway one (see Sources/AuthCoordinator/Documentation.docc/RunningAFleetOnPostgreSQL.md).
let package = Package(
  name: "AuthCoordinatorPostgreSQL",
  platforms: [.macOS(.v13), .iOS(.v16)],
  products: [
    .library(name: "AuthCoordinatorPostgreSQL", targets: ["AuthCoordinatorPostgreSQL"]),
    .executable(name: "fleet-demo", targets: ["fleet-demo"]),
  ],
  dependencies: [.package(name: "AuthCoordinator", path: "../..")],
  targets: [
    .systemLibrary(
      name: "CLibPQ",
      pkgConfig: "libpq",
      providers: [.apt(["libpq-dev"]), .brew(["libpq"])]),
    .target(
      name: "AuthCoordinatorPostgreSQL",
      dependencies: [
        "CLibPQ",
        .product(name: "TokenStore", package: "AuthCoordinator"),
      ]),
    .executableTarget(
      name: "fleet-demo",
      dependencies: [
        "AuthCoordinatorPostgreSQL",
        .product(name: "AuthCoordinator", package: "AuthCoordinator"),
        // The simulated identity provider's rotation rules (RotatingTokenIssuer).
        .product(name: "AuthCoordinatorTestKit", package: "AuthCoordinator"),
      ]),
    .testTarget(
      name: "AuthCoordinatorPostgreSQLTests",
      dependencies: [
        "AuthCoordinatorPostgreSQL",
        .product(name: "AuthCoordinator", package: "AuthCoordinator"),
        .product(name: "AuthCoordinatorTestKit", package: "AuthCoordinator"),
      ]),
  ],
  swiftLanguageModes: [.v6]
)
