import RunLoopKit
import Synchronization
@_spi(ExperimentalCustomExecutors) import _Concurrency

/// Opt-in: makes `Loop.main` the program's main executor, so `@MainActor` jobs are queued straight
/// onto the main loop (no detour through `DispatchQueue.main`).
///
/// Built on Swift 6.3's custom-executor hooks (`MainExecutor`, `ExecutorFactory`,
/// `_createExecutors`), which are still behind `@_spi(ExperimentalCustomExecutors)`; this module
/// confines that to itself. The default (global) executor stays the platform's.
public enum LoopMainExecutor {
    private static let installed = Atomic<Bool>(false)

    /// Installs `Loop.main` as the main executor. Call it first thing in a synchronous `main()`,
    /// on the main thread, before any task exists; then run `Loop.main` (for example `run()`).
    ///
    /// Main thread only. Calling it again does nothing.
    public static func install() {
        precondition(
            Loop.current === Loop.main, "RunLoopKit: LoopMainExecutor.install() must be called on the main thread")
        guard !installed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        _createExecutors(factory: Factory.self)
    }
}

/// `Loop.main` seen as a `MainExecutor`. A wrapper, because a public class cannot conform publicly
/// to an SPI protocol.
final class MainLoopExecutor: MainExecutor, @unchecked Sendable {
    let loop = Loop.main

    func enqueue(_ job: consuming ExecutorJob) { loop.enqueue(job) }
    func run() throws { loop.run() }
    func stop() { loop.stop() }
    func checkIsolated() { loop.checkIsolated() }
    func isIsolatingCurrentContext() -> Bool? { loop.isIsolatingCurrentContext() }
}

struct Factory: ExecutorFactory {
    static let mainExecutor: any MainExecutor = MainLoopExecutor()
    static var defaultExecutor: any TaskExecutor { PlatformExecutorFactory.defaultExecutor }
}
