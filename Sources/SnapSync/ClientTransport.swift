// The client's transport, chosen at compile time.
//
// On Apple platforms the connection is Network.framework's, through NIOTransportServices
// (NetworkTransport.swift), with TLS from the system (Security's sec_protocol_options, no
// BoringSSL). BSD sockets would work there too, but on iOS they neither bring up the cellular
// radio nor trigger VPN On Demand (Apple's TN3151, "Choosing the right networking API");
// Network.framework does both. Elsewhere (Linux) it is NIOPosix's sockets with NIOSSL
// (PosixTransport.swift). Both build the same pipeline after their TLS handler (the wire codec
// and `ClientChannelHandler`) and verify the server's certificate inside the handshake with the
// same `ServerCertificateVerifier` (swift-certificates; on Apple platforms for configured trust
// roots, see NetworkTransport), so the Linux tests cover all but the few lines that talk to
// each platform's API.
//
// Each transport provides:
// - `PreparedTLS`: a `TLSConfiguration` checked and loaded once per client (Sendable);
// - `prepare(_:host:)`, which throws `SnapSyncError.tlsConfigurationInvalid`;
// - `connect(_:connection:)`, which opens the channel and installs the handlers;
// - `describe(_:target:)`, the one place that maps the platform's TLS errors to
//   `SnapSyncError` (nil for an error that is not about TLS).

import NIOCore

#if canImport(Network)
    typealias ClientTransport = NetworkTransport
#else
    typealias ClientTransport = PosixTransport
#endif
typealias PreparedTLS = ClientTransport.PreparedTLS

/// Where a connection goes and how.
struct TransportTarget: Sendable {
    var host: String
    var port: Int
    /// Name resolution and TCP connect (and on Apple platforms the TLS handshake).
    var connectTimeout: Duration
    /// nil: clear text.
    var tls: PreparedTLS?

    /// The name the server's certificate must carry: the configured `serverName`, else the host.
    var verifiedName: String { tls?.verifiedName ?? host }
}
