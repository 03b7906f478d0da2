import Synchronization

// Spinning before sleeping.
//
// A sleep in the kernel is cheap for the sleeper and expensive for whoever ends it: the eventfd
// write is a system call, and waking a thread whose processor has gone idle costs microseconds
// on bare metal and tens of microseconds on a virtual machine (the hypervisor must wake a halted
// vCPU). A loop whose waits keep ending within microseconds (two loops trading requests and
// replies, an executor hopping between actors) pays that on every exchange. Such a loop first
// polls for work in user space for at most `spinLimit`, and only then sleeps.
//
// The protocol is the inbox's (`Core/Inbox.swift`): the loop marks the inbox `spinning` only if
// nothing is posted and no wake-up is pending. A wake-up (a post, a signal, a port message, stop,
// wakeUp) that finds it spinning stores a kick instead of writing the eventfd and leaves no
// wake-up pending. The loop ends the spin under the lock before it sleeps, so a wake-up after
// that writes the eventfd as usual: nothing is ever slept on.
//
// The loop spins only when its recent waits were short and ended by another thread (an idle
// loop, whose waits are long, never spins and keeps its zero CPU and zero wake-ups; nor does one
// woken by its own timers, which it knows in advance), when it watches no descriptor (their
// readiness is known to the kernel only), and never past its next timer or the run's deadline.
// A spin that fails backs off: one that runs its whole limit for nothing (the work comes later,
// or the thread that would send it is not getting a processor), and one that finds it was
// descheduled (the clock jumps between two polls: on a machine with more runnable threads than
// cores, a spinning loop that loses its processor sees the spin flag only when it is scheduled
// again, a scheduler tick later, where a loop asleep in the kernel is woken at once). After
// either, the loop does not spin for a number of waits that doubles with each failed spin (up to
// 1,024) and halves with each spin that was woken.

extension Loop {
    /// Default `spinLimit`: a little more than a vCPU wake-up on a virtual machine.
    static let defaultSpinLimitNanoseconds: Int64 = 50_000

    /// The loop spins only while its recent waits average less than this many times `spinLimit`.
    static let spinWhileWaitsUnder: Int64 = 4

    /// A gap between two polls of a spin longer than this (ticks) means the loop was descheduled.
    static let spinPreemptionGap: Ticks = 200_000

    /// The most waits a failed spin keeps the loop from spinning.
    static let spinBackoffLimit = 1_024

    /// How long the loop may poll for cross-thread work in user space before it sleeps in the
    /// kernel, when its recent waits were short; `.zero` turns spinning off. Default 50 µs.
    ///
    /// Any thread; read before each sleep. The loop spins only while its recent waits average
    /// under four times this, a wait ended by a timer or a deadline counting as a long one (so an
    /// idle loop, or one driven by its timers, never spins); only while it watches no descriptor;
    /// never past its next timer or the run's deadline; and, after a spin that ran out or during
    /// which it lost its processor to another thread, not for a while (a number of waits that
    /// doubles with each such spin, up to 1,024, and halves with each spin that was woken: a loop
    /// whose work keeps coming just too late, or whose peers get no processor, spins rarely).
    /// While it spins, posts, signals, port messages, `stop()` and `wakeUp()` reach it without a
    /// system call on either side. The time counts as waiting: it lies between the
    /// `beforeWaiting` and `afterWaiting` observers, and in ``metrics`` it is waiting, not busy.
    /// A limit beyond one second is a programmer error.
    public var spinLimit: Duration {
        get { .nanoseconds(spinLimitNanoseconds.load(ordering: .relaxed)) }
        set {
            precondition(
                newValue >= .zero && newValue <= .seconds(1),
                "RunLoopKit: spinLimit must be between zero and one second (it is a busy wait), not \(newValue)")
            spinLimitNanoseconds.store(newValue.saturatingNanoseconds, ordering: .relaxed)
        }
    }

    /// Whether the loop may spin before this sleep at all: a limit is set and no descriptor is
    /// watched (their readiness is known to the kernel only). Waits are timed only then, so a
    /// server loop pays nothing for spinning. Loop thread only.
    func maySpin(_ backend: LibeventBackend) -> Bool {
        spinLimitNanoseconds.load(ordering: .relaxed) > 0 && !backend.hasPollableEvents
    }

    /// Polls for a wake-up until `wake` or the spin limit, if recent waits say it is worth it
    /// (the caller checked `maySpin`). Loop thread only.
    func spinBeforeSleeping(until wake: Ticks?, startedAt start: Ticks) -> SpinOutcome {
        let limit = spinLimitNanoseconds.load(ordering: .relaxed)
        guard limit > 0, onThread.spin.averageWait < limit * Loop.spinWhileWaitsUnder else { return .sleep }
        if onThread.spin.backoff > 0 {
            onThread.spin.backoff -= 1
            return .sleep
        }
        var end = start + limit
        var endsAtWake = false
        if let wake, wake <= end {
            end = wake
            endsAtWake = true
        }
        // Only from a quiet inbox: a pending wake-up has its eventfd write, which the sleep takes.
        guard inbox.beginSpin() else { return .sleep }
        onThread.spin.started += 1
        var now = start
        var descheduled = false
        while now < end {
            if inbox.wasKicked { break }
            Platform.cpuRelax()
            let previous = now
            now = TickClock.now
            if now - previous > Loop.spinPreemptionGap {
                descheduled = true
                break
            }
        }
        inbox.endSpin()
        // A kick stored before the unlock is visible here (it was stored under the lock).
        if inbox.wasKicked {
            onThread.spin.backoffLength /= 2
            return .woken
        }
        if endsAtWake && now >= end && !descheduled { return .wakeTimeCame }
        // Spun for nothing, or descheduled: sleep in the kernel for a while (see the top).
        onThread.spin.backoffLength = min(max(1, onThread.spin.backoffLength * 2), Loop.spinBackoffLimit)
        onThread.spin.backoff = onThread.spin.backoffLength
        return .expired
    }

    /// Folds one wait (spin and sleep) into the running average the spin decision reads; `woken`:
    /// another thread ended it. A wait ended by a timer or a deadline counts as a long one: the
    /// loop knew when it would end, and spinning towards it is only burnt CPU (a loop driven by a
    /// fast timer alone must not spin). Loop thread only.
    func recordWait(from start: Ticks, to end: Ticks, woken: Bool) {
        let longWait = spinLimitNanoseconds.load(ordering: .relaxed) * Loop.spinWhileWaitsUnder
        let waited = woken ? max(0, end - start) : max(end - start, longWait)
        // The first wait is the whole history: a loop that starts idle stops spinning at once.
        onThread.spin.averageWait =
            onThread.spin.averageWait < 0
            ? waited : onThread.spin.averageWait + (waited - onThread.spin.averageWait) / 4
    }
}

/// How a spin before sleeping ended.
enum SpinOutcome {
    /// The loop did not spin: it sleeps in the kernel now.
    case sleep
    /// The loop spun its whole limit for nothing: it sleeps in the kernel now.
    case expired
    /// A wake-up came: the loop does not sleep.
    case woken
    /// The wake-up time (a timer, the run's deadline) came first: the loop does not sleep.
    case wakeTimeCame
}
