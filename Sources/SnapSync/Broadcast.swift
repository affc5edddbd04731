import NIOConcurrencyHelpers

/// A stream source with any number of consumers, each of which gets every element published
/// after it subscribed: one `AsyncStream` per subscription. (A single `AsyncStream` shared by
/// two `for await` loops hands each element to one of them only.)
///
/// `State` is kept under the same lock as the subscribers, so that a subscription can start with
/// an element made from the state (a replica's current snapshot) and then get exactly the
/// elements published after that state: none missed, none twice.
///
/// - Complexity: `publish` is O(subscribers); `subscribe` and a consumer's end are O(1) expected.
final class Broadcast<State: Sendable, Element: Sendable>: Sendable {
    private struct Shared: Sendable {
        var state: State
        var subscribers: [UInt64: AsyncStream<Element>.Continuation] = [:]
        var nextID: UInt64 = 0
        var finished = false
    }
    private let shared: NIOLockedValueBox<Shared>
    private let bufferingPolicy: AsyncStream<Element>.Continuation.BufferingPolicy

    init(_ state: State, bufferingPolicy: AsyncStream<Element>.Continuation.BufferingPolicy = .unbounded) {
        shared = NIOLockedValueBox(Shared(state: state))
        self.bufferingPolicy = bufferingPolicy
    }

    /// The state, read under the lock.
    func read<R>(_ body: (State) throws -> R) rethrows -> R {
        try shared.withLockedValue { try body($0.state) }
    }

    /// A new stream: `first(state)` if not nil, then every element published from now on. A
    /// stream made after `finish()` finishes at once.
    func subscribe(startingWith first: (State) -> Element? = { _ in nil }) -> AsyncStream<Element> {
        let (stream, continuation) = AsyncStream.makeStream(of: Element.self, bufferingPolicy: bufferingPolicy)
        let id: UInt64? = shared.withLockedValue { shared in
            guard !shared.finished else { return nil }
            if let element = first(shared.state) { continuation.yield(element) }
            shared.nextID += 1
            shared.subscribers[shared.nextID] = continuation
            return shared.nextID
        }
        guard let id else {
            continuation.finish()
            return stream
        }
        // Runs when the consumer stops (its task is cancelled, the stream is dropped) or after
        // `finish()`; never with the lock held, since `finish()` ends streams after unlocking.
        continuation.onTermination = { [weak self] _ in
            _ = self?.shared.withLockedValue { $0.subscribers.removeValue(forKey: id) }
        }
        return stream
    }

    /// Updates the state and delivers `element` to every subscriber, atomically with respect to
    /// `subscribe`.
    func publish(_ element: Element, updating update: (inout State) -> Void = { _ in }) {
        shared.withLockedValue { shared in
            update(&shared.state)
            for continuation in shared.subscribers.values { continuation.yield(element) }
        }
    }

    /// Updates the state and delivers the element the update returns (if any), atomically with
    /// respect to `subscribe`: for elements that depend on the state they replace.
    func publish(computing update: (inout State) -> Element?) {
        shared.withLockedValue { shared in
            guard let element = update(&shared.state) else { return }
            for continuation in shared.subscribers.values { continuation.yield(element) }
        }
    }

    /// Delivers `element` to every subscriber.
    func yield(_ element: Element) {
        publish(element)
    }

    /// Ends every stream, and those made later. Idempotent.
    func finish() {
        let ended = shared.withLockedValue { shared in
            shared.finished = true
            defer { shared.subscribers = [:] }
            return Array(shared.subscribers.values)
        }
        for continuation in ended { continuation.finish() }
    }
}
