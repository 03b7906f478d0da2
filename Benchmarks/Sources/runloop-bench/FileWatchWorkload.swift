import CRawLibuv
import CRawPeer
import Foundation
import Glibc
import RunLoopKit

// The file-watch workload: events per second from a watched directory, beside libuv's
// uv_fs_event_t (Sources/CRawLibuv/raw_libuv_fswatch.c). Each run watches an empty directory,
// creates its files while the loop does not run (the kernel queues one IN_CREATE per file), then
// times the loop delivering every event to the handler. Fewer files than the kernel queues by
// default (fs.inotify.max_queued_events, 16384), so that none is lost.

/// How many files a run creates, derived from the scheduled-block count (no size field of its own).
struct FileWatchSizes: Sendable {
    var files: Int

    init(_ size: BenchmarkSize) {
        files = min(15_000, max(100, size.scheduledBlocks / 100))
    }
}

extension MetricID {
    static let fileWatchEvents = "filewatch.events"
}

extension Workloads {
    static let fileWatch = Workload(
        number: 18, name: "filewatch", title: "File watching: events delivered per second",
        metrics: [
            Metric(
                id: MetricID.fileWatchEvents, label: "file-watch events per second", unit: "events/s",
                direction: .higherIsBetter,
                notes: [
                    .foundation: "Foundation on Linux has no file watching on its run loop: not measured",
                    .libevent: "libevent has no file watching: not measured",
                    .glib: "not measured (GFileMonitor is GIO's, which the benchmark does not link)",
                ])
        ], curves: [],
        how: [
            .runLoopKit:
                "a `LoopFileWatch` on the directory on a fresh thread's loop, its handler counting the `created` changes of each batch; `run(mode:for:)` until all came",
            .libuv:
                "a `uv_fs_event_t` on the directory (`uv_fs_event_start`), its callback called once per event with the file's name; `uv_run` until all came",
        ],
        runner: .each { implementation, size in
            var sample = Sample()
            let files = FileWatchSizes(size).files
            let seconds: Outcome<Double>
            switch implementation {
            case .runLoopKit:
                seconds = inWatchedDirectory { RunLoopKitFileWatch.run($0, files: files, timeout: size.timeout) }
            case .libuv: seconds = inWatchedDirectory { libuvFileWatch($0, files: files, timeout: size.timeout) }
            case .foundation, .libevent, .glib: seconds = .failure(BenchError(reason: "not measured (see the note)"))
            }
            sample.record(MetricID.fileWatchEvents, seconds.map { Double(files) / $0 })
            return sample
        })

    /// Runs `body` with a new empty directory, removed with its files afterwards.
    private static func inWatchedDirectory(_ body: (String) -> Outcome<Double>) -> Outcome<Double> {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("filewatch-\(UUID().uuidString)").path
        guard (try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)) != nil else {
            return .failure(BenchError(reason: "cannot create \(path)"))
        }
        defer { try? FileManager.default.removeItem(atPath: path) }
        return body(path)
    }

    private static func libuvFileWatch(_ directory: String, files: Int, timeout: Double) -> Outcome<Double> {
        peerOutcome(raw_libuv_file_watch(directory, Int32(files), timeout), of: files)
    }
}

/// The file-watch workload on RunLoopKit, through the public API only.
enum RunLoopKitFileWatch {
    /// Loop-thread-only count, in a class so that the handler and the waiting code share it.
    final class Count: @unchecked Sendable {
        var created = 0
    }

    static func run(_ directory: String, files: Int, timeout: Double) -> Outcome<Double> {
        onFreshThread(timeout: timeout * 2) { () -> Outcome<Double> in
            let loop = Loop.current
            let count = Count()
            let watch: LoopFileWatch
            do {
                watch = try LoopFileWatch(path: directory) { _, changes in
                    for change in changes where change.kind == .created { count.created += 1 }
                }
            } catch {
                return .failure(BenchError(reason: "LoopFileWatch: \(error)"))
            }
            loop.add(watch, forMode: .default)
            // The loop's first run sets its backend up (libuv's loop is made before its clock starts too).
            loop.run(mode: .default, for: .zero)
            for index in 0..<files {
                let made = open("\(directory)/\(index)", O_CREAT | O_WRONLY | O_CLOEXEC, 0o600)
                if made >= 0 { close(made) }
            }
            let start = ContinuousClock.now
            let deadline = start + .seconds(timeout)
            while count.created < files && ContinuousClock.now < deadline {
                loop.run(mode: .default, for: .seconds(1), returnAfterSourceHandled: true)
            }
            let elapsed = ContinuousClock.now - start
            watch.invalidate()
            guard count.created == files else {
                return .failure(BenchError(reason: "timed out; \(count.created) of \(files) events"))
            }
            return .success(Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
        } ?? .failure(.timedOut)
    }
}
