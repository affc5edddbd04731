"""End to end over TLS: snapcat --tls and Python ssl clients against the real snapsyncd with
--tls-listen, on certificates made for each test class with the openssl tool (never committed).

Covers: a session over TLS (snapcat --tls --cafile), refusal of an untrusted server certificate,
plaintext on the TLS port and TLS on the plain port, mutual TLS (and a client certificate's
subject standing for `sub`, with --tls-client-grant), certificate reload by SIGHUP
(a new connection sees the new certificate, an old one keeps working, a bad file is refused),
fan-out to several TLS readers, a slow consumer cut off between frames, the handshake timeout and
the connection limit on the TLS port.
"""

import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import unittest

from tests.support import Daemon, daemon_path, run_snapcat, snapcat, wire

OPENSSL = shutil.which("openssl")


def _openssl(*args, cwd):
    subprocess.run([OPENSSL, *args], cwd=cwd, check=True, capture_output=True, timeout=60)


class Certificates:
    """A CA, server certificates for 127.0.0.1 (serials 1001 and 2002), a client certificate
    signed by the CA, and one signed by another CA, in a temporary directory."""

    def __init__(self):
        self.dir = tempfile.TemporaryDirectory(prefix="snapsync-tls-test-")
        d = self.dir.name
        with open(os.path.join(d, "server.ext"), "w") as f:
            f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
        for ca in ("ca", "other-ca"):
            _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=%s" % ca,
                     "-keyout", ca + ".key", "-out", ca + ".pem", cwd=d)
        self._sign("server", "localhost", "ca", "0x1001", ext="server.ext")
        self._sign("server2", "localhost second", "ca", "0x2002", ext="server.ext")
        self._sign("client", "alice", "ca", "0x3003")
        self._sign("stranger", "mallory", "other-ca", "0x4004")
        # RDNs from the least specific: RFC 2253 prints them the other way round, and escapes the comma.
        self._sign("carol", None, "ca", "0x5005", subject="/C=FR/O=Example, Inc./CN=carol")

    def _sign(self, name, cn, ca, serial, ext=None, subject=None):
        d = self.dir.name
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", subject or "/CN=%s" % cn,
                 "-keyout", name + ".key", "-out", name + ".csr", cwd=d)
        _openssl("x509", "-req", "-in", name + ".csr", "-CA", ca + ".pem", "-CAkey", ca + ".key",
                 "-set_serial", serial, "-days", "2", "-out", name + ".pem",
                 *(["-extfile", ext] if ext else []), cwd=d)

    def path(self, name):
        return os.path.join(self.dir.name, name)

    def cleanup(self):
        self.dir.cleanup()


