// The scenario driver: runs the quick start (Quickstart.swift) against the SIMULATED token
// server of Tests/Support/RotatingTokenServer, whose base URL is the one argument:
//
//   swift run --package-path Examples/ServiceQuickstart service-quickstart http://127.0.0.1:PORT
//
// (scripts/ci-example.sh starts the server and runs this). The service's side goes through the
// quick start's two functions only. The driver also talks to the simulated server's ADMIN
// routes (`/config`, `/revoke-access`, `/stats`: SimulatedServerAdmin.swift), which exist only
// to script the simulation and to count what the server saw; a real service never calls them.
// Each phase (Scenario.swift) prints one line with its measured numbers; the run exits 1 at
// the first phase whose expectations fail, or when the server cannot be reached.

import Foundation

guard CommandLine.arguments.count == 2, let base = URL(string: CommandLine.arguments[1]),
  base.scheme == "http" || base.scheme == "https"
else {
  print("usage: service-quickstart <base URL of the simulated token server>")
  exit(2)
}

do {
  var scenario = try await Scenario(server: SimulatedServerAdmin(base: base))
  try await scenario.coldStart()
  try await scenario.expiries()
  try await scenario.slowEndpoint()
  try await scenario.revocationStorm()
  try await scenario.summary()
} catch {
  print("the scenario could not run: \(error)")
  exit(1)
}
