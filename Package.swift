// swift-tools-version:6.0
import PackageDescription

// The complete programs of the documentation (README.md and the DocC articles), each
// an executable of its own built from Examples/<name>/main.swift, which holds the program as the
// documentation shows it. The tests run them as child processes, as a user would.
let examples = [
    "actor", "async-server", "background-thread", "burst", "chat-server", "child-exit", "echo", "executor-preference",
    "follow", "frame-link", "hang-monitor", "import-mode", "inside-another-loop", "instrument", "isolated-port",
    "main-queue", "metrics", "modal", "modes", "observer", "overview", "perform", "pipe-reader", "port", "readme",
    "schedule", "signal", "socket-activated", "sort", "stdin-lines", "supervisor", "timers", "tolerance", "tracer",
]

let package = Package(
    name: "RunLoopKit",
    products: [
        .library(name: "RunLoopKit", targets: ["RunLoopKit"]),
        .library(name: "RunLoopKitMainExecutor", targets: ["RunLoopKitMainExecutor"]),
        .executable(name: "runloop-demo", targets: ["runloop-demo"]),
        .executable(name: "runloop-httpd", targets: ["runloop-httpd"]),
    ],
    targets: [
        // libevent 2.1 from Debian's libevent-dev; only RunLoopKit's Backend files import it.
        .systemLibrary(
            name: "CLibevent",
            path: "Modulemaps/CLibevent",
            pkgConfig: "libevent_core",
            providers: [.apt(["libevent-dev"])]
        ),
        // The Linux calls beyond libevent (eventfd, timerfd, signal routing, pidfds, accept4, the
        // main-queue hooks), wrapped once; only Platform/Platform.swift of RunLoopKit imports it.
        .target(name: "CPlatform"),
        // OpenSSL 3 from Debian's libssl-dev; only the TLS/OpenSSL*.swift files of RunLoopKit import it.
        .systemLibrary(
            name: "COpenSSL",
            path: "Modulemaps/COpenSSL",
            pkgConfig: "openssl",
            providers: [.apt(["libssl-dev"])]
        ),
        .target(
            name: "RunLoopKit",
            dependencies: ["CLibevent", "CPlatform", "COpenSSL"]
        ),
        // Opt-in: Loop.main as the program's main executor (Swift 6.3's experimental hooks).
        .target(
            name: "RunLoopKitMainExecutor",
            dependencies: ["RunLoopKit"]
        ),
        .executableTarget(
            name: "runloop-demo",
            dependencies: ["RunLoopKit"]
        ),
        // Run by the tests as a child process: main-queue behaviour needs the real main thread.
        .executableTarget(
            name: "runloop-mainqueue-probe",
            dependencies: ["RunLoopKit", "RunLoopKitMainExecutor"]
        ),

        // HTTP/1.1 server on RunLoopKit, and the same server on raw libevent in C for comparison.
        .target(
            name: "HTTPCore",
            dependencies: []
        ),
        .executableTarget(
            name: "runloop-httpd",
            dependencies: ["RunLoopKit", "HTTPCore"],
            exclude: ["README.md"]
        ),
        .executableTarget(
            name: "raw-httpd",
            dependencies: ["CLibevent"]
        ),

        // The tests' per-thread count of allocation calls (malloc and its kin, in place of glibc's).
        .target(
            name: "AllocationCounter",
            path: "Tests/AllocationCounter"
        ),
        // An epoll loop the tests drive a RunLoopKit loop from (Loop.backendDescriptor).
        .target(
            name: "OuterLoops",
            path: "Tests/OuterLoops"
        ),
        .testTarget(
            name: "RunLoopKitTests",
            dependencies: [
                "RunLoopKit", "runloop-mainqueue-probe", "runloop-demo", "AllocationCounter", "OuterLoops",
            ] + examples.map { .target(name: "example-\($0)") }
        ),
        .testTarget(
            name: "HTTPDTests",
            dependencies: ["HTTPCore", "runloop-httpd"]
        ),
    ]
        + examples.map {
            .executableTarget(name: "example-\($0)", dependencies: ["RunLoopKit"], path: "Examples/\($0)")
        },
    swiftLanguageModes: [.v6]
)
