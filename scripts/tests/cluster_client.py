"""A SnapSync connection for the cluster tests: requests answered by request id, and what
the connection saw of each room recorded as segments for the history checker
(tests/cluster_history.py). Speaks the protocol through snapcat_wire (the independent Python
codec), one reader thread per connection.

The tests' writes set section ``main``'s payload to their write id (``write_ops``), so the
write id of a DIFF can be read back from its ops (``write_id_of``): the DIFF frame itself has no
write id field.

A version 3 resume may be answered with a folded CATCHUP (PROTOCOL.md section 11.12): one DIFF at
the CATCHUP's to_version in place of the DIFFs of every version after from_version. That DIFF is
not one of the room's history, so it is not among the segment's ``diffs``: it is kept as the
segment's ``folded`` record, and the chain it carries (the room's at to_version, which the
connection takes, not computes) joins ``chains`` at its version. Its state digest is checked by
whoever holds the state at from_version (tests/cluster_history.py against the history replayed,
tests/nemesis.py's ``replica_of`` against a reader's replica).
"""

import socket
import threading
import time

from tests.support import wire

SECTION = b"main"


class ConnectionLost(Exception):
    """The connection ended (the node died, or closed it) before the answer came."""


class NoAnswer(Exception):
    """A live connection gave no answer within the wait's bound."""


def write_ops(write_id, create=False):
    """A test write: section `main`'s payload becomes the write id (`create`: the section is added)."""
    op = "append_sections" if create else "update_sections"
    return [{"op": op, "elements": [{"id": SECTION, "payload": write_id}]}]


def write_id_of(ops):
    """The write id a test write left in a DIFF's ops, or None for a DIFF no test write made."""
    for op in ops:
        if op["op"] in ("append_sections", "update_sections"):
            for element in op["elements"]:
                if element["id"] == SECTION:
                    return element["payload"]
    return None


def folded_end(segment):
    """The version a segment's folded catch-up brought it to, once its DIFF came; else None."""
    folded = segment.get("folded")
    return folded["version"] if folded and "version" in folded else None


