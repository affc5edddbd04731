#if canImport(Observation)
    public import Observation

    /// A room's presence for SwiftUI: an `@Observable` object on the main actor that follows a
    /// `RoomReplica`'s `presence` stream (which it starts watching), so a view that reads
    /// `members` or `count` redraws when someone joins, leaves or sets a state.
    ///
    /// ```swift
    /// @State var people = ObservablePresence(try await client.join("board"))
    /// ...
    /// ForEach(people.others, id: \.memberID) { member in Text(member.principal) }
    /// Text("\(people.count) here")
    /// ```
    ///
    /// It consumes a stream of its own, on the main actor, in order: `presence` is the set the
    /// views were last told about. After a reconnect it is replaced by the new connection's set
    /// (this client has a new member id there). It stops following when the stream ends
    /// (`isFinished`: the room was left or lost, the client closed) or fails (`failure`: e.g.
    /// `.unsupportedByServer` from a server older than protocol version 4), or when it is
    /// deallocated.
    @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
    @MainActor @Observable
    public final class ObservablePresence {
        public let room: String
        /// The replica followed: `setPresence` goes through it.
        @ObservationIgnored public let replica: RoomReplica
        /// The set the views show; empty until the watch is answered.
        public private(set) var presence: PresenceSet
        /// The update that made `presence` current (nil until the first one arrives).
        public private(set) var lastUpdate: PresenceUpdate?
        /// The stream ended: the room was left or lost, or the client closed, or the watch failed.
        public private(set) var isFinished = false
        /// Why the watch failed, when it did.
        public private(set) var failure: SnapSyncError?

        @ObservationIgnored private var follower: Task<Void, Never>?

        /// Follows `replica`'s presence, watching it if nobody does yet.
        public init(_ replica: RoomReplica) {
            room = replica.room
            self.replica = replica
            presence = replica.presenceSet ?? PresenceSet(room: replica.room)
            let updates = replica.presence
            follower = Task { [weak self] in
                // The events under `PresenceUpdates`, read as `ObservableReplica` reads its changes.
                for await event in updates.events {
                    guard let self else { return }
                    switch event {
                    case .update(let update):
                        self.presence = update.presence
                        self.lastUpdate = update
                    case .failed(let error):
                        self.failure = error
                        self.isFinished = true
                        return
                    }
                }
                self?.isFinished = true
            }
        }

        deinit {
            follower?.cancel()
        }

        /// The room's member count (those outside the view included).
        public var count: Int { presence.count }
        /// The view's members, in member id order.
        public var members: [PresenceMember] { presence.members }
        /// The view's members other than this client.
        public var others: [PresenceMember] { presence.others }
        /// This client's own entry, when it is in the view.
        public var me: PresenceMember? { presence.me }

        /// Sets this client's state (`RoomReplica.setPresence(_:)`).
        public func setPresence(_ state: [UInt8]) async throws(SnapSyncError) {
            try await replica.setPresence(state)
        }
    }
#endif
