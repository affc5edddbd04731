import Dispatch

/// Runs `work` in a task and blocks the calling thread until it is done. For the synchronous
/// `run()` of a subcommand on the main thread, which belongs to no executor of Swift
/// concurrency, so the task runs on the cooperative pool and the wait cannot starve it. Never
/// call it from a task.
func waitForTask<T: Sendable>(_ work: @escaping @Sendable () async throws -> T) throws -> T {
    let done = DispatchSemaphore(value: 0)
    let outcome = Outcome<T>()
    Task.detached {
        do {
            outcome.result = .success(try await work())
        } catch {
            outcome.result = .failure(error)
        }
        done.signal()
    }
    done.wait()
    // The semaphore orders the task's write before this read.
    return try outcome.result!.get()
}

/// Written once by the task, read once after the semaphore: never at the same time.
private final class Outcome<T: Sendable>: @unchecked Sendable {
    var result: Result<T, any Error>?
}
