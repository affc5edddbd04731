"""The room's chain and VERIFY end to end (PROTOCOL.md section 9, version 3): snapcat against the
real snapsyncd through a relay that can alter, drop or repeat what the server sends. A DIFF
changed on the way still decodes and applies, so only the chain shows that the replica no longer
holds the room; one changed by a relay that also forges every chain after it is found by VERIFY's
digest."""

import json
import socket
import threading
import unittest

from tests.support import Daemon, run_snapcat, wire


class Relay:
    """A TCP relay on an ephemeral loopback port to `port`, for one client connection: the client's
    bytes go through as they are, and each whole frame from the server is replaced by the frames
    `alter(frame)` returns (none: dropped; two: repeated)."""

    def __init__(self, port, alter):
        self.alter = alter
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.target = port
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        client, _ = self.listener.accept()
        server = socket.create_connection(("127.0.0.1", self.target))
        threading.Thread(target=self._pipe, args=(client, server), daemon=True).start()
        splitter = wire.FrameSplitter()
        try:
            while True:
                data = server.recv(1 << 16)
                if not data:
                    break
                splitter.feed(data)
                for frame in splitter.frames():
                    for out in self.alter(bytes(frame)):
                        client.sendall(out)
        except OSError:
            pass
        finally:
            client.close()

    @staticmethod
    def _pipe(source, sink):
        try:
            while True:
                data = source.recv(1 << 16)
                if not data:
                    break
                sink.sendall(data)
        except OSError:
            pass
        finally:
            sink.close()

    def close(self):
        self.listener.close()


class ChainTests(unittest.TestCase):
    def setUp(self):
        self.daemon = Daemon()

    def tearDown(self):
        self.daemon.stop()

    def session(self, alter, verify=False):
        relay = Relay(self.daemon.port, alter)
        self.addCleanup(relay.close)
        return run_snapcat(relay.port, "join board\nappend-sections board main\n"
                           "append-items board to main card=hello\nappend-items board to main next\n"
                           + ("wait\nverify board\n" if verify else "") + "show board\n", "--json", "-q", "2")

    @staticmethod
    def state(done):
        return json.loads(done.stdout.splitlines()[-1])

    def test_diffs_as_sent_follow_the_chain_and_verify(self):
        done = self.session(lambda frame: [frame], verify=True)
        state = self.state(done)
        self.assertTrue(state["in_sync"], done.stdout + done.stderr)
        self.assertEqual(state["version"], 3)
        self.assertNotIn("diverged", done.stderr)
        self.assertIn("replica of board verified at e=%d v=3" % state["epoch"], done.stderr)

    def test_a_diff_altered_on_the_way_is_a_divergence(self):
        # The DIFF of version 2 arrives with another payload for `card`: it decodes and applies.
        def alter(frame):
            return [frame.replace(b"hello", b"jello") if frame[4] == 0x22 else frame]
        done = self.session(alter)
        self.assertFalse(self.state(done)["in_sync"], done.stdout + done.stderr)
        self.assertIn("replica of board diverged: DIFF v=2: its chain", done.stderr)

    def test_a_dropped_diff_is_found_at_the_next(self):
        def alter(frame):
            return [] if frame[4] == 0x22 and b"hello" in frame else [frame]
        done = self.session(alter)
        self.assertFalse(self.state(done)["in_sync"], done.stdout + done.stderr)
        self.assertIn("does not follow", done.stderr)

    def test_a_repeated_diff_is_found(self):
        def alter(frame):
            return [frame, frame] if frame[4] == 0x22 and b"hello" in frame else [frame]
        done = self.session(alter)
        self.assertFalse(self.state(done)["in_sync"], done.stdout + done.stderr)
        self.assertIn("does not follow", done.stderr)

    def test_a_relay_that_forges_the_chain_is_found_by_verify(self):
        # A man in the middle that alters the DIFF of version 2 and gives it, every later DIFF and
        # the DIGEST the chain the altered history leads to: every chain check passes, and only
        # the state's digest shows that the replica is not the room.
        forged = {"chain": None}

        def alter(frame):
            kind = frame[4]
            if kind == 0x20:
                forged["chain"] = wire.decode_frame(frame, version=3)["chain"]
                return [frame]
            if kind == 0x22:
                msg = wire.decode_frame(frame, version=3)
                altered = wire.encode_frame(dict(msg, chain=None)).replace(b"hello", b"jello")
                forged["chain"] = wire.chain_next(forged["chain"], altered)
                return [wire.encode_frame(dict(wire.decode_frame(altered, version=2), chain=forged["chain"]))]
            if kind == 0x27:
                return [wire.encode_frame(dict(wire.decode_frame(frame, version=3), chain=forged["chain"]))]
            return [frame]
        done = self.session(alter, verify=True)
        self.assertFalse(self.state(done)["in_sync"], done.stdout + done.stderr)
        self.assertNotIn("its chain", done.stderr)
        self.assertIn("replica of board diverged: DIGEST v=3: the room's digest", done.stderr)

    def test_verify_is_not_sent_on_a_version_2_connection(self):
        hello = wire.encode_frame({"type": "HELLO", "magic": wire.MAGIC, "versions": [2],
                                   "client_name": b"old", "credentials": b""}).hex()
        done = run_snapcat(self.daemon.port, "raw %s\nsleep 0.5\nverify board\nping\n" % hello, "-n", "-q", "1")
        self.assertIn("WELCOME v=2", done.stdout, done.stdout + done.stderr)
        self.assertIn("verify needs protocol version 3; this connection speaks version 2: not sent", done.stderr)
        self.assertIn("PONG", done.stdout)
        self.assertEqual(done.returncode, 2)


if __name__ == "__main__":
    unittest.main()
