/// Records what loops do — phases, waits in the kernel and every callout — into a fixed-size ring
/// buffer, and exports it as a Chrome trace (for Perfetto or `chrome://tracing`) or as an SVG
/// timeline.
///
/// ```swift
/// let tracer = LoopTracer(capacity: 10_000)
/// Loop.current.attach(tracer)
/// worker.loop.attach(tracer)            // one tracer may watch several loops: one lane each
/// // ... run ...
/// let json = tracer.chromeTraceJSON()   // open in https://ui.perfetto.dev
/// let svg = tracer.svgTimeline(width: 1200)
/// ```
///
/// The buffer is allocated once, by `init`: recording never allocates, except the first time the
/// tracer sees a loop (to note its thread's id and name) or a mode, and when the buffer is full it
/// overwrites the oldest events. Each event costs one lock, shared by the loops it watches.
///
/// Thread rules: `LoopTracer` is `Sendable`. Attach it with `loop.attach(_:)` and detach it with
/// `loop.detach(_:)` from any thread; `events`, `count`, `overwritten`, `clear()` and the exports
/// may be used from any thread, also while loops are running (they see a consistent snapshot).
public final class LoopTracer: LoopInstrument, @unchecked Sendable {
    /// One recorded event.
    ///
    /// A value; `Sendable`.
    public struct Event: Sendable, Equatable {
        /// What happened.
        public enum Kind: Sendable, Equatable {
            /// The loop slept in the kernel for `duration`.
            case waiting
            /// A callout of this kind ran for `duration`.
            case callout(LoopCalloutKind)
            /// The loop reached a phase observers are told about (an instant: `duration` is zero).
            case phase(Loop.Activity)
        }

        /// What happened.
        public var kind: Kind
        /// When it started.
        public var start: ContinuousClock.Instant
        /// How long it lasted (zero for phases).
        public var duration: Duration
        /// The kernel id of the loop's thread (its lane).
        public var threadID: Int
        /// The name of the loop's thread.
        public var threadName: String
        /// The mode the loop was running (nil if not known yet, e.g. attached mid-run).
        public var mode: Loop.Mode?
        /// For callouts, how many callouts enclose this one (nested runs); 0 otherwise.
        public var depth: Int
        /// For blocks, jobs and port messages posted while the tracer was attached: how long they
        /// waited in the loop's queue.
        public var queueDelay: Duration?
    }

    /// The number of events the buffer holds; older events are overwritten.
    ///
    /// Any thread.
    public let capacity: Int

    /// Exported times count from here.
    let createdAt = ContinuousClock.now

    enum RecordType: UInt8 {
        case waiting, callout, phase
    }

    /// One event in the ring: plain data, so that writing it never allocates.
    struct Record {
        var start: Ticks = 0
        var duration: Ticks = 0
        var queueDelay: Ticks = -1
        var lane: UInt16 = 0
        var mode: UInt16 = .max
        var type: RecordType = .phase
        var detail: UInt8 = 0
        var depth: UInt8 = 0
    }

    /// A loop the tracer has seen: its thread and its open callouts.
    struct Lane {
        /// The loop's `serial`, which (unlike its address) no later loop has.
        var loop: UInt64
        var threadID: Int
        var threadName: String
        var isMain: Bool
        var waitStart: Ticks = 0
        var mode: UInt16 = .max
        var pendingDelay: Ticks = -1
        var depth = 0
        var calloutStarts: InlineArray<32, Ticks> = .init(repeating: 0)
        var calloutDelays: InlineArray<32, Ticks> = .init(repeating: -1)
    }

    struct Storage {
        var records: [Record]
        /// Where the next record goes.
        var next = 0
        /// Records held (at most the capacity).
        var count = 0
        /// Records ever written.
        var written = 0
        var lanes: [Lane] = []
        /// `lanes[i].loop`, apart: a lane is found without copying one (a lane holds a string
        /// and two 32-slot arrays, and the copy cost the tracer a quarter of its hooks' time).
        var laneLoops: [UInt64] = []
        var modes: [Loop.Mode] = []

