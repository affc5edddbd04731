import Testing

/// The suites that run real NATS servers, one test at a time. Their tests are synchronous: they
/// run `scripts/cluster` and drive a libevent loop on the test's thread for seconds (a leader
/// election takes 5–20 s). Swift's cooperative pool is as wide as the machine has cores (2
/// here), so two such tests at once would hold all of it, stall every other test of the process,
/// and make the daemons those tests talk to time their connections out (seen once: TLS
/// handshakes cut after the daemon's 10 s while the whole process stood still for 36 s).
@Suite(.serialized) enum RealNATSCluster {}
