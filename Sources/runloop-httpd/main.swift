import Glibc

// runloop-httpd: a small HTTP/1.1 server on RunLoopKit. See README.md next to this file.

let options: ServerOptions
do {
    options = try ServerOptions.parse(Array(CommandLine.arguments.dropFirst()))
} catch .help {
    print(ServerOptions.usage, terminator: "")
    exit(0)
} catch .invalid(let message) {
    printError("runloop-httpd: \(message)\n\(ServerOptions.usage)")
    exit(2)
}
exit(Server(options: options).run())