class Connection:
    """One client connection to one node. `segments` (shared by the test) gets a segment per JOIN
    answer: {"client", "epoch", "base", "diffs": [(version, write_id, frame)], ...}; a folded
    CATCHUP's also has "folded": {"from", "to", "digest"} and, once its one DIFF came, "version",
    "write_id", "diff" (its frame without the chain) and "chain" (taken: also in "chains").
    `versions` is what HELLO offers (default: every version snapcat_wire speaks); [2, 1] gets a
    CATCHUP that replays every version, never a folded one."""

    def __init__(self, port, client, segments, host="127.0.0.1", timeout=5.0, versions=None):
        self.client = client
        self.segments = segments
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.settimeout(None)
        self.cond = threading.Condition()
        self.answers = {}
        self.current = {}           # room -> its segment, while a member
        self.left = []              # LEFT messages
        # Rooms a LEFT storage_failure ended: the node's copy may have left the room's one
        # history, so the replica is dropped and the next JOIN has no resume (PROTOCOL.md §8.4).
        self.resync = set()
        self.ended = {}             # room -> the segment a LEFT ended (its position stays known)
        self.welcome = None
        self.closed = None          # why the connection ended, once it has
        self.next_id = 1
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self._send({"type": "HELLO", "magic": wire.MAGIC, "versions": list(versions or wire.SUPPORTED_VERSIONS),
                    "client_name": b"cluster-test " + client.encode(), "credentials": b""})
        with self.cond:
            if not self.cond.wait_for(lambda: self.welcome or self.closed, timeout):
                self.close()
                raise NoAnswer("%s: no WELCOME within %g s" % (client, timeout))
            if self.closed:
                raise ConnectionLost("%s: handshake: %s" % (client, self.closed))

    def _send(self, msg):
        try:
            self.sock.sendall(wire.encode_frame(msg))
        except OSError as e:
            self._end("send: %s" % e)
            raise ConnectionLost("%s: %s" % (self.client, e))

    def _end(self, why):
        with self.cond:
            if not self.closed:
                self.closed = why
            self.cond.notify_all()

    def _read(self):
        splitter = wire.FrameSplitter()
        try:
            while True:
                data = self.sock.recv(1 << 16)
                if not data:
                    self._end("closed by the node")
                    return
                splitter.feed(data)
                for frame in splitter.frames():
                    # WELCOME reads the same in every version; the rest in the one it chose.
                    version = self.welcome["version"] if self.welcome else wire.PROTOCOL_VERSION
                    self._handle(frame, wire.decode_frame(frame, wire.SERVER_TO_CLIENT, version=version))
        except (OSError, wire.WireError) as e:
            self._end(str(e))

    def _handle(self, frame, msg):
        kind = msg["type"]
        if kind == "PING":
            self._send({"type": "PONG", "nonce": msg["nonce"]})
            return
        with self.cond:
            if kind == "WELCOME":
                self.welcome = msg
            elif kind == "ERROR":
                self.closed = "ERROR %s: %s" % (wire.error_name(msg["code"]), msg["message"].decode())
            elif kind in ("SNAPSHOT", "CATCHUP"):
                base = msg["version"] if kind == "SNAPSHOT" else msg["from_version"]
                segment = {"client": self.client, "epoch": msg["epoch"], "base": base, "diffs": [],
                           "answer": kind}
                # The room's chain (version 3): the answer's, then each DIFF's (cluster_history).
                segment["chains"] = [(base, msg["chain"])] if msg.get("chain") is not None else []
                if kind == "SNAPSHOT":
                    segment.update(reason=msg["reason"], digest=msg["digest"], snapshot=msg["snapshot"])
                elif msg.get("folded") is not None:
                    segment["folded"] = {"from": msg["from_version"], "to": msg["to_version"],
                                         "digest": msg["folded"]}
                self.segments.append(segment)
                self.current[msg["room"]] = segment
                self.answers[msg["request_id"]] = msg
            elif kind == "DIFF":
                segment = self.current.get(msg["room"])
                folded = segment.get("folded") if segment is not None else None
                if folded is not None and "version" not in folded and not segment["diffs"]:
                    # The folded CATCHUP's one DIFF: its chain is taken (the versions between were
                    # not sent); what it stands for is checked against the state digest.
                    folded.update(version=msg["version"], write_id=write_id_of(msg["ops"]),
                                  diff=wire.unchained_diff_frame(frame) if msg.get("chain") is not None else frame,
                                  chain=msg.get("chain"))
                    if msg.get("chain") is not None:
                        segment["chains"].append((msg["version"], msg["chain"]))
                elif segment is not None:
                    if msg.get("chain") is not None:
                        # Kept as versions 1 and 2 frame it, the bytes the chain is computed over.
                        frame = wire.unchained_diff_frame(frame)
                        segment["chains"].append((msg["version"], msg["chain"]))
                    segment["diffs"].append((msg["version"], write_id_of(msg["ops"]), frame))
            elif kind == "LEFT":
                segment = self.current.pop(msg["room"], None)
                if segment is not None:
                    self.ended[msg["room"]] = segment
                if msg["code"] == wire.ERROR_NAMES["storage_failure"]:
                    self.resync.add(msg["room"])
                self.left.append(msg)
            elif "request_id" in msg:
                self.answers[msg["request_id"]] = msg
            self.cond.notify_all()

    def request(self, msg, timeout=30.0):
        """Sends msg with a fresh request id and returns its answer (ACK, REJECT, SNAPSHOT, CATCHUP)."""
        with self.cond:
            rid = self.next_id
            self.next_id += 1
        self._send(dict(msg, request_id=rid))
        with self.cond:
            if not self.cond.wait_for(lambda: rid in self.answers or self.closed, timeout):
                raise NoAnswer("%s: no answer to %s %s within %g s" % (self.client, msg["type"],
                                                                       msg.get("room"), timeout))
            if rid not in self.answers:
                raise ConnectionLost("%s: %s" % (self.client, self.closed))
            return self.answers.pop(rid)

    def join(self, room, resume=None, timeout=30.0):
        """JOIN, and for a CATCHUP also its DIFFs: returns the answer once they are all here. On
        version 3 a resume carries the chain held at its position (PROTOCOL.md section 9; zero
        when not known), so that a view on another history is answered with a SNAPSHOT."""
        if resume is not None:
            chained = self.welcome["version"] >= wire.CHAIN_VERSION
            resume = dict(resume, chain=(resume.get("chain") or wire.ZERO_CHAIN) if chained else None)
        answer = self.request({"type": "JOIN", "room": room, "resume": resume}, timeout)
        if answer["type"] == "CATCHUP":
            with self.cond:
                done = self.cond.wait_for(lambda: self.position(room)[1] >= answer["to_version"]
                                          or self.closed, timeout)
                if self.position(room)[1] < answer["to_version"]:
                    if not done:
                        raise NoAnswer("%s: CATCHUP of %s to v=%d stopped at v=%d" % (
                            self.client, room, answer["to_version"], self.position(room)[1]))
                    raise ConnectionLost("%s: %s" % (self.client, self.closed))
        return answer

    def mutate(self, room, ops, write_id, expected_version=None, timeout=30.0):
        return self.request({"type": "MUTATE", "room": room, "expected_version": expected_version,
                             "write_id": write_id, "ops": ops}, timeout)

    def joined(self, room):
        with self.cond:
            return room in self.current

    def position(self, room):
        """(epoch, version) of this connection's view of the room (the last DIFF, else the answer),
        also after a LEFT ended the membership."""
        with self.cond:
            segment = self.current.get(room) or self.ended.get(room)
            if segment is None:
                return None, -1
            if segment["diffs"]:
                return segment["epoch"], segment["diffs"][-1][0]
            end = folded_end(segment)
            return segment["epoch"], segment["base"] if end is None else end

    def held_chain(self, room):
        """The room's chain at `position(room)`, when this connection was told it (after a folded
        catch-up, the one its DIFF carried, taken); else None."""
        with self.cond:
            segment = self.current.get(room) or self.ended.get(room)
            return segment["chains"][-1][1] if segment and segment["chains"] else None

    def close(self):
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        self.reader.join(timeout=5)


def connect_any(ports, first, client, segments, within=30.0, versions=None):
    """A connection to the first node of `ports` (from index `first`, round the list) that
    accepts one; retries for up to `within` seconds (a bound on a hang, no figure). `versions`:
    what HELLO offers (Connection)."""
    deadline = time.monotonic() + within
    errors = []
    while True:
        for k in range(len(ports)):
            index = (first + k) % len(ports)
            try:
                return index, Connection(ports[index], client, segments, versions=versions)
            except (OSError, ConnectionLost, NoAnswer) as e:
                errors.append("%d: %s" % (ports[index], e))
        if time.monotonic() > deadline:
            raise ConnectionLost("%s: no node accepted a connection within %g s: %s"
                                 % (client, within, errors[-len(ports):]))
        time.sleep(0.2)
