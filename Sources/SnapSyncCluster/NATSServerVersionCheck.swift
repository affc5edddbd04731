package import Logging

/// Cluster mode's refusal of nats-servers whose JetStream is known to lose acknowledged writes
/// (`NATSServerVersion.knownDataLoss`, docs/cluster.md, "Which nats-server"): the policy on top
/// of `NATSServerProbe`. `JetStreamRoomLog.connect` runs it first, before anything is written.
///
/// Only the servers given are asked: the others of their cluster, which libnats may learn and
/// reconnect to later, are the operator's to keep at one version.
package enum NATSServerVersionCheck {
    /// Reads the version of each of `servers` and throws, naming the first server that is
    /// refused, its version and why; with `allowUnsafe`, logs each such server as a warning
    /// instead. A server that gives no INFO (down, not answering in time, or serving TLS first)
    /// is logged and left to libnats, which reports a server it cannot use. Blocking, like
    /// `probe`: before the loop runs.
    package static func check(
        servers: [String], allowUnsafe: Bool, logger: Logger,
        probe: (String) -> Result<NATSServerProbe.Info, NATSServerProbe.ProbeFailure> = { NATSServerProbe.info(url: $0) }
    ) throws(NATSError) {
        for url in servers {
            // As logs and errors show it: no credentials.
            let shown = NATSURLRedaction.redacted(url)
            switch probe(url) {
            case .failure(let failure):
                logger.notice("could not learn the version of the nats-server at \(shown) (\(failure)); not checked")
            case .success(let info):
                guard let reason = refusal(info) else {
                    logger.debug("nats-server \(info.name ?? "?") at \(shown) is version \(info.version)")
                    continue
                }
                let server = "nats-server \(info.name ?? "?") at \(shown) is version \(info.version)"
                guard allowUnsafe else {
                    throw NATSError(
                        operation: "server version check", identifier: shown, code: .refusedServer,
                        text:
                            "\(server): \(reason). Upgrade it (docs/cluster.md, section Which nats-server), or start with --cluster-allow-unsafe-nats-server to use it anyway"
                    )
                }
                logger.warning("\(server): \(reason); used anyway (--cluster-allow-unsafe-nats-server)")
            }
        }
    }

    /// Why a server that gave `info` is refused, or nil when it is not. A version that cannot be
    /// read is refused: nothing says it is safe.
    static func refusal(_ info: NATSServerProbe.Info) -> String? {
        guard let version = NATSServerVersion(info.version) else {
            return "a version this daemon cannot read, so not known to be \(NATSServerVersion.minimumSafe) or later"
        }
        return version.knownDataLoss
    }
}
