"""snapsyncd nodes sharing rooms through NATS JetStream, end to end: real nats-servers and
real `snapsyncd --cluster` nodes started by scripts/cluster, clients speaking the protocol
through snapcat_wire. Each test starts its own cluster and checks what the clients saw with the
history checker (tests/cluster_history.py).

The daemon comes from $SNAPSYNCD (scripts/test sets it) or .build/debug/snapsyncd. Every wait
is bounded (a hang fails the test), none is a timed assertion.
"""

import json
import os
import re
import subprocess
import tempfile
import time
import unittest
import urllib.request

from tests.cluster_client import Connection, ConnectionLost, NoAnswer, write_ops
from tests.cluster_history import check_room
from tests.cluster_workload import (ANSWER_WITHIN, RETRY_PAUSE, STORAGE_FAILURE, WRITE_WITHIN, Writer, first_write,
                                    read_everywhere, replay)
from tests.support import SCRIPTS, daemon_path, wire

CLUSTER = os.path.join(SCRIPTS, "cluster")
STREAM = "snapsync-rooms"
PROGRESS_WITHIN = 60.0
# DIFFs a node keeps per room: more than any test writes to one room, so a reader can resume from
# version 0 and see the whole history.
HISTORY = 8192


def wait_for(predicate, within, what):
    deadline = time.monotonic() + within
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("not within %g s: %s" % (within, what))
        time.sleep(0.1)


def stream_last_seq(server):
    """The last sequence of the rooms stream in this server's replica (None if it has none)."""
    url = "http://127.0.0.1:%d/jsz?streams=true" % server["monitor_port"]
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            body = json.load(r)
    except (OSError, ValueError):
        return None
    for account in body.get("account_details") or []:
        for stream in account.get("stream_detail") or []:
            if stream.get("name") == STREAM:
                return stream["state"]["last_seq"]
    return None


