"""The cluster tests' workload: writers that keep writing one room through whichever node
is up, fail over and resume like a client library, and record what they know of each write
for the history checker; and the final read of a room on every node.

A write's outcome (``Writer.outcomes[write_id]``) is what its client can know:
``("acked", epoch, version)``; ``("rejected", code)`` when every attempt got a typed REJECT
other than ``storage_failure``; ``("indeterminate",)`` when an attempt got ``storage_failure``
or its connection ended before the answer, and no later attempt was acked. A write is retried
with the same write id and the same request (so a retry of an applied write is answered with
its original version) until it is acked or refused, or its time is up.
"""

import threading
import time

from tests.cluster_client import ConnectionLost, NoAnswer, connect_any, write_ops
from tests.support import wire

STORAGE_FAILURE = wire.ERROR_NAMES["storage_failure"]
VERSION_MISMATCH = wire.ERROR_NAMES["version_mismatch"]
# Bounds on hangs, not figures: a write's retries (leader elections take seconds), one answer.
WRITE_WITHIN = 180.0
ANSWER_WITHIN = 30.0
RETRY_PAUSE = 0.2


class Writer(threading.Thread):
    """Writes `count` times to `room`, starting on node `first` of `ports`, `pause` seconds
    apart; every `cas_every`-th write is conditional on the version this writer has seen.
    Setting `stop` ends it after the write in progress. `ops(write_id)` makes a write's
    operations (default: section `main`'s payload becomes the write id). With `failover`, an
    attempt answered `storage_failure` is retried through the next node (a node cut from the
    NATS majority may refuse writes for as long as the partition lasts), as after a lost
    connection; without it, through the same node."""

    def __init__(self, name, ports, first, room, segments, count, cas_every=3, pause=0.0, ops=write_ops,
                 failover=False):
        super().__init__(name=name, daemon=True)
        self.client = name
        self.ports = ports
        self.node = first
        self.room = room
        self.segments = segments
        self.count = count
        self.cas_every = cas_every
        self.pause = pause
        self.make_ops = ops
        self.failover = failover
        self.conn = None
        self.outcomes = {}
        self.answers = []           # (write id, attempt's answer) for every attempt
        self.joins = []             # (node index, "SNAPSHOT initial"/"CATCHUP"/"SNAPSHOT resync")
        self.errors = []            # what a correct cluster never does
        self.stop = threading.Event()
        self.done = 0

    def run(self):
        try:
            self.reconnect()
            for i in range(self.count):
                if self.stop.is_set():
                    break
                self.write(b"%s-%d" % (self.client.encode(), i), cas=(i % self.cas_every == self.cas_every - 1))
                self.done += 1
                time.sleep(self.pause)
        except Exception as e:          # reported by the test through self.errors
            self.errors.append("%s: %s: %s" % (self.client, type(e).__name__, e))
        finally:
            if self.conn:
                self.conn.close()

    def reconnect(self):
        """Connects to a node (the current one, else the next ones) and (re)joins the room from
        the position held, as a client library does after a connection loss."""
        position = self.conn.position(self.room) if self.conn else (None, -1)
        chain = self.conn.held_chain(self.room) if self.conn else None
        if self.conn:
            self.conn.close()
            self.conn = None
        deadline = time.monotonic() + WRITE_WITHIN
        while True:
            self.node, conn = connect_any(self.ports, self.node, self.client, self.segments)
            resume = ({"epoch": position[0], "version": position[1], "chain": chain}
                      if position[0] is not None else None)
            try:
                answer = conn.join(self.room, resume, ANSWER_WITHIN)
            except ConnectionLost:
                conn.close()
                if time.monotonic() > deadline:
                    raise
                self.node += 1
                continue
            if answer["type"] == "REJECT":
                why = "JOIN %s on node %d: REJECT %s: %s" % (self.room, self.node, wire.error_name(answer["code"]),
                                                             answer["message"].decode())
                conn.close()
                # A node that cannot reach the log (an election going on) cannot load a room it
                # does not hold: another node, or this one later, can.
                if answer["code"] != STORAGE_FAILURE or time.monotonic() > deadline:
                    raise AssertionError(why)
                self.joins.append((self.node, "REJECT storage_failure"))
                self.node += 1
                time.sleep(RETRY_PAUSE)
                continue
            self.conn = conn
            kind = answer["type"] if answer["type"] != "SNAPSHOT" else "SNAPSHOT " + answer["reason"]
            self.joins.append((self.node, kind))
            return

    def rejoin(self):
        """JOIN again on the same connection from the position held."""
        epoch, version = self.conn.position(self.room)
        try:
            answer = self.conn.join(self.room, {"epoch": epoch, "version": version}, ANSWER_WITHIN)
        except ConnectionLost:
            self.node += 1
            self.reconnect()
            return
        kind = answer["type"] if answer["type"] != "SNAPSHOT" else "SNAPSHOT " + answer["reason"]
        self.joins.append((self.node, "after LEFT: " + kind))
        if answer["type"] == "REJECT":
            self.node += 1
            self.reconnect()

    def write(self, write_id, cas=False):
        if not self.conn.joined(self.room):
            # LEFT storage_failure: the node could not bring this member up to date; the room
            # goes on, and a JOIN from the position held resumes it (PROTOCOL.md §8.4).
            self.rejoin()
        expected = self.conn.position(self.room)[1] if cas else None
        ops = self.make_ops(write_id)
        indeterminate = False
        deadline = time.monotonic() + WRITE_WITHIN
        while True:
            try:
                answer = self.conn.mutate(self.room, ops, write_id, expected, ANSWER_WITHIN)
            except ConnectionLost:
                self.answers.append((write_id, "connection lost"))
                indeterminate = True
                self.node += 1
                self.reconnect()
                continue
            except NoAnswer as e:
                self.errors.append(str(e))
                self.outcomes[write_id] = ("indeterminate",)
                return
            if answer["type"] == "ACK":
                self.answers.append((write_id, "ACK v=%d" % answer["version"]))
                self.outcomes[write_id] = ("acked", answer["epoch"], answer["version"])
                return
            code = answer["code"]
            self.answers.append((write_id, "REJECT %s" % wire.error_name(code)))
            if code == STORAGE_FAILURE:
                indeterminate = True
                if time.monotonic() > deadline:
                    self.outcomes[write_id] = ("indeterminate",)
                    return
                time.sleep(RETRY_PAUSE)
                if self.failover:
                    self.node += 1
                    self.reconnect()
                continue
            if code != VERSION_MISMATCH or expected is None:
                self.errors.append("%s: write %r: REJECT %s: %s" % (self.client, write_id, wire.error_name(code),
                                                                    answer["message"].decode()))
            self.outcomes[write_id] = ("indeterminate",) if indeterminate else ("rejected", wire.error_name(code))
            return


