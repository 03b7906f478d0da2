import Foundation
import Testing

@testable import RunLoopKit

/// Frame links: callouts on a fixed grid, missed frames skipped (never bunched), pause and resume,
/// rate changes, and `.common` during `.tracking`.
@Suite struct FrameLinkTests {
    typealias Instant = ContinuousClock.Instant

    /// One callout as the handler saw it.
    struct Frame: Sendable {
        var timestamp: Instant
        var target: Instant
        var calledAt: Instant
        var mode: Loop.Mode?
    }

    /// Slack for "the callout happened before the next frame began": the link checks the clock just
    /// before calling out, the handler reads it a moment later, and on a loaded machine the thread
    /// may be preempted in between. Under a frame (16.7 ms), so a callout a whole frame late fails.
    static let slack = Duration.milliseconds(12)

    /// Whether `instant` is `origin + k × frame` for a whole k ≥ 0 (exactly: the grid is integer
    /// arithmetic on attoseconds).
    static func onGrid(_ instant: Instant, origin: Instant, frame: Duration) -> Bool {
        let k = Int(((instant - origin) / frame).rounded())
        return k >= 0 && origin + frame * k == instant
    }

    /// Every frame is on the grid, called out within its own frame, and after the previous one.
    static func expectWellFormed(_ frames: [Frame], origin: Instant, frame: Duration) {
        for (index, entry) in frames.enumerated() {
            #expect(onGrid(entry.timestamp, origin: origin, frame: frame), "frame \(index) is off the grid")
            #expect(entry.target == entry.timestamp + frame)
            #expect(entry.calledAt >= entry.timestamp, "frame \(index) was called out early")
            #expect(entry.calledAt < entry.target + slack, "frame \(index) was called out after its frame ended")
            if index > 0 {
                #expect(
                    entry.timestamp >= frames[index - 1].timestamp + frame,
                    "frames \(index - 1) and \(index) share a frame")
            }
        }
    }

    // MARK: The grid

    @Test func framesStartOneFrameAfterAddAndStayOnTheGrid() {
        let frame = Duration.seconds(1) / 60
        let (origin, frames, duration) = onFreshThread {
            let loop = Loop.current
            var frames: [Frame] = []
            let link = FrameLink(
                loop.isolated { link in
                    frames.append(Frame(timestamp: link.timestamp, target: link.targetTimestamp, calledAt: .now))
                    if frames.count == 10 { link.invalidate() }
                })
            link.add(to: loop, forMode: .default)
            let origin = link.timestamp
            loop.run(mode: .default, for: .seconds(5))
            return (origin, frames, link.frameDuration)
        }
        #expect(duration == frame)
        #expect(frames.count == 10)
        // The first frame one frame after the add; on a loaded machine that one may be missed, and
        // the first callout is then on a later grid point (never between two).
        if let first = frames.first?.timestamp {
            let offset = first - origin
            #expect(offset >= frame)
            #expect(offset == frame * Int(((offset / frame).rounded())), "first frame \(offset) after the add")
        }
        Self.expectWellFormed(frames, origin: origin, frame: frame)
    }

    @Test func aHandlerStallingTwoAndAHalfFramesSkipsToTheNextGridPoint() {
        let frame = Duration.seconds(1) / 60
        let (origin, frames, result) = onFreshThread {
            let loop = Loop.current
            var frames: [Frame] = []
            let link = FrameLink(
                framesPerSecond: 60,
                loop.isolated { link in
                    frames.append(Frame(timestamp: link.timestamp, target: link.targetTimestamp, calledAt: .now))
                    if frames.count == 4 { usleep(41_667) }  // 2.5 frames
                    if frames.count == 10 { link.invalidate() }
                })
            link.add(to: loop, forMode: .default)
            let origin = link.timestamp
            let result = loop.run(mode: .default, for: .seconds(5))
            return (origin, frames, result)
        }
        #expect(result == .finished)
        #expect(frames.count == 10)
        Self.expectWellFormed(frames, origin: origin, frame: frame)
        guard frames.count == 10 else { return }
        // The stall began at frame 4's callout and lasted 2.5 frames: frames 5 and 6 began during
        // it and are skipped, not called out late; the next callout is a whole frame later, on time.
        let gap = frames[4].timestamp - frames[3].timestamp
        #expect(gap >= frame * 3)
        #expect(gap <= frame * 5)
        #expect(frames[4].calledAt - frames[3].calledAt >= .microseconds(41_667))
    }

    @Test func aLoopBusyElsewhereSkipsFramesInsteadOfBunchingThem() {
        let frame = Duration.seconds(1) / 60
        let (origin, frames, stall) = onFreshThread {
            let loop = Loop.current
            var frames: [Frame] = []
            var stall: (start: Instant, end: Instant)?
            let link = FrameLink(
                framesPerSecond: 60,
                loop.isolated { link in
                    frames.append(Frame(timestamp: link.timestamp, target: link.targetTimestamp, calledAt: .now))
                    if frames.count == 12 { link.invalidate() }
                })
            link.add(to: loop, forMode: .default)
            let origin = link.timestamp
            // Another callout holds the loop for 2.5 frames, starting in the middle of frame 5.
            let busy = LoopTimer(
                fireAt: origin + frame * 5 + frame / 2,
                loop.isolated { _ in
                    let start = ContinuousClock.now
                    usleep(41_667)
                    stall = (start, .now)
                })
            loop.add(busy, forMode: .default)
            loop.run(mode: .default, for: .seconds(5))
            return (origin, frames, stall)
        }
        #expect(frames.count == 12)
        Self.expectWellFormed(frames, origin: origin, frame: frame)
        guard let stall else {
            Issue.record("the busy timer did not run")
            return
        }
        let before = frames.filter { $0.calledAt < stall.start }
        let after = frames.filter { $0.calledAt >= stall.end }
        #expect(before.count + after.count == frames.count, "a frame was called out during the stall")
        guard let last = before.last, let next = after.first else {
            Issue.record("no frames on both sides of the stall")
            return
        }
        // Frames that began during the stall were dropped: the first callout after it is for a frame
        // that began less than a frame before the stall ended, not for the frames it hid.
        #expect(next.timestamp > stall.end - frame)
        #expect(next.timestamp - last.timestamp >= frame * 2)
    }

    // MARK: Pause, rate, modes

    @Test func pausedLinksMakeNoCalloutsAndResumeOnTheOriginalGrid() {
        let frame = Duration.seconds(1) / 60
        let (origin, frames, pause, stillPaused) = onFreshThread {
            let loop = Loop.current
            var frames: [Frame] = []
            var pause: (start: Instant, end: Instant)?
            var stillPaused = false
            let link = FrameLink(
                framesPerSecond: 60,
                loop.isolated { link in
                    frames.append(Frame(timestamp: link.timestamp, target: link.targetTimestamp, calledAt: .now))
                    if frames.count == 3 {
                        link.isPaused = true
                        let pausedAt = ContinuousClock.now
                        // Resume 100 ms (six frames) later, from another callout.
                        let resume = LoopTimer(
                            after: .milliseconds(100),
                            loop.isolated { _ in
                                stillPaused = link.isPaused
                                let resumedAt = ContinuousClock.now
                                link.isPaused = false
                                pause = (pausedAt, resumedAt)
                            })
                        loop.add(resume, forMode: .default)
                    }
                    if frames.count == 6 { link.invalidate() }
                })
            link.add(to: loop, forMode: .default)
            let origin = link.timestamp
            loop.run(mode: .default, for: .seconds(5))
            return (origin, frames, pause, stillPaused)
        }
        #expect(frames.count == 6)
        #expect(stillPaused)
        Self.expectWellFormed(frames, origin: origin, frame: frame)
        guard let pause, frames.count == 6 else {
            Issue.record("the link was not resumed")
            return
        }
        #expect(frames.allSatisfy { $0.calledAt < pause.start || $0.calledAt >= pause.end })
        // The first frame after resuming is the next point of the original grid.
        #expect(frames[3].timestamp > pause.end)
        #expect(frames[3].timestamp <= pause.end + frame + Self.slack)
        #expect(frames[3].timestamp - frames[2].timestamp >= .milliseconds(100))
    }

    @Test func changingTheRateRegridsFromTheCurrentFrame() {
        let (frames, rateAfter, durationAfter, changedAt) = onFreshThread {
            let loop = Loop.current
            var frames: [Frame] = []
            var changedAt: Instant?
            let link = FrameLink(
                framesPerSecond: 60,
                loop.isolated { link in
                    frames.append(Frame(timestamp: link.timestamp, target: link.targetTimestamp, calledAt: .now))
                    if frames.count == 3 {
                        changedAt = link.timestamp
                        link.preferredFramesPerSecond = 120
                    }
                    if frames.count == 10 { link.invalidate() }
                })
            link.add(to: loop, forMode: .default)
            loop.run(mode: .default, for: .seconds(5))
            return (frames, link.preferredFramesPerSecond, link.frameDuration, changedAt)
        }
        let slow = Duration.seconds(1) / 60
        let fast = Duration.seconds(1) / 120
        #expect(rateAfter == 120)
        #expect(durationAfter == fast)
        #expect(frames.count == 10)
        guard let changedAt, frames.count == 10 else { return }
        Self.expectWellFormed(Array(frames[0..<3]), origin: frames[0].timestamp, frame: slow)
        // From the frame that changed the rate on, the grid is that frame plus multiples of 1/120 s.
        Self.expectWellFormed(Array(frames[3...]), origin: changedAt, frame: fast)
        #expect(frames[3].timestamp >= changedAt + fast)
        #expect(frames[3].timestamp <= changedAt + fast * 3)
        let span = frames[9].timestamp - frames[3].timestamp
        #expect(span >= fast * 6)
        #expect(span < slow * 6, "the link still runs at 60 frames a second")
    }

    @Test func aCommonLinkKeepsRunningWhileTheLoopTracks() {
        let (frames, result) = onFreshThread {
            let loop = Loop.current
            var frames: [Frame] = []
            let link = FrameLink(
                framesPerSecond: 120,
                loop.isolated { link in
                    frames.append(
                        Frame(
                            timestamp: link.timestamp, target: link.targetTimestamp, calledAt: .now,
                            mode: Loop.current.currentMode))
                })
            link.add(to: loop, forMode: .common)
            let result = loop.run(mode: .tracking, for: .milliseconds(150))
            link.invalidate()
            return (frames, result)
        }
        #expect(result == .timedOut)
        #expect(frames.count >= 6, "only \(frames.count) frames in 150 ms at 120 fps")
        #expect(frames.allSatisfy { $0.mode == .tracking })
        Self.expectWellFormed(frames, origin: frames.first?.timestamp ?? .now, frame: .seconds(1) / 120)
    }

    @Test func aDefaultOnlyLinkWaitsWhileTheLoopTracks() {
        let (tracking, resumed) = onFreshThread {
            let loop = Loop.current
            var frames = 0
            let link = FrameLink(framesPerSecond: 120, loop.isolated { _ in frames += 1 })
            link.add(to: loop, forMode: .default)
            let keepAlive = LoopSource {}
            loop.add(keepAlive, forMode: .tracking)
            loop.run(mode: .tracking, for: .milliseconds(60))
            let tracking = frames
            loop.run(mode: .default, for: .milliseconds(60))
            link.invalidate()
            keepAlive.invalidate()
            return (tracking, frames)
        }
        #expect(tracking == 0)
        #expect(resumed >= 2)
    }

    @Test func invalidateStopsTheLinkAndEmptiesItsModes() {
        let (frames, valid, result) = onFreshThread {
            let loop = Loop.current
            var frames = 0
            let link = FrameLink(
                loop.isolated { link in
                    frames += 1
                    link.invalidate()
                    link.invalidate()  // idempotent
                })
            link.add(to: loop, forMode: .default)
            let result = loop.run(mode: .default, for: .seconds(2))
            return (frames, link.isValid, result)
        }
        #expect(frames == 1)
        #expect(!valid)
        #expect(result == .finished)
    }
}
