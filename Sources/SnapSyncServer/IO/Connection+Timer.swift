import Logging
import SnapSyncWire
import SnapSyncHub

// A connection's one timer, re-armed as it goes through its life: the handshake timeout while
// awaiting HELLO, the idle timer (PING, then ERROR timeout) once ready, the close deadline and
// the linger poll while closing (PROTOCOL.md §8.3).

extension Connection {
    /// How often a flushed, closing connection checks whether its peer acknowledged everything.
    static let lingerPollInterval: Duration = .milliseconds(10)

    func timerFired() {
        let configuration = context.configuration
        switch session.state {
        case .awaitingHello:
            hub.stats.protocolErrors += 1
            hub.logLimited(.info, cause: "no HELLO in time", "no HELLO in time, closing", metadata: session.logMetadata)
            hub.close(session, error: .timeout, "no HELLO within \(ConfigurationValue.describe(duration: configuration.handshakeTimeout))")
        case .ready:
            let idle = configuration.idleTimeout
            let silent = ContinuousClock.now - lastInput
            if silent < idle {
                pingOutstanding = false
                armTimer(idle - silent)
            } else if pingOutstanding {
                hub.logLimited(.info, cause: "no answer to PING", "no answer to PING, closing", metadata: session.logMetadata)
                hub.close(session, error: .timeout, "no frame for \(ConfigurationValue.describe(duration: silent)), not even a PONG")
            } else {
                pingOutstanding = true
                hub.send(.ping(nonce: nextPingNonce), to: session)
                nextPingNonce &+= 1
                armTimer(idle)
            }
        case .closing:
            let now = ContinuousClock.now
            if isFullyDelivered {
                hub.end(session, reason: "closed")
            } else if let closeDeadline, now < closeDeadline {
                // Flushed and waiting for acknowledgements: look again soon. Still flushing
                // (EV_WRITE armed): wait for the deadline.
                armTimer(hasShutDownOutput ? min(Self.lingerPollInterval, closeDeadline - now) : closeDeadline - now)
            } else {
                context.closedAtDeadline += 1
                hub.end(session, reason: "close timeout")
            }
        }
    }
}
