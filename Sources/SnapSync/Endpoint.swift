extension SnapSyncClient {
    /// One address of a daemon: `Configuration.endpoints` lists them, in the order they are
    /// tried; `SnapSyncClient.endpoint` says which one the connection uses.
    public struct Endpoint: Hashable, Sendable, LosslessStringConvertible {
        /// A name or an IP address (an IPv6 address without brackets).
        public var host: String
        public var port: Int

        public init(host: String, port: Int) {
            self.host = host
            self.port = port
        }

        /// Reads what `description` writes: `host:port`, an IPv6 address in brackets
        /// (`[::1]:7400`), the port from 1 to 65535; nil for anything else.
        public init?(_ description: String) {
            guard let colon = description.lastIndex(of: ":"), let port = Int(description[description.index(after: colon)...]),
                (1...65535).contains(port)
            else { return nil }
            var host = description[..<colon]
            if host.hasPrefix("[") && host.hasSuffix("]") {
                host = host.dropFirst().dropLast()
            } else if host.contains(":") {
                return nil
            }
            guard !host.isEmpty else { return nil }
            self.init(host: String(host), port: port)
        }

        /// `host:port`, with an IPv6 address in brackets (`[::1]:7400`).
        public var description: String {
            host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        }
    }
}
