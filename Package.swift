// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "RunLoopKit",
    products: [
        .library(name: "RunLoopKit", targets: ["RunLoopKit"]),
        .executable(name: "runloop-demo", targets: ["runloop-demo"]),
    ],
    targets: [
        // libevent 2.1 from Debian's libevent-dev; only the backend file of RunLoopKit imports it.
        .systemLibrary(
            name: "CLibevent",
            path: "Modulemaps/CLibevent",
            pkgConfig: "libevent_core",
            providers: [.apt(["libevent-dev"])]
        ),
        .target(
            name: "RunLoopKit",
            dependencies: ["CLibevent"]
        ),
        .executableTarget(
            name: "runloop-demo",
            dependencies: ["RunLoopKit"]
        ),
        .testTarget(
            name: "RunLoopKitTests",
            dependencies: ["RunLoopKit"]
        ),
    ],
    swiftLanguageModes: [.v6]
)
