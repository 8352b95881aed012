import Foundation

let usage = """
  usage: authcoord <command> [options]

  commands:
    simulate   many mini-programs asking for the login state at once, against a simulated
               Alipay app and integrator server (see `authcoord simulate --help`)
    doctor     check an app's Info.plist for account connect (see `authcoord doctor --help`)
  """

let arguments = Array(CommandLine.arguments.dropFirst())
let status: Int32
switch arguments.first {
case "simulate": status = await SimulateCommand.run(Array(arguments.dropFirst()))
case "doctor": status = DoctorCommand.run(Array(arguments.dropFirst()))
case "-h", "--help", "help":
  print(usage)
  status = 0
case nil:
  FileHandle.standardError.write(Data("\(usage)\n".utf8))
  status = 2
case let other?:
  FileHandle.standardError.write(Data("authcoord: unknown command '\(other)'\n\n\(usage)\n".utf8))
  status = 2
}
exit(status)