        /// The records held, oldest first.
        var ordered: [Record] {
            if count < records.count { return Array(records[0..<count]) }
            return Array(records[next...] + records[..<next])
        }
    }

    let storage: Locked<Storage>

    /// Creates a tracer holding the last `capacity` events (a programmer error if not positive).
    ///
    /// Any thread. The buffer is allocated here: about 40 bytes per event.
    public init(capacity: Int) {
        precondition(capacity > 0, "RunLoopKit: a LoopTracer needs a positive capacity, not \(capacity)")
        self.capacity = capacity
        storage = Locked(Storage(records: Array(repeating: Record(), count: capacity)))
    }

    /// The events held, oldest first (by the time they were recorded: a callout is recorded when
    /// it ends, so a callout that ran a nested loop comes after the events of that nested run).
    ///
    /// Any thread.
    public var events: [Event] {
        let (records, lanes, modes) = storage.withLock { ($0.ordered, $0.lanes, $0.modes) }
        return records.map { record in
            let lane = lanes[Int(record.lane)]
            let kind: Event.Kind =
                switch record.type {
                case .waiting: .waiting
                case .callout: .callout(LoopCalloutKind(rawValue: Int(record.detail)) ?? .block)
                case .phase: .phase(Loop.Activity(rawValue: 1 << UInt32(record.detail)))
                }
            return Event(
                kind: kind, start: TickClock.instant(record.start), duration: .nanoseconds(record.duration),
                threadID: lane.threadID, threadName: lane.threadName,
                mode: record.mode == .max ? nil : modes[Int(record.mode)], depth: Int(record.depth),
                queueDelay: record.queueDelay < 0 ? nil : .nanoseconds(record.queueDelay))
        }
    }

    /// The number of events held (at most `capacity`).
    ///
    /// Any thread.
    public var count: Int { storage.withLock { $0.count } }

    /// The number of events overwritten because the buffer was full.
    ///
    /// Any thread.
    public var overwritten: Int { storage.withLock { $0.written - $0.count } }

    /// Forgets the events recorded so far (the loops' lanes and open callouts are kept).
    ///
    /// Any thread.
    public func clear() {
        storage.withLock { storage in
            storage.next = 0
            storage.count = 0
            storage.written = 0
        }
    }

    // MARK: LoopInstrument

    /// Loop thread (instrument hook): records a phase.
    public func loopDidReach(
        _ loop: Loop, _ activity: Loop.Activity, mode: Loop.Mode, at time: ContinuousClock.Instant
    ) {
        let now = TickClock.ticks(time)
        storage.withLock { storage in
            let lane = storage.lane(of: loop)
            let modeIndex = storage.index(of: mode)
            storage.lanes[lane].mode = modeIndex
            storage.append(
                Record(
                    start: now, lane: UInt16(lane), mode: modeIndex, type: .phase,
                    detail: UInt8(activity.rawValue.trailingZeroBitCount)))
        }
    }

    /// Loop thread (instrument hook): notes when a sleep starts.
    public func loopWillWait(_ loop: Loop, at time: ContinuousClock.Instant) {
        let now = TickClock.ticks(time)
        storage.withLock { storage in
            let lane = storage.lane(of: loop)
            storage.lanes[lane].waitStart = now
        }
    }

    /// Loop thread (instrument hook): records a sleep.
    public func loopDidWait(_ loop: Loop, at time: ContinuousClock.Instant) {
        let now = TickClock.ticks(time)
        storage.withLock { storage in
            let lane = storage.lane(of: loop)
            let start = storage.lanes[lane].waitStart
            guard start != 0 else { return }
            storage.lanes[lane].waitStart = 0
            storage.append(
                Record(
                    start: start, duration: now - start, lane: UInt16(lane), mode: storage.lanes[lane].mode,
                    type: .waiting))
        }
    }

