// Tokens (PROTOCOL.md §8, docs/auth.md): the HELLO token asked of `Configuration.credentials`
// before each connection attempt, its refresh in the live session (AUTH) before it expires, and
// the rule that keeps a refused token from being sent again and again.

/// A token as sent, with its expiry when the client could read one.
struct SessionToken: Sendable {
    var bytes: [UInt8]
    var lifetime: TokenLifetime?

    /// `now`: the wall clock's, for a token without `iat` (its lifetime counts from now).
    init(_ token: String?, now: Double) {
        bytes = Array((token ?? "").utf8)
        lifetime = token.flatMap { TokenLifetime(token: $0, now: now) }
    }
}

extension SnapSyncClient {
    /// Asks the provider for the HELLO token (or takes none), then opens the connection. The
    /// handshake timer already runs: a provider slower than `connectTimeout` fails the attempt.
    func prepareConnection(_ generation: Int) {
        link = .preparing
        guard let provider = configuration.credentials else {
            return credentialsObtained(.success(nil), generation)
        }
        credentialsTask = Task { [weak self] in
            let result: Result<String?, SnapSyncError>
            do {
                result = .success(try await provider())
            } catch {
                result = .failure(.credentialsUnavailable("\(error)"))
            }
            await self?.credentialsObtained(result, generation)
        }
    }

    /// The provider answered for connection `generation`.
    ///
    /// The rule against hammering: after the server refused a token, an automatic reconnect
    /// proceeds only with a different one (a token the provider did not change, or no token
    /// again after "missing", would be refused the same way); otherwise the client stops
    /// (`.stopped(.unauthorized)`), and only the app's `connect()` tries again.
    func credentialsObtained(_ result: Result<String?, SnapSyncError>, _ generation: Int) {
        guard generation == self.generation, state != .closed, case .preparing = link else { return }
        credentialsTask = nil
        let token: SessionToken
        switch result {
        case .failure(let error):
            return connectionClosed(error)
        case .success(let string):
            token = SessionToken(string, now: configuration.clock.now())
        }
        if let refused, refused.token == token.bytes {
            link = .none
            handshakeTimer?.cancel()
            handshakeTimer = nil
            return stop(.unauthorized(reason: refused.reason))
        }
        self.token = token
        openConnection(generation)
    }

    /// ERROR `unauthorized`: the token refused is the one of an AUTH awaiting its answer, if
    /// any (the server answers AUTHs in order), else the HELLO's.
    func credentialsRefused(_ reason: String) {
        let pending = requests.keys.sorted().compactMap { id -> SessionToken? in
            if case .auth(let token)? = requests[id] { return token }
            return nil
        }
        refused = ((pending.first ?? token)?.bytes ?? [], reason)
        eventSink.yield(.credentialsRefused(reason: reason))
    }

    // MARK: Refresh

    /// Plans the next refresh of the connection's token: at `TokenLifetime.refreshAt`, or after
    /// a failure halfway to `exp`, by `Configuration.clock`. Nothing to plan without a provider
    /// or a readable `exp`.
    func scheduleRefresh() {
        refreshTask?.cancel()
        refreshTask = nil
        guard let provider = configuration.credentials, let lifetime = token?.lifetime,
            case .ready = link, refreshFailures <= TokenLifetime.refreshRetries
        else { return }
        let clock = configuration.clock
        let at = refreshFailures == 0 ? lifetime.refreshAt : lifetime.retryAt(now: clock.now())
        let generation = generation
        refreshTask = Task { [weak self] in
            try? await clock.sleep(until: at)
            guard !Task.isCancelled else { return }
            let result: Result<String?, SnapSyncError>
            do {
                result = .success(try await provider())
            } catch {
                result = .failure(.credentialsUnavailable("\(error)"))
            }
            await self?.refreshObtained(result, generation)
        }
    }

    /// The provider answered a refresh: send the new token (AUTH), or count a failure (it threw,
    /// returned nothing, or the token in use) and plan the next try.
    func refreshObtained(_ result: Result<String?, SnapSyncError>, _ generation: Int) {
        guard generation == self.generation, case .ready(let connection) = link else { return }
        refreshTask = nil
        if case .success(let string?) = result, let current = token, Array(string.utf8) != current.bytes {
            let fresh = SessionToken(string, now: configuration.clock.now())
            let requestID = newRequest(.auth(fresh))
            connection.send(.auth(requestID: requestID, credentials: fresh.bytes))
            return
        }
        refreshFailures += 1
        scheduleRefresh()
    }

    /// ACK of an AUTH: the token is the connection's; plan its own refresh.
    func refreshAcknowledged(_ fresh: SessionToken) {
        token = fresh
        refreshFailures = 0
        scheduleRefresh()
    }
}
