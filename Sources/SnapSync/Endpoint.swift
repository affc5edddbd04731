extension SnapSyncClient {
    /// One address of a daemon: `Configuration.endpoints` lists them, in the order they are
    /// tried; `SnapSyncClient.endpoint` says which one the connection uses.
    public struct Endpoint: Hashable, Sendable, CustomStringConvertible {
        /// A name or an IP address (an IPv6 address without brackets).
        public var host: String
        public var port: Int

        public init(host: String, port: Int) {
            self.host = host
            self.port = port
        }

        /// `host:port`, with an IPv6 address in brackets (`[::1]:7400`).
        public var description: String {
            host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        }
    }
}