    /// Loop thread (instrument hook): keeps the queue delay for the callout that follows.
    public func loopDidDequeue(_ loop: Loop, _ kind: LoopCalloutKind, queueDelay: Duration) {
        let delay = queueDelay.saturatingNanoseconds
        storage.withLock { storage in
            let lane = storage.lane(of: loop)
            storage.lanes[lane].pendingDelay = delay
        }
    }

    /// Loop thread (instrument hook): notes when a callout starts.
    public func loopWillCallOut(_ loop: Loop, _ kind: LoopCalloutKind, at time: ContinuousClock.Instant) {
        let now = TickClock.ticks(time)
        storage.withLock { storage in
            let lane = storage.lane(of: loop)
            let depth = storage.lanes[lane].depth
            if depth < storage.lanes[lane].calloutStarts.count {
                storage.lanes[lane].calloutStarts[depth] = now
                storage.lanes[lane].calloutDelays[depth] = storage.lanes[lane].pendingDelay
            }
            storage.lanes[lane].pendingDelay = -1
            storage.lanes[lane].depth = depth + 1
        }
    }

    /// Loop thread (instrument hook): records a callout.
    public func loopDidCallOut(_ loop: Loop, _ kind: LoopCalloutKind, at time: ContinuousClock.Instant) {
        let now = TickClock.ticks(time)
        storage.withLock { storage in
            let lane = storage.lane(of: loop)
            // A callout that began before the tracer was attached has no start: skip it.
            guard storage.lanes[lane].depth > 0 else { return }
            let depth = storage.lanes[lane].depth - 1
            storage.lanes[lane].depth = depth
            guard depth < storage.lanes[lane].calloutStarts.count else { return }
            let start = storage.lanes[lane].calloutStarts[depth]
            storage.append(
                Record(
                    start: start, duration: now - start, queueDelay: storage.lanes[lane].calloutDelays[depth],
                    lane: UInt16(lane), mode: storage.lanes[lane].mode, type: .callout, detail: UInt8(kind.rawValue),
                    depth: UInt8(min(depth, 255))))
        }
    }
}

extension LoopTracer.Storage {
    /// The lane of `loop`, created the first time (on the loop's thread: it notes that thread).
    mutating func lane(of loop: Loop) -> Int {
        let serial = loop.serial
        for index in laneLoops.indices where laneLoops[index] == serial {
            return index
        }
        let thread = LoopTracer.currentThread()
        laneLoops.append(serial)
        lanes.append(
            LoopTracer.Lane(
                loop: serial, threadID: thread.id ?? lanes.count + 1,
                threadName: thread.name ?? "loop \(lanes.count + 1)", isMain: loop.isMainLoop))
        return lanes.count - 1
    }

    /// The index of `mode` in the mode table, added the first time it is seen.
    mutating func index(of mode: Loop.Mode) -> UInt16 {
        for index in modes.indices where modes[index] == mode {
            return UInt16(index)
        }
        guard modes.count < Int(UInt16.max) else { return .max }
        modes.append(mode)
        return UInt16(modes.count - 1)
    }

    mutating func append(_ record: LoopTracer.Record) {
        records[next] = record
        next = next + 1 == records.count ? 0 : next + 1
        count = min(count + 1, records.count)
        written += 1
    }
}

extension LoopTracer {
    /// The calling thread's kernel id and name, from `/proc/thread-self` (nil where unavailable).
    static func currentThread() -> (id: Int?, name: String?) {
        // "<pid>/task/<tid>"
        let link = try? Platform.linkTarget("/proc/thread-self").get()
        let id = link?.split(separator: "/").last.flatMap { Int($0) }
        return (id, procText("/proc/thread-self/comm"))
    }

    /// The text of a short /proc file such as a `comm`, without its final newline; nil if it
    /// cannot be read or is empty.
    static func procText(_ path: String) -> String? {
        guard let bytes = try? Platform.readShortFile(path, limit: 64).get() else { return nil }
        var text = String(decoding: bytes, as: UTF8.self)
        while text.last == "\n" { text.removeLast() }
        return text.isEmpty ? nil : text
    }
}
