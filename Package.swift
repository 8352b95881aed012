// swift-tools-version: 6.2
import PackageDescription

// Every target builds in the Swift 6 language mode (complete strict concurrency).
// The package depends on nothing but the toolchain.
let package = Package(
  name: "AuthCoordinator",
  platforms: [.macOS(.v13), .iOS(.v16), .tvOS(.v16), .watchOS(.v9)],
  products: [
    .library(name: "AuthCoordinator", targets: ["AuthCoordinator"]),
    .library(name: "TokenStore", targets: ["TokenStore"]),
    .library(name: "AlipayBridge", targets: ["AlipayBridge"]),
    .library(name: "AuthCoordinatorOAuth2", targets: ["AuthCoordinatorOAuth2"]),
    .library(name: "AuthCoordinatorTestKit", targets: ["AuthCoordinatorTestKit"]),
    .library(name: "AlipayBridgeServer", targets: ["AlipayBridgeServer"]),
    .executable(name: "authcoord", targets: ["authcoord"]),
  ],
  targets: [
    // A pthread-backed lock and a C11 atomic counter shared by the library modules. Not a
    // product; its declarations are public only because the compiler does not inline
    // `@inlinable package` ones into another module (Swift 6.3), and a lock or counter call
    // that is not inlined retains and releases its object around it.
    .target(name: "CSyncPrimitives"),
    .target(name: "SyncPrimitives", dependencies: ["CSyncPrimitives"]),
    .target(name: "TokenStore", dependencies: ["SyncPrimitives"]),
    .target(name: "AuthCoordinator", dependencies: ["TokenStore", "SyncPrimitives"]),
    // The HTTP limits every token request enforces (a bounded body, a whole-request timeout, no
    // redirect but a same-origin HTTPS one) and secret-free body excerpts, shared by the Alipay
    // exchanger and the OAuth 2 authorizer (package access only).
    .target(name: "HTTPSupport", dependencies: ["SyncPrimitives"]),
    // The Alipay account-connect bridge (callbacks, Inside SDK, HTTP exchanger) on top of the
    // core, which knows nothing of Alipay. Its error codes extend `AuthCoordinatorError.Code`.
    .target(
      name: "AlipayBridge",
      dependencies: ["AuthCoordinator", "TokenStore", "SyncPrimitives", "HTTPSupport"]),
    // For Swift services: an OAuth 2 authorizer over URLSession and a bearer-attaching HTTP
    // client, on top of the core.
    .target(
      name: "AuthCoordinatorOAuth2",
      dependencies: ["AuthCoordinator", "SyncPrimitives", "HTTPSupport"]),
    // The integrator's server side of Alipay silent refresh: a signed client of
    // `alipay.system.oauth.token`, a silent authorizer over it, and the endpoints the app calls
    // (`/alipay/token`, `/alipay/refresh`), on top of the core and the OAuth 2 module's transport.
    .target(
      name: "AlipayBridgeServer",
      dependencies: [
        "AuthCoordinator", "TokenStore", "AuthCoordinatorOAuth2", "HTTPSupport", "SyncPrimitives",
      ]),
    .target(
      name: "AuthCoordinatorTestKit",
      dependencies: ["AuthCoordinator", "AuthCoordinatorOAuth2", "HTTPSupport", "SyncPrimitives"]),
    // Info.plist checks for account connect, behind `authcoord doctor`.
    .target(name: "AppConfigDoctor"),
    .executableTarget(
      name: "authcoord",
      dependencies: [
        "AuthCoordinator", "AlipayBridge", "AlipayBridgeServer", "AuthCoordinatorOAuth2",
        "AuthCoordinatorTestKit",
        "AppConfigDoctor",
      ]
    ),
    // Saves models in a loop until killed: the crash-safety tests SIGKILL it.
    .executableTarget(name: "store-crasher", dependencies: ["TokenStore"]),
    // One process of the multi-process tests: an AuthCoordinator on a shared FileTokenStore and
    // FileAuthorizationLease against the rotating token server (Tests/MultiProcessTests).
    .executableTarget(name: "auth-worker", dependencies: ["AuthCoordinator", "TokenStore"]),
    // The benchmark is a package of its own: Benchmarks/Package.swift (docs/benchmarks.md).
    // Fixtures/ holds store files written by earlier format versions, read by path.
    .testTarget(
      name: "TokenStoreTests", dependencies: ["TokenStore", "store-crasher"],
      exclude: ["Fixtures"]),
    // Launches Tests/ExchangerTests/Resources/token_server.py (python3) on 127.0.0.1 for the
    // exchanger and end-to-end tests.
    .target(name: "LoopbackTokenServer", path: "Tests/Support/LoopbackTokenServer"),
    // Launches Tests/Support/RotatingTokenServer/rotating_token_server.py (python3) on 127.0.0.1:
    // a token endpoint that rotates refresh tokens, for the multi-process tests.
    .target(
      name: "RotatingTokenServer", dependencies: ["LoopbackTokenServer"],
      path: "Tests/Support/RotatingTokenServer", exclude: ["rotating_token_server.py"]),
    // Runs the HTTP exchanger against the loopback token server (needs python3 on PATH).
    .testTarget(
      name: "ExchangerTests",
      dependencies: ["AuthCoordinator", "AlipayBridge", "HTTPSupport", "LoopbackTokenServer"],
      exclude: ["Resources"]),
    .testTarget(
      name: "AppConfigDoctorTests",
      dependencies: ["AppConfigDoctor", "authcoord"],
      exclude: ["Fixtures"]
    ),
    .testTarget(
      name: "AuthCoordinatorTests",
      dependencies: ["AuthCoordinator", "AuthCoordinatorTestKit", "SyncPrimitives"]
    ),
    .testTarget(
      name: "AlipayBridgeTests",
      dependencies: ["AuthCoordinator", "AlipayBridge", "AuthCoordinatorTestKit", "SyncPrimitives"]),
    .testTarget(
      name: "ConcurrencyTests",
      dependencies: ["AuthCoordinator", "AuthCoordinatorTestKit", "SyncPrimitives"]
    ),
    // Coordinator + Alipay bridge + HTTP exchanger together, against a simulated Alipay app and
    // the ExchangerTests' python3 token server on 127.0.0.1 (needs python3 on PATH).
    .testTarget(
      name: "EndToEndTests",
      dependencies: [
        "AuthCoordinator", "AlipayBridge", "AuthCoordinatorTestKit", "authcoord",
        "LoopbackTokenServer",
      ]
    ),
    // The Alipay server side against the TestKit's simulated Alipay gateway, in process and on a
    // loopback socket (no python3 needed).
    .testTarget(
      name: "AlipayBridgeServerTests",
      dependencies: [
        "AlipayBridgeServer", "AlipayBridge", "AuthCoordinator", "AuthCoordinatorTestKit",
        "TokenStore", "SyncPrimitives",
      ]),
    // The OAuth 2 authorizer against the rotating token server (needs python3 on PATH).
    .testTarget(
      name: "OAuth2Tests",
      dependencies: ["AuthCoordinatorOAuth2", "AuthCoordinatorTestKit", "RotatingTokenServer"]),
    // The bearer client against the rotating token server's protected resource (python3).
    .testTarget(
      name: "BearerClientTests",
      dependencies: ["AuthCoordinatorOAuth2", "AuthCoordinatorTestKit", "RotatingTokenServer"]),
    // Several auth-worker processes on one store file and lease against the rotating token
    // server: one authorization per key across processes (needs python3 on PATH).
    .testTarget(
      name: "MultiProcessTests",
      dependencies: [
        "AuthCoordinator", "AuthCoordinatorTestKit", "TokenStore", "SyncPrimitives",
        "RotatingTokenServer", "auth-worker",
      ],
      exclude: ["README.md"]),
  ],
  swiftLanguageModes: [.v6]
)