def first_write(ports, room, segments):
    """Creates the room's section `main` (write id b"setup") through node 0; returns its outcome."""
    _, conn = connect_any(ports, 0, "setup", segments)
    try:
        deadline = time.monotonic() + WRITE_WITHIN
        while True:
            answer = conn.mutate(room, write_ops(b"setup", create=True), b"setup", None, ANSWER_WITHIN)
            if answer["type"] == "ACK":
                return {b"setup": ("acked", answer["epoch"], answer["version"])}
            if answer["code"] != STORAGE_FAILURE or time.monotonic() > deadline:
                raise AssertionError("the first write of %s: REJECT %s: %s" % (
                    room, wire.error_name(answer["code"]), answer["message"].decode()))
            time.sleep(RETRY_PAUSE)
    finally:
        conn.close()


def read_everywhere(ports, room, segments, at_least, within=120.0):
    """Every node's view of `room` once they agree: waits (bounded) until a fresh JOIN on each
    node answers the same (epoch, version), at least `at_least`; then a JOIN resuming from
    (epoch, 0) on each node, on protocol version 2, whose CATCHUP and DIFFs go to `segments` as
    "reader-<port>".
    Returns the fresh SNAPSHOTs, one per node, and raises AssertionError if they never agree."""
    deadline = time.monotonic() + within
    while True:
        snapshots = []
        for port in ports:
            _, conn = connect_any([port], 0, "probe-%d" % port, [])
            try:
                snapshots.append(conn.join(room, None, ANSWER_WITHIN))
            finally:
                conn.close()
        positions = {(s["type"], s.get("epoch"), s.get("version")) for s in snapshots}
        if len(positions) == 1 and snapshots[0]["type"] == "SNAPSHOT" and snapshots[0]["version"] >= at_least:
            break
        if time.monotonic() > deadline:
            raise AssertionError("the nodes never agreed on %s within %g s: %s" % (
                room, within, [(p, s["type"], s.get("epoch"), s.get("version")) for p, s in zip(ports, snapshots)]))
        time.sleep(RETRY_PAUSE)
    epoch = snapshots[0]["epoch"]
    for port in ports:
        # Version 2: its resumes are always replayed, one DIFF per version (a version 3 one
        # may be folded into one DIFF, PROTOCOL.md §11.12), so this read sees every version.
        _, conn = connect_any([port], 0, "reader-%d" % port, segments, versions=[2, 1])
        try:
            answer = conn.join(room, {"epoch": epoch, "version": 0}, ANSWER_WITHIN)
            if answer["type"] != "CATCHUP":
                raise AssertionError("JOIN %s since %d:0 on %d: %s, not CATCHUP" % (room, epoch, port, answer["type"]))
        finally:
            conn.close()
    return snapshots


def replay(log):
    """The snapshot the room's log builds from empty (version -> (write id, DIFF frame))."""
    snapshot = wire.Snapshot()
    for version in sorted(log):
        snapshot = snapshot.apply_batch(wire.decode_frame(log[version][1], wire.SERVER_TO_CLIENT)["ops"])
    return snapshot
