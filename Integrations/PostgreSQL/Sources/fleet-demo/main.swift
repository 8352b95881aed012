// fleet-demo: one authorization for a fleet of replica processes on one PostgreSQL database.
//
//   scripts/with-postgres.sh swift run --package-path Integrations/PostgreSQL fleet-demo
//
// The parent starts the replicas (this executable with `replica`), releases them at once, and
// prints what they and the SIMULATED identity provider saw. See Sources/AuthCoordinator/Documentation.docc/RunningAFleetOnPostgreSQL.md.
import Foundation

let options: Options
do {
  options = try Options(Array(CommandLine.arguments.dropFirst()))
} catch let error as UsageError {
  if let message = error.message {
    FileHandle.standardError.write(Data("fleet-demo: \(message)\n".utf8))
  }
  print(Options.usage)
  exit(error.message == nil ? 0 : 2)
}

do {
  if options.isReplica {
    try await Replica.run(options)
    exit(0)
  } else {
    exit(try await Fleet.run(options) ? 0 : 1)
  }
} catch {
  FileHandle.standardError.write(Data("fleet-demo: \(error)\n".utf8))
  exit(1)
}
