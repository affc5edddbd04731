import Testing
import SnapSyncTestThreads

/// The suites that run real NATS servers, one test at a time, on a thread of their own. Their
/// tests are synchronous: they run `scripts/cluster` and drive a libevent loop on the test's
/// thread for seconds (a leader election takes 5–20 s). On Swift's cooperative pool, as wide as
/// the machine has cores (2 here), they held a pool thread for the whole suite, and with one
/// other blocking suite all of it: every async test of the process stood still (seen once for
/// 36 s, long enough for daemons to cut those tests' TLS handshakes).
@Suite(.serialized, .ownThread("real NATS")) enum RealNATSCluster {}
