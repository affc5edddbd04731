"""A cluster node started while NATS cannot serve: it waits (telling systemd it is still
starting) instead of exiting, listens and says READY=1 only once it can serve, and gives up with
a clear message when --cluster-start-timeout passes. Real nats-servers (scripts/cluster, no
nodes) and the real `snapsyncd --cluster`, with a NOTIFY_SOCKET of the test's own.

The daemon comes from $SNAPSYNCD (scripts/test sets it) or .build/debug/snapsyncd. Every wait
is bounded.
"""

import json
import os
import re
import signal
import socket
import subprocess
import tempfile
import time
import unittest

from tests.cluster_client import Connection, write_ops
from tests.cluster_workload import ANSWER_WITHIN, RETRY_PAUSE, STORAGE_FAILURE
from tests.support import SCRIPTS, daemon_path

CLUSTER = os.path.join(SCRIPTS, "cluster")
# Long enough for a wait under way when the servers come back (libnats's timeouts on a paused
# server, then a backoff of at most 10 s) and JetStream's leader elections after it.
READY_WITHIN = 60.0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def accepts(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


class ClusterStartTests(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="snapsync-start-test-")
        self.dir = os.path.join(self.tmp.name, "cluster")
        self.node = None
        self.stopped = []
        self.notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.notify_path = os.path.join(self.tmp.name, "notify")
        self.notify.bind(self.notify_path)
        self.notices = []
        self.addCleanup(self.cleanup)

    def cleanup(self):
        if self.node and self.node.poll() is None:
            self.node.kill()
            self.node.wait(timeout=10)
        for pid in self.stopped:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        if os.path.exists(os.path.join(self.dir, "cluster.json")):
            self.cluster("down")
        self.notify.close()
        self.tmp.cleanup()

    def cluster(self, *args):
        return subprocess.run([CLUSTER, "--dir", self.dir, *args], capture_output=True, text=True, timeout=120,
                              env=dict(os.environ, SNAPSYNCD=daemon_path()))

    def servers_up(self):
        """Starts the 3 nats-servers (no node); returns the --cluster value and their state."""
        up = self.cluster("up", "--nodes", "0")
        self.assertEqual(up.returncode, 0, up.stdout + up.stderr)
        urls = re.search(r"^NATS_URLS=(\S+)$", up.stdout, re.M).group(1)
        with open(os.path.join(self.dir, "cluster.json")) as f:
            return urls, json.load(f)["servers"]

    def start_node(self, urls, *args):
        self.port = free_port()
        self.log_path = os.path.join(self.tmp.name, "snapsyncd.log")
        with open(self.log_path, "ab") as log:
            self.node = subprocess.Popen(
                [daemon_path(), "--host", "127.0.0.1", "--port", str(self.port), "--cluster", urls, *args],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
                env=dict(os.environ, NOTIFY_SOCKET=self.notify_path))

    def log(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def receive_notices(self, until=None, within=0.0):
        """Reads the datagrams sent so far (into self.notices), waiting up to `within` seconds for
        one that `until` accepts; returns whether one did."""
        deadline = time.monotonic() + within
        while True:
            if until and any(until(n) for n in self.notices):
                return True
            left = deadline - time.monotonic()
            self.notify.settimeout(max(left, 0.01))
            try:
                self.notices.append(self.notify.recv(4096).decode())
            except socket.timeout:
                if left <= 0:
                    return False

    def wait_for_log(self, pattern, within):
        deadline = time.monotonic() + within
        while not re.search(pattern, self.log()):
            self.assertIsNone(self.node.poll(), "the node exited:\n" + self.log())
            self.assertLess(time.monotonic(), deadline, "no %r in the log within %g s:\n%s" % (pattern, within, self.log()))
            time.sleep(0.2)

    def assert_waiting(self):
        """The node runs, has told systemd it waits for NATS, and neither listens nor says READY."""
        self.wait_for_log(r"NATS cannot serve yet; waiting for ", 45)
        # The first extension goes out once the start is 5 s old.
        self.assertTrue(self.receive_notices(lambda n: n.startswith("EXTEND_TIMEOUT_USEC="), within=20),
                        "no EXTEND_TIMEOUT_USEC: %r\n%s" % (self.notices, self.log()))
        [extend] = [n for n in self.notices if n.startswith("EXTEND_TIMEOUT_USEC=")][:1]
        self.assertIn("\nSTATUS=waiting for NATS: ", extend)
        # Up to the 300 s deadline and a minute beyond, not the recovery's 30 s.
        self.assertGreater(int(extend.split("\n")[0].split("=")[1]), 300_000_000)
        self.assertIsNone(self.node.poll(), "the node exited:\n" + self.log())
        self.assertFalse(any("READY=1" in n for n in self.notices), self.notices)
        self.assertFalse(accepts(self.port), "the node listens before it can serve")

    def assert_serves(self):
        """READY=1, then a client joins and its write is acknowledged."""
        self.assertTrue(self.receive_notices(lambda n: "READY=1" in n, within=READY_WITHIN),
                        "no READY=1 within %g s: %r\n%s" % (READY_WITHIN, self.notices, self.log()))
        conn = Connection(self.port, "start-test", [])
        try:
            conn.join(b"r")
            deadline = time.monotonic() + ANSWER_WITHIN
            while True:
                answer = conn.mutate(b"r", write_ops(b"w1", create=True), b"w1", None, ANSWER_WITHIN)
                if answer["type"] == "ACK":
                    break
                self.assertEqual(answer["code"], STORAGE_FAILURE, answer)
                self.assertLess(time.monotonic(), deadline, "the write was refused until the bound")
                time.sleep(RETRY_PAUSE)
        finally:
            conn.close()

    # -----------------------------------------------------------------------------------------

    def test_a_node_started_while_jetstream_has_no_quorum_waits_then_serves(self):
        # The failure seen: a node restarted while two of three servers were paused exited with
        # "js_AddStream stream snapsync-rooms: JetStream system temporarily unavailable".
        urls, servers = self.servers_up()
        for server in servers[1:]:
            os.kill(server["pid"], signal.SIGSTOP)
            self.stopped.append(server["pid"])
        self.start_node(urls)
        self.assert_waiting()
        for pid in self.stopped:
            os.kill(pid, signal.SIGCONT)
        self.assert_serves()

    def test_a_node_started_before_its_nats_servers_waits_then_serves(self):
        urls, _ = self.servers_up()
        done = self.cluster("kill", "n1", "n2", "n3")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.start_node(urls)
        self.assert_waiting()
        self.assertIn("No server available for connection", self.log())
        # The same servers, on their ports and stores, as a restart after a power cut.
        self.servers_up()
        self.assert_serves()

    def test_a_permanent_failure_ends_the_start_at_once(self):
        # tls:// URLs for servers that do not offer TLS: waiting would not change that.
        urls, _ = self.servers_up()
        self.start_node(urls.replace("nats://", "tls://"))
        try:
            status = self.node.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.fail("still running 20 s after a failure no wait can change:\n" + self.log())
        log = self.log()
        self.assertEqual(status, 1, log)
        self.assertIn("the server does not offer TLS", log)
        self.assertNotIn("NATS cannot serve yet", log)

    def test_the_start_deadline_ends_a_node_that_never_reaches_nats(self):
        self.start_node("nats://127.0.0.1:%d" % free_port(), "--cluster-start-timeout", "3")
        try:
            status = self.node.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.fail("still running 30 s after a 3 s --cluster-start-timeout:\n" + self.log())
        log = self.log()
        self.assertEqual(status, 1, log)
        self.assertIn("NATS cannot serve yet; waiting for stream snapsync-rooms", log)
        self.assertRegex(log, r"cluster start waiting for stream snapsync-rooms: NATS could not serve within "
                              r"--cluster-start-timeout 3 s; last failure: natsConnection_Connect")
        self.receive_notices()
        self.assertFalse(any("READY=1" in n for n in self.notices), self.notices)


if __name__ == "__main__":
    unittest.main()
