extension SnapSyncClient {
    /// Where to connect and how patient to be.
    public struct Configuration: Sendable {
        /// The daemons to connect to, in the order they are tried: several nodes serving the
        /// same rooms (a cluster), or one. Not empty (`connect()` throws `.connectFailed` when
        /// it is).
        ///
        /// `connect()` tries them from the first, each at once after the previous one failed,
        /// and throws only when every one failed (`SnapSyncError.allEndpointsFailed`, naming
        /// them, with the last one's error; with a single endpoint, that error itself). When a
        /// connection drops, the client reconnects in rounds (`ReconnectPolicy`): each round
        /// tries every endpoint once, starting after the one that failed, and the policy's
        /// delay comes before each round, not between the endpoints of a round. Rooms resume
        /// from their replicas' positions on whichever endpoint answers (PROTOCOL.md §9): a node
        /// that serves the same rooms answers with CATCHUP, another daemon with a resync.
        /// `SnapSyncClient.endpoint` says which endpoint the connection uses.
        ///
        /// A refused token (`.unauthorized`) or a failure before any socket was opened (the
        /// credentials provider) ends the round: it is not about the endpoint.
        ///
        /// Clients with the same list in the same order all fail over to the same next node: to
        /// spread a failed node's clients over the others, give each client its own order (for
        /// example `endpoints.shuffled()`).
        public var endpoints: [Endpoint]
        /// The first endpoint's host, for the common case of one daemon: setting it changes the
        /// first endpoint (and makes one, with port 7400, when `endpoints` is empty); the other
        /// endpoints stay.
        public var host: String {
            get { endpoints.first?.host ?? "" }
            set {
                if endpoints.isEmpty { endpoints = [Endpoint(host: newValue, port: 7400)] } else { endpoints[0].host = newValue }
            }
        }
        /// The first endpoint's port (see `host`).
        public var port: Int {
            get { endpoints.first?.port ?? 7400 }
            set {
                if endpoints.isEmpty { endpoints = [Endpoint(host: "127.0.0.1", port: newValue)] } else { endpoints[0].port = newValue }
            }
        }
        /// Sent in HELLO; the daemon logs it.
        public var clientName: String
        /// One budget per attempt (with several endpoints, per endpoint tried) for all of: the
        /// credentials provider, name resolution, TCP connect, the TLS handshake and HELLO/WELCOME.
        public var connectTimeout: Duration
        /// How long a call (join, leave, mutate, replace) waits for its answer, counted from the
        /// call and across reconnects: a write interrupted by a disconnect is resent and waited for
        /// until this runs out.
        public var requestTimeout: Duration
        /// After this long without hearing from the server the client sends a PING.
        public var pingInterval: Duration
        /// A PING unanswered for this long means the connection is dead: the client drops it and
        /// reconnects.
        public var pingTimeout: Duration
        public var reconnect: ReconnectPolicy
        /// The token (a JWT, docs/auth.md) for a daemon that requires one; `nil`: none is sent.
        ///
        /// Called before every connection attempt (the first and each reconnect) for the token
        /// sent in HELLO, and again before the token expires: the client reads the token's `exp`
        /// (and `iat`), and a margin before `exp` — 10% of the token's lifetime, at most 30
        /// seconds — sends the provider's new token to the live session (AUTH), so the session
        /// outlives any one token. A refresh that fails (the provider throws, returns `nil` or
        /// the same token) is tried again halfway to `exp`, three times at most; after that the
        /// server ends the session at expiry (`token_expired`) and the reconnect asks again.
        ///
        /// Return the cached token while it is valid: a call is not a request for a new one.
        /// When the server refuses a token (`SnapSyncError.unauthorized`), the client reconnects
        /// only if the provider then returns a different one. Time spent in the provider counts
        /// against `connectTimeout`.
        public var credentials: CredentialsProvider?
        /// TLS to the daemons' `--tls-listen` ports (`TLSConfiguration`); `nil`: clear text.
        /// The same for every endpoint; each endpoint's certificate is checked against
        /// `TLSConfiguration.serverName` when set, else against that endpoint's own host.
        public var tls: TLSConfiguration?
        /// The wall clock token refreshes are planned by (WallClock.swift): the system's, or
        /// one a test drives.
        package var clock: any WallClock = SystemWallClock()

