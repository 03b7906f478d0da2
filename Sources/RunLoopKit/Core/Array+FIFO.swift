extension Array {
    /// A first-in, first-out queue over an array and the index of its first element: takes
    /// `self[head]` and advances `head`. Taken elements are dropped in bulk (when the queue
    /// empties, or when they are half of the array), so each take is amortised O(1).
    mutating func takeFirst(head: inout Int) -> Element? {
        guard head < count else { return nil }
        let first = self[head]
        dropTaken(head: &head)
        return first
    }

    private mutating func dropTaken(head: inout Int) {
        head += 1
        if head == count {
            removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 64 && head * 2 >= count {
            removeFirst(head)
            head = 0
        }
    }
}
