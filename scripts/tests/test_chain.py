"""The room's chain end to end (PROTOCOL.md section 9, version 3): snapcat against the real
snapsyncd through a relay that can alter what the server sends. A DIFF changed on the way still
decodes and applies, so only the chain shows that the replica no longer holds the room."""

import json
import socket
import threading
import unittest

from tests.support import Daemon, run_snapcat, wire


class Relay:
    """A TCP relay on an ephemeral loopback port to `port`, for one client connection: the client's
    bytes go through as they are, and each whole frame from the server through `alter(frame)`."""

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
                    client.sendall(self.alter(bytes(frame)))
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

    def session(self, alter):
        relay = Relay(self.daemon.port, alter)
        self.addCleanup(relay.close)
        return run_snapcat(relay.port, "join board\nappend-sections board main\n"
                           "append-items board to main card=hello\nappend-items board to main next\n"
                           "show board\n", "--json", "-q", "2")

    def test_diffs_as_sent_follow_the_chain(self):
        done = self.session(lambda frame: frame)
        state = json.loads(done.stdout.splitlines()[-1])
        self.assertTrue(state["in_sync"], done.stdout + done.stderr)
        self.assertEqual(state["version"], 3)
        self.assertNotIn("diverged", done.stderr)

    def test_a_diff_altered_on_the_way_is_a_divergence(self):
        # The DIFF of version 2 arrives with another payload for `card`: it decodes and applies.
        def alter(frame):
            return frame.replace(b"hello", b"jello") if frame[4] == 0x22 else frame
        done = self.session(alter)
        state = json.loads(done.stdout.splitlines()[-1])
        self.assertFalse(state["in_sync"], done.stdout + done.stderr)
        self.assertIn("replica of board diverged: DIFF v=2: its chain", done.stderr)


if __name__ == "__main__":
    unittest.main()