        /// One daemon, at `host` and `port`.
        public init(
            host: String = "127.0.0.1", port: Int = 7400, clientName: String = "SnapSync client",
            connectTimeout: Duration = .seconds(5), requestTimeout: Duration = .seconds(10),
            pingInterval: Duration = .seconds(15), pingTimeout: Duration = .seconds(10),
            reconnect: ReconnectPolicy = .default, credentials: CredentialsProvider? = nil,
            tls: TLSConfiguration? = nil
        ) {
            self.init(
                endpoints: [Endpoint(host: host, port: port)], clientName: clientName, connectTimeout: connectTimeout,
                requestTimeout: requestTimeout, pingInterval: pingInterval, pingTimeout: pingTimeout,
                reconnect: reconnect, credentials: credentials, tls: tls)
        }

        /// Several daemons serving the same rooms, tried in this order (see `endpoints`).
        public init(
            endpoints: [Endpoint], clientName: String = "SnapSync client",
            connectTimeout: Duration = .seconds(5), requestTimeout: Duration = .seconds(10),
            pingInterval: Duration = .seconds(15), pingTimeout: Duration = .seconds(10),
            reconnect: ReconnectPolicy = .default, credentials: CredentialsProvider? = nil,
            tls: TLSConfiguration? = nil
        ) {
            self.endpoints = endpoints
            self.clientName = clientName
            self.connectTimeout = connectTimeout
            self.requestTimeout = requestTimeout
            self.pingInterval = pingInterval
            self.pingTimeout = pingTimeout
            self.reconnect = reconnect
            self.credentials = credentials
            self.tls = tls
        }
    }

    /// Returns the token to authenticate with (compact JWT), or `nil` for none. See
    /// `Configuration.credentials`.
    public typealias CredentialsProvider = @Sendable () async throws -> String?

    /// Automatic reconnection after a connection that was up drops: exponential backoff with
    /// jitter, so that a restarted daemon is not hit by every client at the same instant.
    ///
    /// The n-th attempt (n from 0) waits `min(maximumDelay, initialDelay × multiplier^n)`, minus a
    /// random part of up to `jitter` of it (0: none, 1: "full jitter", anywhere from 0).
    ///
    /// With several `Configuration.endpoints`, an attempt is a round over all of them: the delay
    /// comes before each round, and within a round each endpoint is tried as soon as the
    /// previous one failed. So a dead endpoint does not delay the failover to a live one, each
    /// daemon still sees at most one attempt per delay from a client (as with one endpoint),
    /// and `maximumAttempts` gives up only after every endpoint failed that many times.
    public struct ReconnectPolicy: Hashable, Sendable {
        public var enabled: Bool
        public var initialDelay: Duration
        public var multiplier: Double
        public var maximumDelay: Duration
        /// Fraction of each delay that is random, 0...1.
        public var jitter: Double
        /// Give up after this many failed attempts (rounds) in a row (`nil`: never). Giving up
        /// fails every waiting call with `connectionLost` (with several endpoints,
        /// `allEndpointsFailed`) and stops the client (`ClientEvent.stopped`) until `connect()`.
        public var maximumAttempts: Int?

        public init(
            enabled: Bool = true, initialDelay: Duration = .milliseconds(100), multiplier: Double = 2,
            maximumDelay: Duration = .seconds(30), jitter: Double = 0.5, maximumAttempts: Int? = nil
        ) {
            self.enabled = enabled
            self.initialDelay = initialDelay
            self.multiplier = multiplier
            self.maximumDelay = maximumDelay
            self.jitter = min(max(jitter, 0), 1)
            self.maximumAttempts = maximumAttempts
        }

        public static let `default` = ReconnectPolicy()
        public static let disabled = ReconnectPolicy(enabled: false)

        /// The wait before attempt `attempt` (0-based), drawing the jitter from `random`.
        public func delay(attempt: Int, using random: inout some RandomNumberGenerator) -> Duration {
            let initial = initialDelay.seconds, cap = maximumDelay.seconds
            // Exponent capped so that huge attempt counts cannot overflow to infinity or NaN.
            let base = min(cap, initial * Self.power(multiplier, min(attempt, 64)))
            let wait = jitter == 0 ? base : base * (1 - jitter * Double.random(in: 0...1, using: &random))
            return .nanoseconds(Int64(max(0, wait) * 1e9))
        }
    }
}

extension Duration {
    /// The duration in seconds, as a `Double`.
    var seconds: Double {
        let (s, attoseconds) = components
        return Double(s) + Double(attoseconds) / 1e18
    }
}

extension SnapSyncClient.ReconnectPolicy {
    /// `base` to a small non-negative integer power, without Foundation's `pow`.
    static func power(_ base: Double, _ exponent: Int) -> Double {
        var result = 1.0
        var n = exponent
        var b = base
        while n > 0 {
            if n & 1 == 1 { result *= b }
            b *= b
            n >>= 1
        }
        return result
    }
}