class ClusterNodesTests(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="snapsync-nodes-test-")
        self.dir = os.path.join(self.tmp.name, "cluster")
        self.writers = []
        self.connections = []
        self.addCleanup(self.cleanup)
        up = self.cluster("up", "--", "--history-count", str(HISTORY))
        self.assertEqual(up.returncode, 0, self.explain(up))
        nodes = re.search(r"^SNAPSYNC_NODES=(\S+)$", up.stdout, re.M).group(1)
        self.ports = [int(address.rsplit(":", 1)[1]) for address in nodes.split(",")]
        with open(os.path.join(self.dir, "cluster.json")) as f:
            self.state = json.load(f)
        self.assertEqual([n["port"] for n in self.state["nodes"]], self.ports)

    def cleanup(self):
        for w in self.writers:
            w.stop.set()
        for w in self.writers:
            w.join(timeout=WRITE_WITHIN)
        for c in self.connections:
            c.close()
        self.cluster("down")
        self.tmp.cleanup()

    def cluster(self, *args):
        return subprocess.run([CLUSTER, "--dir", self.dir, *args], capture_output=True, text=True, timeout=120,
                              env=dict(os.environ, SNAPSYNCD=daemon_path()))

    def cluster_ok(self, *args):
        done = self.cluster(*args)
        self.assertEqual(done.returncode, 0, self.explain(done))

    def explain(self, done):
        logs = []
        for name in ("s1", "s2", "s3"):
            path = os.path.join(self.dir, name, "snapsyncd.log")
            if os.path.exists(path):
                with open(path, errors="replace") as f:
                    logs.append("--- %s (last lines)\n%s" % (name, "".join(f.readlines()[-20:])))
        return "exit %d\nstdout:\n%s\nstderr:\n%s\n%s" % (done.returncode, done.stdout, done.stderr, "\n".join(logs))

    def connect(self, node, client, segments):
        c = Connection(self.ports[node], client, segments)
        self.connections.append(c)
        return c

    def writer(self, name, first, room, segments, count, **options):
        w = Writer(name, self.ports, first, room, segments, count, **options)
        self.writers.append(w)
        return w

    def finish(self, writers):
        for w in writers:
            w.join(timeout=3 * WRITE_WITHIN)
            self.assertFalse(w.is_alive(), "%s still writing" % w.name)
        errors = [e for w in writers for e in w.errors]
        self.assertEqual(errors, [], "\n".join("%s: %s" % (w.name, w.answers) for w in writers))

    def check(self, room, segments, outcomes, ports=None):
        """Reads `room` on every node (or `ports`), runs the history check and compares every node's
        SNAPSHOT with the log replayed from empty. Returns the log."""
        seen = max([v for s in segments for v, _, _ in s["diffs"]] + [0])
        snapshots = read_everywhere(ports or self.ports, room, segments, seen)
        log, problems = check_room(segments, outcomes)
        self.assertEqual(problems, [], "history of %s" % room)
        state = replay(log)
        for port, snap in zip(ports or self.ports, snapshots):
            self.assertEqual((snap["version"], snap["digest"]), (max(log), state.digest()),
                             "node %d's replica of %s" % (port, room))
            self.assertEqual(wire.Snapshot(snap["snapshot"]).digest(), snap["digest"])
        return log

    def write_until_acked(self, conn, room, write_id):
        """MUTATE with `write_id`, retried (same request) while the answer is storage_failure."""
        deadline = time.monotonic() + WRITE_WITHIN
        while True:
            answer = conn.mutate(room, write_ops(write_id), write_id, None, ANSWER_WITHIN)
            if answer["type"] == "ACK":
                return ("acked", answer["epoch"], answer["version"])
            self.assertEqual(wire.error_name(answer["code"]), "storage_failure", answer)
            self.assertLess(time.monotonic(), deadline, "write %r refused until the bound" % write_id)
            time.sleep(RETRY_PAUSE)

    # -----------------------------------------------------------------------------------------

    def test_scripts_cluster_runs_the_nodes(self):
        status = self.cluster("status")
        self.assertEqual(status.returncode, 0, self.explain(status))
        self.assertEqual(len(re.findall(r"^s\d +pid=\d+ +127\.0\.0\.1:\d+ +running ", status.stdout, re.M)), 3,
                         status.stdout)
        # up is idempotent: nothing restarted.
        again = self.cluster("up")
        self.assertIn("already up", again.stderr)
        self.assertEqual(self.pids(), [n["pid"] for n in self.state["nodes"]])
        # A killed node is seen as stopped, and up restarts it alone, on its port, with its arguments.
        self.cluster_ok("kill", "s1")
        status = self.cluster("status")
        self.assertNotEqual(status.returncode, 0)
        self.assertRegex(status.stdout, r"(?m)^s1 .* stopped$")
        back = self.cluster("up")
        self.assertEqual(back.returncode, 0, self.explain(back))
        self.assertIn("started s1 ", back.stderr)
        self.assertNotEqual(self.pids()[0], self.state["nodes"][0]["pid"])
        self.assertEqual(self.pids()[1:], [n["pid"] for n in self.state["nodes"][1:]])
        with open("/proc/%d/cmdline" % self.pids()[0], "rb") as f:
            argv = f.read().split(b"\0")
        self.assertEqual(argv[argv.index(b"--port") + 1], str(self.ports[0]).encode())
        self.assertIn(b"--cluster", argv)
        self.assertEqual(argv[argv.index(b"--history-count") + 1], str(HISTORY).encode())
        pids = self.pids()
        self.cluster_ok("down")
        self.assertFalse(any(os.path.exists("/proc/%d" % p) and not self.zombie(p) for p in pids))

    def pids(self):
        with open(os.path.join(self.dir, "cluster.json")) as f:
            return [n["pid"] for n in json.load(f)["nodes"]]

    @staticmethod
    def zombie(pid):
        try:
            with open("/proc/%d/stat" % pid) as f:
                return f.read().rsplit(")", 1)[1].split()[0] == "Z"
        except OSError:
            return True


    def test_concurrent_writes_through_three_nodes_make_one_history(self):
        room, segments = b"concurrent", []
        outcomes = first_write(self.ports, room, segments)
        writers = [self.writer("s%d%s" % (node + 1, k), node, room, segments, 12)
                   for node in range(3) for k in "ab"]
        for w in writers:
            w.start()
        self.finish(writers)
        for w in writers:
            outcomes.update(w.outcomes)
            self.assertEqual([j for _, j in w.joins], ["SNAPSHOT initial"], w.name)
        # A healthy cluster answers every write for good: acked, or refused by compare-and-set.
        finals = {o[0] if o[0] != "rejected" else o[1] for o in outcomes.values()}
        self.assertLessEqual(finals, {"acked", "version_mismatch"}, outcomes)
        log = self.check(room, segments, outcomes)
        self.assertEqual(len(log), sum(o[0] == "acked" for o in outcomes.values()))

    def test_requests_pipelined_behind_a_write_are_answered_in_order_a_turn_at_a_time(self):
        # A write waits for the log; the 20,000 PINGs sent with it wait behind it and are then
        # handled a turn (1,024) at a time, the rest handed back to the connection: every answer
        # comes, in order, and the half-close after them is acted on only once they are.
        import socket
        sock = socket.create_connection(("127.0.0.1", self.ports[0]), timeout=ANSWER_WITHIN)
        self.addCleanup(sock.close)
        hello = {"type": "HELLO", "magic": wire.MAGIC, "versions": [3], "client_name": b"flood", "credentials": b""}
        ops = [{"op": "append_sections", "elements": [{"id": b"s", "payload": b""}]}]
        frames = [hello, {"type": "MUTATE", "request_id": 1, "room": b"pipelined", "expected_version": None,
                          "write_id": b"", "ops": ops}]
        frames += [{"type": "PING", "nonce": n} for n in range(1, 20_001)]
        sock.sendall(b"".join(wire.encode_frame(f) for f in frames))
        sock.shutdown(socket.SHUT_WR)
        splitter, answers = wire.FrameSplitter(max_frame_bytes=1 << 24), []
        while True:
            data = sock.recv(1 << 16)
            if not data:
                break
            splitter.feed(data)
            answers += [wire.decode_frame(f, wire.SERVER_TO_CLIENT, version=3) for f in splitter.frames()]
        kinds = [a["type"] for a in answers]
        self.assertEqual(kinds[:2], ["WELCOME", "ACK"], answers[:3])
        self.assertEqual([a.get("nonce") for a in answers[2:]], list(range(1, 20_001)))

    def test_a_killed_node_s_clients_resume_on_another_and_nothing_acked_is_lost(self):
        room, segments = b"failover", []
        outcomes = first_write(self.ports, room, segments)
        # Writers go on until stopped: on loopback they may otherwise be done before the kill.
        writers = [self.writer("s%d%s" % (node + 1, k), node, room, segments, 100000)
                   for node in range(3) for k in "ab"]
        for w in writers:
            w.start()
        wait_for(lambda: sum(w.done for w in writers) >= 12, PROGRESS_WITHIN, "12 writes done")
        self.cluster_ok("kill", "s2")
        # Every writer of s2 has written again, so it has found its node gone and moved.
        done = [w.done for w in writers]
        wait_for(lambda: all(w.done >= d + 3 or not w.is_alive() for w, d in zip(writers, done)),
                 PROGRESS_WITHIN, "3 writes by each writer after the kill")
        for w in writers:
            w.stop.set()
        self.finish(writers)
        for w in writers:
            outcomes.update(w.outcomes)
        for w in writers[2:4]:
            # Its first JOIN on s2, then a resume from its position on another node.
            self.assertEqual(w.joins[0], (1, "SNAPSHOT initial"), w.name)
            self.assertGreater(len(w.joins), 1, "%s never lost its connection: %s" % (w.name, w.answers))
            for node, kind in w.joins[1:]:
                self.assertNotEqual(node % 3, 1, w.name)
                self.assertEqual(kind, "CATCHUP", w.name)
        self.check(room, segments, outcomes, [self.ports[0], self.ports[2]])
        # s2 back: it loads the room from the log and agrees with the others.
        self.cluster_ok("start", "s2")
        self.check(room, segments, outcomes)

    def test_nats_servers_lost_one_writes_go_on_two_writes_refused_joins_answered(self):
        room, segments = b"quorum", []
        outcomes = first_write(self.ports, room, segments)
        writer = self.connect(0, "writer", segments)
        watcher = self.connect(2, "watcher", segments)
        writer.join(room)
        watcher.join(room)
        for i in range(3):
            outcomes[b"w%d" % i] = self.write_until_acked(writer, room, b"w%d" % i)

        # One NATS server down: a quorum remains, writes go on.
        n1, n2, n3 = self.state["servers"]
        self.cluster_ok("kill", "n3")
        for i in range(3, 6):
            outcomes[b"w%d" % i] = self.write_until_acked(writer, room, b"w%d" % i)
        # Back: its replica of the stream catches up with the others'.
        self.cluster_ok("start", "n3")
        wait_for(lambda: stream_last_seq(n3) is not None and stream_last_seq(n3) == stream_last_seq(n1),
                 PROGRESS_WITHIN, "n3's replica of %s catching up" % STREAM)

        wait_for(lambda: watcher.position(room) == writer.position(room), PROGRESS_WITHIN,
                 "the watcher on s3 seeing w5")
        # Two down: no quorum, so writes are refused with storage_failure, never acked.
        self.cluster_ok("kill", "n1", "n2")
        for write_id in (b"nq0", b"nq1"):
            answer = writer.mutate(room, write_ops(write_id), write_id, None, ANSWER_WITHIN)
            self.assertEqual((answer["type"], wire.error_name(answer.get("code", 0))), ("REJECT", "storage_failure"),
                             answer)
            outcomes[write_id] = ("indeterminate",)
        # A room the node holds still answers JOIN, from its replica.
        held = writer.position(room)
        for node in (0, 2):
            joined = self.connect(node, "joiner", []).join(room)
            self.assertEqual((joined["type"], joined["epoch"], joined["version"]), ("SNAPSHOT",) + held)

        # The quorum back: the refused writes, retried with their ids, are applied once.
        self.cluster_ok("up")
        for write_id in (b"nq0", b"nq1", b"w6"):
            outcomes[write_id] = self.write_until_acked(writer, room, write_id)
        self.check(room, segments, outcomes)

    def test_repeated_kills_of_nodes_and_nats_servers_keep_one_history_per_room(self):
        rooms = {b"chaos-1": [], b"chaos-2": []}
        outcomes = {room: first_write(self.ports, room, segments) for room, segments in rooms.items()}
        # Paced, so the load lasts through every kill yet each room stays within the nodes' history
        # (--history-count, setUp), which the final CATCHUP from version 0 needs.
        writers = [self.writer("%s-s%d" % (room.decode(), node + 1), node, room, segments, 1000, cas_every=4,
                               pause=0.05)
                   for room, segments in rooms.items() for node in range(3)]
        for w in writers:
            w.start()

        def progress(step):
            target = sum(w.done for w in writers) + step
            wait_for(lambda: sum(w.done for w in writers) >= target or all(not w.is_alive() for w in writers),
                     PROGRESS_WITHIN, "%d more writes" % step)

        for victim in ("s2", "n1", "s3", "n2"):
            progress(6)
            self.cluster_ok("kill", victim)
            progress(6)
            self.cluster_ok("start", victim)
        for w in writers:
            w.stop.set()
        self.finish(writers)
        self.assertTrue(all(w.done < w.count for w in writers), "the writers ran out before the kills ended")
        for w in writers:
            outcomes[w.room].update(w.outcomes)
        for room, segments in rooms.items():
            self.check(room, segments, outcomes[room])


if __name__ == "__main__":
    unittest.main()
