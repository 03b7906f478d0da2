// A child started without newProcessGroup: signalling its group is a programmer error, which stops
// the process before any signal is sent (this program's own group included).
// expect-trap: LoopProcess.signalGroup(_:) needs a process started with newProcessGroup: true
import Glibc
import RunLoopKit

let child = try LoopProcess(executable: "/bin/sleep", arguments: ["5"])
child.signalGroup(SIGTERM)
print("signalled a group the child does not lead")
