// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "RunLoopKit",
    products: [
        .library(name: "RunLoopKit", targets: ["RunLoopKit"]),
        .library(name: "RunLoopKitMainExecutor", targets: ["RunLoopKitMainExecutor"]),
        .executable(name: "runloop-demo", targets: ["runloop-demo"]),
        .executable(name: "runloop-bench", targets: ["runloop-bench"]),
        .executable(name: "runloop-httpd", targets: ["runloop-httpd"]),
    ],
    targets: [
        // libevent 2.1 from Debian's libevent-dev; only the backend file of RunLoopKit imports it.
        .systemLibrary(
            name: "CLibevent",
            path: "Modulemaps/CLibevent",
            pkgConfig: "libevent_core",
            providers: [.apt(["libevent-dev"])]
        ),
        // The Linux calls beyond libevent (eventfd, timerfd, signal routing, pidfds, accept4, the
        // main-queue hooks), wrapped once; only Platform/Platform.swift of RunLoopKit imports it.
        .target(name: "CPlatform"),
        // OpenSSL 3 from Debian's libssl-dev; only TLS/OpenSSL.swift of RunLoopKit imports it.
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

        // Benchmark: RunLoopKit side by side with Foundation's RunLoop, and raw libevent, libuv and GLib in C.
        // libuv and GLib from Debian's libuv1-dev and libglib2.0-dev: the benchmark's other C peers.
        .systemLibrary(
            name: "CLibuv",
            path: "Modulemaps/CLibuv",
            pkgConfig: "libuv",
            providers: [.apt(["libuv1-dev"])]
        ),
        .systemLibrary(
            name: "CGLib",
            path: "Modulemaps/CGLib",
            pkgConfig: "glib-2.0",
            providers: [.apt(["libglib2.0-dev"])]
        ),
        // What the C peers share: results, the function table, the post and ping-pong workloads.
        .target(name: "CRawPeer"),
        .target(
            name: "CRawLibevent",
            dependencies: ["CLibevent", "CRawPeer"]
        ),
        .target(
            name: "CRawLibuv",
            dependencies: ["CLibuv", "CRawPeer"]
        ),
        .target(
            name: "CRawGLib",
            dependencies: ["CGLib", "CRawPeer"]
        ),
        .executableTarget(
            name: "runloop-bench",
            dependencies: ["RunLoopKit", "CRawPeer", "CRawLibevent", "CRawLibuv", "CRawGLib"]
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

        .testTarget(
            name: "RunLoopKitTests",
            dependencies: ["RunLoopKit", "runloop-mainqueue-probe"]
        ),
        .testTarget(
            name: "BenchTests",
            dependencies: ["runloop-bench"]
        ),
        .testTarget(
            name: "HTTPDTests",
            dependencies: ["HTTPCore", "runloop-httpd"]
        ),
    ],
    swiftLanguageModes: [.v6]
)
