"""scripts/cluster --nodes 0: the 3-server JetStream cluster comes up, keeps acking writes with one server
killed, refuses them with two stopped, de-duplicates a retried write, and goes down."""

import base64
import json
import os
import signal
import subprocess
import tempfile
import time
import unittest
import urllib.request

from tests.nats_client import Client, NATSError, Timeout
from tests.support import SCRIPTS

CLUSTER = os.path.join(SCRIPTS, "cluster")
STREAM = "snapsync-rooms"
SUBJECT = "snapsync.room.lobby"
# The wrong-last-sequence error of a publish with Nats-Expected-Last-Subject-Sequence.
WRONG_LAST_SEQUENCE = 10071
# nats-server 2.11 and later: a publish whose Nats-Msg-Id is still being stored from an earlier
# publish (one sent without a quorum, now being replicated) is answered with this, not held: the
# answer is not yet known, and the publisher asks again, as for no answer at all.
DUPLICATE_IN_PROCESS = 10158


def publish(client, seq, msg_id, timeout=2.0):
    """One write as snapsyncd will make it: the next entry of a room's subject, expected to follow
    `seq`, de-duplicated by `msg_id`. Returns the JetStream ack's JSON (with "error" if refused);
    raises Timeout when no server answers."""
    reply = client.request(SUBJECT, b"diff %s" % msg_id.encode(), timeout=timeout, headers={
        "Nats-Expected-Last-Subject-Sequence": seq, "Nats-Msg-Id": msg_id})
    if reply.status is not None:
        raise NATSError("publish %s: status %d" % (msg_id, reply.status))
    return reply.json()


def publish_until_answered(client, seq, msg_id, within=120.0):
    """Retries a publish with the same Msg-Id while the stream has no leader (no responders, or
    no answer: several seconds when the killed server led it), or while the same id is still
    being stored (`DUPLICATE_IN_PROCESS`), as a node does after a timeout.
    Returns JetStream's answer (an ack, or a refusal with "error"). `within` bounds a hang, it
    is no figure."""
    last = None
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            answer = publish(client, seq, msg_id)
            if answer.get("error", {}).get("err_code") != DUPLICATE_IN_PROCESS:
                return answer
            last = answer
        except (Timeout, NATSError) as e:
            last = e
        time.sleep(0.25)
    raise AssertionError("publish %s never answered; last: %s" % (msg_id, last))


def publish_until_acked(client, seq, msg_id):
    answer = publish_until_answered(client, seq, msg_id)
    if "error" in answer:
        raise AssertionError("publish %s refused: %s" % (msg_id, answer["error"]))
    return answer


def stored_msg_id(client, seq):
    """The Nats-Msg-Id header of the stream's message at `seq`."""
    message = client.js_api("STREAM.MSG.GET." + STREAM, {"seq": seq})["message"]
    headers = base64.b64decode(message.get("hdrs", "")).decode()
    for line in headers.split("\r\n")[1:]:
        if line.lower().startswith("nats-msg-id:"):
            return line.split(":", 1)[1].strip()
    return None


def pinned_nats_version():
    """SNAPSYNC_NATS_VERSION of scripts/deps.sh: the nats-server the project installs."""
    with open(os.path.join(SCRIPTS, "deps.sh")) as f:
        for line in f:
            if line.startswith("SNAPSYNC_NATS_VERSION="):
                return line.split("=", 1)[1].strip()
    raise AssertionError("no SNAPSYNC_NATS_VERSION in scripts/deps.sh")