def tls_port(daemon, timeout=10):
    """The TLS listener's port, from the daemon's `TLS listening on HOST:PORT` line."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in list(daemon.stderr_lines):
            m = re.search(r"TLS listening on (\S+):(\d+)", line)
            if m:
                return int(m.group(2))
        time.sleep(0.01)
    raise AssertionError("no 'TLS listening on' line; daemon:\n%s" % daemon.log())


def wait_for_log(daemon, pattern, timeout=10):
    """Whether the daemon logs a line matching pattern within timeout seconds (0: already)."""
    deadline = time.monotonic() + timeout
    while True:
        if any(re.search(pattern, line) for line in list(daemon.stderr_lines)):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)


class Client:
    """A blocking Python ssl client speaking frames (snapcat_wire)."""

    def __init__(self, port, cafile, cert=None, key=None, receive_buffer=None):
        ctx = ssl.create_default_context(cafile=cafile)
        if cert:
            ctx.load_cert_chain(cert, key)
        raw = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if receive_buffer:
            raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
        raw.settimeout(10)
        raw.connect(("127.0.0.1", port))
        self.sock = ctx.wrap_socket(raw, server_hostname="127.0.0.1")
        self.splitter = wire.FrameSplitter(max_frame_bytes=1 << 24)
        self.frames = []
        self.next_id = 1

    def send(self, msg):
        self.sock.sendall(wire.encode_frame(msg))

    def receive(self):
        while not self.frames:
            data = self.sock.recv(1 << 16)
            if not data:
                raise AssertionError("the server closed the connection")
            self.splitter.feed(data)
            self.frames.extend(self.splitter.frames())
        return wire.decode_frame(self.frames.pop(0), wire.SERVER_TO_CLIENT)

    def request(self, msg):
        msg = dict(msg, request_id=self.next_id)
        self.next_id += 1
        self.send(msg)
        return msg["request_id"]

    def hello(self, credentials=b""):
        self.send({"type": "HELLO", "magic": wire.MAGIC, "versions": [wire.PROTOCOL_VERSION],
                   "client_name": b"tls-test", "credentials": credentials})
        welcome = self.receive()
        assert welcome["type"] == "WELCOME", welcome
        return welcome

    def join(self, room):
        self.request({"type": "JOIN", "room": room, "resume": None})
        snapshot = self.receive()
        assert snapshot["type"] == "SNAPSHOT", snapshot
        return snapshot

    def append_section(self, room, name, payload=b""):
        return self.request({"type": "MUTATE", "room": room, "expected_version": None, "write_id": b"",
                             "ops": [{"op": "append_sections", "elements": [{"id": name, "payload": payload}]}]})

    def close(self):
        self.sock.close()


def served_certificate(port, cafile):
    """The subject CN and serial of the certificate the TLS port serves to a new connection."""
    ctx = ssl.create_default_context(cafile=cafile)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
            cert = s.getpeercert()
    cn = dict(x[0] for x in cert["subject"])["commonName"]
    return cn, cert["serialNumber"]


@unittest.skipUnless(OPENSSL, "the openssl tool is needed to make the test certificates")
class TLSTestCase(unittest.TestCase):
    client_ca = False
    extra_args = ()

    @classmethod
    def setUpClass(cls):
        cls.certs = Certificates()

    @classmethod
    def tearDownClass(cls):
        cls.certs.cleanup()

    def setUp(self):
        # The served files are copies, so that the reload test can replace them.
        self.served = tempfile.TemporaryDirectory(prefix="snapsync-tls-served-")
        self.cert = os.path.join(self.served.name, "cert.pem")
        self.key = os.path.join(self.served.name, "key.pem")
        shutil.copy(self.certs.path("server.pem"), self.cert)
        shutil.copy(self.certs.path("server.key"), self.key)
        extra = ["--tls-client-ca", self.certs.path("ca.pem")] if self.client_ca else []
        self.daemon = Daemon("--tls-listen", "127.0.0.1:0", "--tls-cert", self.cert, "--tls-key", self.key,
                             "--log-level", "debug", *extra, *self.extra_args)
        self.tls_port = tls_port(self.daemon)
        self.ca = self.certs.path("ca.pem")

    def tearDown(self):
        self.daemon.stop()
        self.served.cleanup()

    def explain(self, done):
        return "exit %d\nstdout:\n%s\nstderr:\n%s\ndaemon:\n%s" % (
            done.returncode, done.stdout, done.stderr, self.daemon.log())


class TLSSessionTests(TLSTestCase):
    def test_snapcat_over_tls_joins_writes_and_gets_the_diff(self):
        done = run_snapcat(self.tls_port, "join lobby\nappend-sections lobby main\n", "--tls", "--cafile", self.ca)
        self.assertEqual(done.returncode, 0, self.explain(done))
        lines = done.stdout.splitlines()
        self.assertRegex(lines[0], r"^WELCOME v=4 session=\d+ server=")
        self.assertRegex(lines[1], r"^SNAPSHOT #1 lobby e=\d+ v=0 ")
        self.assertRegex(lines[2], r"^DIFF lobby e=\d+ v=1 append_sections \[main\]$")
        self.assertRegex(lines[3], r"^ACK #2 lobby e=\d+ v=1$")
        self.assertTrue(wait_for_log(self.daemon, r"kernel TLS (not )?in use"), self.daemon.log())

    def test_snapcat_refuses_a_server_certificate_it_does_not_trust(self):
        done = run_snapcat(self.tls_port, "join lobby\n", "--tls", "--cafile", self.certs.path("other-ca.pem"))
        self.assertEqual(done.returncode, snapcat.EXIT_CONNECTION, self.explain(done))
        self.assertIn("CERTIFICATE_VERIFY_FAILED", done.stderr)

    def test_snapcat_insecure_skips_verification(self):
        done = run_snapcat(self.tls_port, "join lobby\n", "--tls", "--insecure")
        self.assertEqual(done.returncode, 0, self.explain(done))
        self.assertRegex(done.stdout, r"SNAPSHOT #1 lobby ")

    def test_plaintext_on_the_tls_port_is_refused_at_once(self):
        with socket.create_connection(("127.0.0.1", self.tls_port), timeout=10) as s:
            s.sendall(wire.encode_frame({"type": "HELLO", "magic": wire.MAGIC, "versions": [1],
                                         "client_name": b"plain", "credentials": b""}))
            try:
                rest = s.recv(100)
            except ConnectionResetError:
                rest = b""
        self.assertEqual(rest, b"")
        self.assertTrue(wait_for_log(self.daemon, r"plaintext sent to the TLS port \(not a TLS handshake\), closing"),
                        self.daemon.log())

    def test_tls_on_the_plain_port_gets_the_protocol_error(self):
        # A real ClientHello, made by Python's ssl into memory, sent to the plain port.
        ctx = ssl.create_default_context()
        incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        tls = ctx.wrap_bio(incoming, outgoing, server_hostname="localhost")
        with self.assertRaises(ssl.SSLWantReadError):
            tls.do_handshake()
        hello = outgoing.read()
        self.assertEqual(hello[:2], b"\x16\x03")
        with socket.create_connection(("127.0.0.1", self.daemon.port), timeout=10) as s:
            s.sendall(hello)
            data = b""
            while True:
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
        splitter = wire.FrameSplitter()
        splitter.feed(data)
        [frame] = list(splitter.frames())
        error = wire.decode_frame(frame, wire.SERVER_TO_CLIENT)
        self.assertEqual(error["type"], "ERROR")
        self.assertEqual(wire.error_name(error["code"]), "frame_too_large")
        self.assertTrue(wait_for_log(self.daemon, r"TLS handshake sent to the plain port, closing"), self.daemon.log())

    def test_fan_out_over_tls_delivers_every_diff_in_order(self):
        readers = [Client(self.tls_port, self.ca) for _ in range(5)]
        writer = Client(self.tls_port, self.ca)
        try:
            for c in readers + [writer]:
                c.hello()
                c.join(b"fan")
            count = 200
            for i in range(count):
                writer.append_section(b"fan", b"s%d" % i)
            for c in readers:
                versions = []
                while len(versions) < count:
                    msg = c.receive()
                    self.assertEqual(msg["type"], "DIFF", msg)
                    versions.append(msg["version"])
                    self.assertEqual(msg["ops"][0]["elements"][0]["id"], b"s%d" % (len(versions) - 1))
                self.assertEqual(versions, list(range(1, count + 1)))
        finally:
            for c in readers + [writer]:
                c.close()


class TLSSlowConsumerTests(TLSTestCase):
    extra_args = ("--max-output-bytes", "64KiB", "--shutdown-timeout", "60s")

    def test_a_tls_reader_that_stops_reading_is_cut_off_between_frames(self):
        # The reader's socket fills, so records wait in OpenSSL (WANT_WRITE) and in the retry
        # buffer while the queue passes its cap; what arrives must still be whole frames, in
        # order, then ERROR slow_consumer.
        reader = Client(self.tls_port, self.ca, receive_buffer=4096)
        writer = Client(self.tls_port, self.ca)
        try:
            reader.hello()
            reader.join(b"slow")
            writer.hello()
            writer.join(b"slow")
            # Up to 12 MB, more than the kernel buffers between them hold, until the cut-off.
            written = 0
            while written < 200 and not wait_for_log(self.daemon, r"slow consumer, closing", timeout=0):
                # One at a time, reading its own DIFF and ACK, so the writer is never slow itself.
                request = writer.append_section(b"slow", b"s%d" % written, payload=b"x" * 60000)
                while True:
                    msg = writer.receive()
                    if msg["type"] == "ACK" and msg["request_id"] == request:
                        break
                written += 1
            self.assertTrue(wait_for_log(self.daemon, r"slow consumer, closing"), self.daemon.log())
            versions = []
            while True:
                msg = reader.receive()
                if msg["type"] != "DIFF":
                    break
                versions.append(msg["version"])
            self.assertEqual(msg["type"], "ERROR", msg)
            self.assertEqual(wire.error_name(msg["code"]), "slow_consumer")
            self.assertEqual(versions, list(range(1, len(versions) + 1)))
            self.assertLess(len(versions), written)
        finally:
            reader.close()
            writer.close()


class TLSReloadTests(TLSTestCase):
    def test_sighup_serves_the_new_certificate_to_new_connections_only(self):
        self.assertEqual(served_certificate(self.tls_port, self.ca), ("localhost", "1001"))
        old = Client(self.tls_port, self.ca)
        try:
            old.hello()
            old.join(b"room")
            shutil.copy(self.certs.path("server2.pem"), self.cert)
            shutil.copy(self.certs.path("server2.key"), self.key)
            os.kill(self.daemon.proc.pid, signal.SIGHUP)
            self.assertTrue(wait_for_log(self.daemon, r"TLS certificate reloaded"), self.daemon.log())
            self.assertEqual(served_certificate(self.tls_port, self.ca), ("localhost second", "2002"))
            # The connection made before the reload goes on with its session.
            request = old.append_section(b"room", b"after-reload")
            self.assertEqual(old.receive()["type"], "DIFF")
            ack = old.receive()
            self.assertEqual((ack["type"], ack["request_id"]), ("ACK", request))
        finally:
            old.close()

    def test_a_bad_file_on_reload_keeps_the_certificate_in_use(self):
        # The key of another certificate: loads, but does not match.
        shutil.copy(self.certs.path("client.key"), self.key)
        os.kill(self.daemon.proc.pid, signal.SIGHUP)
        self.assertTrue(wait_for_log(self.daemon, r"TLS reload refused, the certificate in use is kept"),
                        self.daemon.log())
        self.assertEqual(served_certificate(self.tls_port, self.ca), ("localhost", "1001"))


class TLSHandshakeTimeoutTests(TLSTestCase):
    # Short handshake timeout; a long shutdown timeout, so that a close that waits for its ERROR
    # to be written would outlast the client's 10 s.
    extra_args = ("--handshake-timeout", "300ms", "--shutdown-timeout", "60s")

    def test_an_unfinished_handshake_is_closed_at_the_handshake_timeout(self):
        with socket.create_connection(("127.0.0.1", self.tls_port), timeout=10) as s:
            s.sendall(b"\x16\x03\x01")      # the start of a ClientHello record, and no more
            # Nothing comes back (a plaintext ERROR means nothing to a TLS client), then EOF.
            self.assertEqual(s.recv(100), b"")
        self.assertTrue(wait_for_log(self.daemon, r"no HELLO in time, closing"), self.daemon.log())
        self.assertTrue(wait_for_log(self.daemon, r"connection closed conn=1 "), self.daemon.log())
        self.assertNotIn('reason="close timeout"', self.daemon.log())


class TLSConnectionLimitTests(TLSTestCase):
    extra_args = ("--max-connections", "1")

    def test_a_tls_connection_over_the_limit_is_closed_before_its_handshake(self):
        first = Client(self.tls_port, self.ca)
        try:
            first.hello()
            with self.assertRaises((ssl.SSLError, ConnectionError, OSError)):
                Client(self.tls_port, self.ca)
            self.assertTrue(wait_for_log(self.daemon, r"TLS connection refused: too many connections"), self.daemon.log())
            first.join(b"still-served")
        finally:
            first.close()


class MutualTLSTests(TLSTestCase):
    client_ca = True

    def test_a_client_certificate_signed_by_the_ca_is_accepted(self):
        done = run_snapcat(self.tls_port, "join lobby\n", "--tls", "--cafile", self.ca,
                           "--cert", self.certs.path("client.pem"), "--key", self.certs.path("client.key"))
        self.assertEqual(done.returncode, 0, self.explain(done))
        self.assertRegex(done.stdout, r"SNAPSHOT #1 lobby ")
        self.assertTrue(wait_for_log(self.daemon, r"TLS handshake done .*client_certificate=\"subject=/CN=alice"),
                        self.daemon.log())

    def test_a_missing_client_certificate_is_refused(self):
        done = run_snapcat(self.tls_port, "join lobby\n", "--tls", "--cafile", self.ca)
        self.assertNotEqual(done.returncode, 0, self.explain(done))
        self.assertNotRegex(done.stdout, r"WELCOME")
        self.assertTrue(wait_for_log(self.daemon, r"TLS handshake failed, closing .*peer did not return a certificate"),
                        self.daemon.log())

    def test_a_client_certificate_from_another_ca_is_refused(self):
        done = run_snapcat(self.tls_port, "join lobby\n", "--tls", "--cafile", self.ca,
                           "--cert", self.certs.path("stranger.pem"), "--key", self.certs.path("stranger.key"))
        self.assertNotEqual(done.returncode, 0, self.explain(done))
        self.assertNotRegex(done.stdout, r"WELCOME")
        self.assertTrue(wait_for_log(self.daemon, r"TLS handshake failed, closing .*certificate verify failed"),
                        self.daemon.log())


class ClientCertificateSubjectTests(TLSTestCase):
    """--tls-client-grant: on a daemon that authenticates, a HELLO without a token is
    authenticated by the verified client certificate, whose RFC 2253 subject is the sub."""
    client_ca = True
    CAROL = r"CN=carol,O=Example\, Inc.,C=FR"

    def setUp(self):
        self.keys_dir = tempfile.TemporaryDirectory(prefix="snapsync-tls-keys-")
        self.addCleanup(self.keys_dir.cleanup)
        self.keys = os.path.join(self.keys_dir.name, "keys.json")
        self.tool("keygen", "--alg", "HS256", "--kid", "k1", "--out", self.keys)
        self.extra_args = ("--auth-keys", self.keys, "--tls-client-grant", "board:*=read",
                           "--tls-client-grant", "notes=read,write")
        super().setUp()

    def tool(self, *args):
        done = subprocess.run([daemon_path(), *args], capture_output=True, text=True, timeout=60)
        self.assertEqual(done.returncode, 0, "snapsyncd %s: %s" % (" ".join(args), done.stderr))
        return done.stdout.strip()

    def token(self, sub, *rooms):
        args = ["token", "--keys", self.keys, "--kid", "k1", "--sub", sub]
        for room in rooms:
            args += ["--room", room]
        return self.tool(*args).encode()

    def client(self, name="carol"):
        c = Client(self.tls_port, self.ca, cert=self.certs.path(name + ".pem"), key=self.certs.path(name + ".key"))
        self.addCleanup(c.close)
        return c

    def test_a_certificate_alone_gets_the_grants_with_its_subject_as_sub(self):
        c = self.client()
        c.hello()
        self.assertEqual(c.join(b"board:1")["type"], "SNAPSHOT")
        c.append_section(b"notes", b"main")
        c.request({"type": "JOIN", "room": b"notes", "resume": None})
        c.append_section(b"board:1", b"main")
        ack, snapshot, reject = c.receive(), c.receive(), c.receive()
        self.assertEqual(ack["type"], "ACK", ack)
        self.assertEqual(snapshot["type"], "SNAPSHOT", snapshot)
        self.assertEqual(reject["type"], "REJECT", reject)
        self.assertEqual(wire.error_name(reject["code"]), "forbidden")
        self.assertEqual(reject["message"].decode(), "certificate of %s grants no write on room board:1" % self.CAROL)
        self.assertTrue(wait_for_log(self.daemon, r"authenticated by client certificate .*sub=.?CN=carol,O=Example\\, Inc\.,C=FR"),
                        self.daemon.log())

    def test_a_token_wins_over_the_certificate(self):
        c = self.client()
        c.hello(self.token("bob", "board:*=read,write"))
        c.append_section(b"board:1", b"main")
        ack = c.receive()
        self.assertEqual(ack["type"], "ACK", ack)
        c.append_section(b"notes", b"main")      # the certificate's grants do not add to the token's
        reject = c.receive()
        self.assertEqual(reject["message"].decode(), "token of bob grants no write on room notes")
        self.assertTrue(wait_for_log(self.daemon, r"\bauthenticated .*sub=bob"), self.daemon.log())
        self.assertFalse(wait_for_log(self.daemon, r"authenticated by client certificate", timeout=0), self.daemon.log())

    def test_a_refused_token_is_refused_though_the_certificate_would_do(self):
        c = self.client()
        c.send({"type": "HELLO", "magic": wire.MAGIC, "versions": [wire.PROTOCOL_VERSION],
                "client_name": b"tls-test", "credentials": b"not-a-token"})
        error = c.receive()
        self.assertEqual(error["type"], "ERROR", error)
        self.assertEqual(wire.error_name(error["code"]), "unauthorized")

    def test_auth_keeps_the_certificate_subject(self):
        c = self.client()
        c.hello()
        c.request({"type": "AUTH", "credentials": self.token(self.CAROL, "board:*=read,write")})
        self.assertEqual(c.receive()["type"], "ACK")
        c.append_section(b"board:1", b"main")   # the token's grants now
        self.assertEqual(c.receive()["type"], "ACK")
        c.request({"type": "AUTH", "credentials": self.token("bob", "board:*=read,write")})
        error = c.receive()
        self.assertEqual(wire.error_name(error["code"]), "unauthorized", error)
        self.assertIn("this session is \"%s\"" % self.CAROL, error["message"].decode())


class ClientCertificateWithoutGrantTests(TLSTestCase):
    """Mutual TLS on a daemon that authenticates, without --tls-client-grant: a certificate
    alone authenticates no one (the default)."""
    client_ca = True

    def setUp(self):
        self.keys_dir = tempfile.TemporaryDirectory(prefix="snapsync-tls-keys-")
        self.addCleanup(self.keys_dir.cleanup)
        keys = os.path.join(self.keys_dir.name, "keys.json")
        subprocess.run([daemon_path(), "keygen", "--alg", "HS256", "--kid", "k1", "--out", keys],
                       check=True, capture_output=True, timeout=60)
        self.extra_args = ("--auth-keys", keys)
        super().setUp()

    def test_a_hello_without_a_token_is_refused(self):
        c = Client(self.tls_port, self.ca, cert=self.certs.path("carol.pem"), key=self.certs.path("carol.key"))
        self.addCleanup(c.close)
        c.send({"type": "HELLO", "magic": wire.MAGIC, "versions": [wire.PROTOCOL_VERSION],
                "client_name": b"tls-test", "credentials": b""})
        error = c.receive()
        self.assertEqual(wire.error_name(error["code"]), "unauthorized", error)

    def test_the_grant_flag_needs_authentication_and_a_client_ca(self):
        base = [daemon_path(), "--port", "0", "--data-dir", os.path.join(self.keys_dir.name, "data"),
                "--tls-listen", "127.0.0.1:0", "--tls-cert", self.cert, "--tls-key", self.key]
        done = subprocess.run(base + ["--tls-client-ca", self.ca, "--tls-client-grant", "*=read"],
                              capture_output=True, text=True, timeout=60)
        self.assertNotEqual(done.returncode, 0)
        self.assertIn("--tls-client-grant needs --auth required", done.stderr)
        done = subprocess.run(base + ["--auth-keys", os.path.join(self.keys_dir.name, "keys.json"),
                                      "--tls-client-grant", "*=read"], capture_output=True, text=True, timeout=60)
        self.assertNotEqual(done.returncode, 0)
        self.assertIn("--tls-client-grant needs --tls-client-ca", done.stderr)


if __name__ == "__main__":
    unittest.main()
