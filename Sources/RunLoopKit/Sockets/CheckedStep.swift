/// A state whose steps are checked against its transition table in debug builds.
protocol CheckedStep: Equatable {
    /// Whether the table allows the step from `from` to `next`.
    static func mayChange(_ from: Self, to next: Self) -> Bool
    /// What the state is, in the check's message ("a datagram socket's send side").
    static var checkedName: String { get }
}

extension CheckedStep {
    /// Moves to `next`, a step the table allows (checked in debug builds).
    mutating func become(_ next: Self) {
        assert(Self.mayChange(self, to: next), "RunLoopKit: \(Self.checkedName) may not go from \(self) to \(next)")
        self = next
    }
}
