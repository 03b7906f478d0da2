// swift-tools-version:6.0
import PackageDescription

// The benchmark: RunLoopKit side by side with Foundation's RunLoop, and raw libevent, libuv and
// GLib in C; and the tests of a RunLoopKit loop inside GLib's main loop. A package of its own so
// that RunLoopKit's users are never asked for libuv or GLib.
let package = Package(
    name: "RunLoopKitBenchmarks",
    products: [
        .executable(name: "runloop-bench", targets: ["runloop-bench"])
    ],
    dependencies: [
        .package(name: "RunLoopKit", path: "..")
    ],
    targets: [
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
        // Includes <event2/event.h> as any C program does: the root package keeps its module map
        // of libevent internal (a product of it would be one more thing RunLoopKit's users see).
        // libevent-dev is installed for RunLoopKit anyway.
        .target(
            name: "CRawLibevent",
            dependencies: ["CRawPeer"],
            linkerSettings: [.linkedLibrary("event_core")]
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
            dependencies: [
                .product(name: "RunLoopKit", package: "RunLoopKit"),
                "CRawPeer", "CRawLibevent", "CRawLibuv", "CRawGLib",
            ]
        ),
        .testTarget(
            name: "BenchTests",
            dependencies: ["runloop-bench"]
        ),
        // GLib's main loop driving a RunLoopKit loop, as a GTK program would: GLib is a test-only
        // dependency here, beside the benchmark's, never RunLoopKit's.
        .target(
            name: "CGLibDriver",
            dependencies: ["CGLib"]
        ),
        .testTarget(
            name: "GLibEmbeddingTests",
            dependencies: [.product(name: "RunLoopKit", package: "RunLoopKit"), "CGLibDriver"]
        ),
    ],
    swiftLanguageModes: [.v6]
)
