/// Where the hub hands work that must not hold its loop up (the folds of large rooms,
/// Hub+FoldedCatchup.swift): the daemon gives its `LoopWorker` (SnapSyncLoop), which runs the
/// work on another thread and the completion on the loop's; the hub's tests give one they run
/// step by step. Without one the hub does such work on the loop, bounded.
package protocol OffLoopWorker: AnyObject {
    /// Runs `work` off the loop, then `done` with its result on the loop's thread, at a later
    /// pass (never inside this call).
    func perform<Result: Sendable>(_ work: @escaping @Sendable () -> Result, then done: @escaping (Result) -> Void)
}