def running(pid):
    """Whether pid is a live process (a zombie waiting for its reaper is not)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class ClusterTests(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="snapsync-cluster-test-")
        self.dir = os.path.join(self.tmp.name, "cluster")
        self.clients = []
        self.addCleanup(self.cleanup)

    def cleanup(self):
        for c in self.clients:
            c.close()
        self.cluster("down")
        self.tmp.cleanup()

    def cluster(self, command):
        # NATS only: these tests speak to JetStream directly, no snapsyncd node is involved.
        extra = ["--nodes", "0"] if command == "up" else []
        return subprocess.run([CLUSTER, command, "--dir", self.dir, *extra], capture_output=True,
                              text=True, timeout=60)

    def state(self):
        with open(os.path.join(self.dir, "cluster.json")) as f:
            return json.load(f)

    def connect(self, server):
        c = Client("127.0.0.1", server["client_port"])
        self.clients.append(c)
        return c

    def test_writes_survive_one_server_and_are_refused_without_quorum(self):
        up = self.cluster("up")
        self.assertEqual(up.returncode, 0, up.stderr)
        state = self.state()
        urls = ",".join("nats://127.0.0.1:%d" % s["client_port"] for s in state["servers"])
        self.assertIn("NATS_URLS=" + urls, up.stdout)
        status = self.cluster("status")
        self.assertEqual(status.returncode, 0, status.stdout)
        self.assertEqual(status.stdout.count(" running "), 3, status.stdout)
        # The pinned server, not one from PATH, fsyncing every write before its ack.
        for server in state["servers"]:
            with urllib.request.urlopen("http://127.0.0.1:%d/varz" % server["monitor_port"], timeout=10) as r:
                varz = json.load(r)
            self.assertEqual(varz["version"], pinned_nats_version(), server["name"])
            self.assertIs(varz["jetstream"]["config"]["sync_always"], True, server["name"])

        # up is idempotent: the same processes, nothing restarted.
        again = self.cluster("up")
        self.assertEqual(again.returncode, 0, again.stderr)
        self.assertIn("already up", again.stderr)
        self.assertEqual([s["pid"] for s in self.state()["servers"]], [s["pid"] for s in state["servers"]])

        n1, n2, n3 = state["servers"]
        client = self.connect(n1)
        created = client.js_api("STREAM.CREATE." + STREAM, {
            "name": STREAM, "subjects": ["snapsync.room.>"], "storage": "file", "num_replicas": 3,
            "duplicate_window": 120 * 10**9})
        self.assertEqual(created["config"]["num_replicas"], 3)

        first = publish_until_acked(client, 0, "w1")
        self.assertEqual(first["seq"], 1)
        # A second node that has not seen w1 expects the subject to be empty: refused.
        stale = publish(client, 0, "w2")
        self.assertEqual(stale["error"]["err_code"], WRONG_LAST_SEQUENCE, stale)
        # A retry of w1 (through any node) is recognised, not appended again.
        retry = publish(client, 0, "w1")
        self.assertEqual((retry["seq"], retry.get("duplicate")), (1, True), retry)

        # One server killed: a quorum (2 of 3) remains and writes are still acked.
        os.kill(n3["pid"], signal.SIGKILL)
        second = publish_until_acked(client, 1, "w2")
        self.assertEqual(second["seq"], 2)
        after_kill = self.cluster("status")
        self.assertNotEqual(after_kill.returncode, 0)
        self.assertIn("stopped", after_kill.stdout)

        # Two stopped: no quorum, so no ack (a timeout or an error, never an ack).
        os.kill(n2["pid"], signal.SIGKILL)
        for attempt in range(3):
            try:
                refused = publish(client, 2, "w3")
            except (Timeout, NATSError):
                continue
            self.assertIn("error", refused, "acked without a quorum: %s" % refused)

        # Both back (up restarts only what is down, on the same ports and stores): the stream has
        # a quorum again and w3, retried with its id, is in the log exactly once at seq 3. A
        # proposal that got no ack may still have been stored once the quorum came back; the
        # retry then got "wrong last sequence" here, not a duplicate ack (the new leader did not
        # know the id), so a node must catch up and find its write id in the log.
        back = self.cluster("up")
        self.assertEqual(back.returncode, 0, back.stderr)
        self.assertIn("started n2, n3", back.stderr)
        third = publish_until_answered(client, 2, "w3")
        if "error" in third:
            self.assertEqual(third["error"]["err_code"], WRONG_LAST_SEQUENCE, third)
        else:
            self.assertEqual(third["seq"], 3, third)
        info = client.js_api("STREAM.INFO." + STREAM)
        self.assertEqual((info["state"]["messages"], info["state"]["last_seq"]), (3, 3), info["state"])
        self.assertEqual([stored_msg_id(client, n) for n in (1, 2, 3)], ["w1", "w2", "w3"])

        pids = [s["pid"] for s in self.state()["servers"]]
        down = self.cluster("down")
        self.assertEqual(down.returncode, 0, down.stderr)
        self.assertFalse(os.path.exists(self.dir))
        self.assertEqual([p for p in pids if running(p)], [])


if __name__ == "__main__":
    unittest.main()
