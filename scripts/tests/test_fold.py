"""The folded CATCHUP (PROTOCOL.md section 11.12, version 3): a resume answered with one DIFF at the
CATCHUP's to_version, whose chain the replica takes and whose result it checks against the
CATCHUP's state digest.

Without a daemon: snapcat_wire's layout of the `folded` field in each version, snapcat's session
(transcript, digest check, the chain taken and followed), the cluster tests' history checker and
a nemesis reader's replica on histories with folded catch-ups. Against the real snapsyncd: a
version 3 resume after 300 writes is folded (the python cluster client and the snapcat tool),
`--no-fold-resumes` replays, a version 2 resume has no field, a folded DIFF altered on the way is
caught by the digest and the replica joins afresh, and a resume whose chain is forged is a resync.
"""

import hashlib
import socket
import types
import unittest

from tests.cluster_client import SECTION, Connection, write_id_of
from tests.cluster_history import check_room
from tests.nemesis import replica_of
from tests.support import Daemon, Interactive, snapcat, wire
from tests.test_chain import Relay
from tests.test_commands import CapturedOutput

E = 5
ROOM = b"board"
WRITES = 300
ITEMS = (b"a", b"b", b"c", b"d")


def el(i, p=b""):
    return {"id": i, "payload": p}


def setup_ops():
    """Version 1 of the test room: section `main` (payload: the write id, as cluster_client's
    writes keep it) holding the items a, b, c, d."""
    return [{"op": "append_sections", "elements": [el(SECTION, b"setup")]},
            {"op": "append_items", "section": SECTION, "elements": [el(i, b"start") for i in ITEMS]}]


def write_ops(i):
    """Write i of the workload: section main's payload becomes its write id, then mostly an update
    of one of a few items, every 50 writes an insert, a delete and a move."""
    wid = b"w%d" % i
    ops = [{"op": "update_sections", "elements": [el(SECTION, wid)]}]
    if i % 50 == 10:
        ops.append({"op": "insert_items", "placement": {"side": "after", "anchor": b"a"},
                    "elements": [el(b"x%d" % i, b"new %d" % i)]})
    elif i % 50 == 30:
        ops.append({"op": "delete_items", "ids": [b"x%d" % (i - 20)]})
    elif i % 50 == 40:
        ops.append({"op": "move_item", "id": b"b",
                    "placement": {"side": "after", "anchor": b"d"} if i // 50 % 2 == 0
                    else {"side": "before", "anchor": b"a"}})
    else:
        ops.append({"op": "update_items", "kind": "reload", "elements": [el(ITEMS[i % 4], b"value %d" % i)]})
    return wid, ops


class Writer:
    """A version 3 member of the room that writes through the python cluster client, waiting for
    each ACK; its segment records every DIFF (the room's whole history for the checker)."""

    def __init__(self, port, segments):
        self.conn = Connection(port, "writer", segments)
        self.writes = {}
        answer = self.conn.join(ROOM)
        assert answer["type"] == "SNAPSHOT", answer
        self.epoch = answer["epoch"]

    def write(self, write_id, ops):
        answer = self.conn.mutate(ROOM, ops, write_id)
        assert answer["type"] == "ACK", answer
        self.writes[write_id] = ("acked", answer["epoch"], answer["version"])
        return answer["version"]

    def setup(self):
        return self.write(b"setup", setup_ops())

    def workload(self, start=0, count=WRITES):
        for i in range(start, start + count):
            self.write(*write_ops(i))
        return self.conn.position(ROOM)[1]

    def close(self):
        self.conn.close()


class RawClient:
    """One connection speaking frames as they are: for the exact bytes of an answer."""

    def __init__(self, port, versions):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.splitter = wire.FrameSplitter()
        self.version = wire.PROTOCOL_VERSION
        self.send({"type": "HELLO", "magic": wire.MAGIC, "versions": versions, "client_name": b"fold-test",
                   "credentials": b""})
        _, welcome = self.next()
        assert welcome["type"] == "WELCOME", welcome
        self.version = welcome["version"]

    def send(self, msg):
        self.sock.sendall(wire.encode_frame(msg))

    def next(self):
        """(frame, message) of the next frame other than PING (answered)."""
        while True:
            for frame in self.splitter.frames():
                msg = wire.decode_frame(frame, wire.SERVER_TO_CLIENT, version=self.version)
                if msg["type"] == "PING":
                    self.send({"type": "PONG", "nonce": msg["nonce"]})
                    continue
                return frame, msg
            data = self.sock.recv(1 << 16)
            if not data:
                raise AssertionError("the daemon closed the connection")
            self.splitter.feed(data)

    def join(self, resume=None, request_id=1):
        """The answer to a JOIN and, for a CATCHUP, the DIFF frames it announced: (answer, [(frame, DIFF)])."""
        self.send({"type": "JOIN", "request_id": request_id, "room": ROOM, "resume": resume})
        frame, answer = self.next()
        diffs = []
        if answer["type"] == "CATCHUP":
            count = 1 if answer.get("folded") is not None else answer["to_version"] - answer["from_version"]
            diffs = [self.next() for _ in range(count)]
        return (frame, answer), diffs

    def close(self):
        self.sock.close()


def fresh(port):
    """A fresh JOIN's SNAPSHOT of the room (version 3: with its chain)."""
    client = RawClient(port, [3])
    try:
        (_, snap), _ = client.join()
        assert snap["type"] == "SNAPSHOT", snap
        return snap
    finally:
        client.close()


def folded_diff_altered(frame):
    """A version 3 DIFF frame with one byte of one payload changed (its chain as it was)."""
    msg = wire.decode_frame(frame, version=3)
    for op in msg["ops"]:
        for e in op.get("elements", []):
            if e["payload"]:
                e["payload"] = e["payload"][:-1] + bytes([e["payload"][-1] ^ 0x01])
                altered = wire.encode_frame(msg)
                assert len(altered) == len(frame) and sum(x != y for x, y in zip(altered, frame)) == 1
                return altered
    raise AssertionError("the folded DIFF has no payload to alter: %r" % (msg["ops"],))


# ---------------------------------------------------------------------------------------------
# Without a daemon

CATCHUP = {"type": "CATCHUP", "request_id": 5, "room": b"todo", "epoch": 2246800662264969608,
           "from_version": 4, "to_version": 9}
V2_CATCHUP = "00000012210504746f646f88f3a9dbc5a98f971f0409"


class WireTests(unittest.TestCase):
    def test_version_3_has_the_flag_and_the_digest(self):
        replay = wire.encode_frame(dict(CATCHUP, folded=None))
        self.assertEqual(replay.hex(), "00000013210504746f646f88f3a9dbc5a98f971f040900")
        self.assertEqual(wire.decode_frame(replay, version=3), dict(CATCHUP, folded=None))
        digest = bytes(range(32))
        folded = wire.encode_frame(dict(CATCHUP, folded=digest))
        self.assertEqual(folded.hex(), "00000033210504746f646f88f3a9dbc5a98f971f040901" + digest.hex())
        self.assertEqual(wire.decode_frame(folded, version=3), dict(CATCHUP, folded=digest))

    def test_versions_1_and_2_have_no_field(self):
        frame = wire.encode_frame(CATCHUP)
        self.assertEqual(frame.hex(), V2_CATCHUP)
        for version in (1, 2):
            self.assertEqual(wire.decode_frame(frame, version=version), CATCHUP)
            self.assertNotIn("folded", wire.message_to_json(wire.decode_frame(frame, version=version)))
        # Read as version 3 it lacks the flag; a version 3 frame read as version 2 has bytes left.
        with self.assertRaisesRegex(wire.WireError, "folded presence flag runs past the end"):
            wire.decode_frame(frame, version=3)
        with self.assertRaisesRegex(wire.WireError, "1 bytes left over after the last field of CATCHUP"):
            wire.decode_frame(wire.encode_frame(dict(CATCHUP, folded=None)), version=2)

    def test_a_bad_flag_or_a_short_digest_is_malformed(self):
        body = bytes.fromhex(V2_CATCHUP)[4:]
        for tail, error in ((b"\x02", "folded presence flag is 0x02"), (b"\xff", "folded presence flag is 0xff"),
                            (b"\x01" + bytes(31), "folded runs past the end"),
                            (b"\x00\x00", "1 bytes left over"), (b"\x01" + bytes(33), "1 bytes left over")):
            with self.subTest(tail=tail.hex()):
                with self.assertRaises(wire.WireError) as caught:
                    wire.decode_body(body + tail, wire.SERVER_TO_CLIENT, version=3)
                self.assertEqual(caught.exception.name, "malformed_frame")
                self.assertIn(error, caught.exception.message)

    def test_the_json_form(self):
        digest = hashlib.sha256(b"x").digest()
        for msg, folded in ((dict(CATCHUP, folded=None), None), (dict(CATCHUP, folded=digest), {"hex": digest.hex()})):
            j = wire.message_to_json(msg)
            self.assertEqual(j["folded"], folded)
            self.assertEqual(wire.message_from_json(j), msg)
        self.assertEqual(wire.message_from_json(wire.message_to_json(CATCHUP)), CATCHUP)
        self.assertEqual(wire.encode_frame(wire.message_from_json(wire.message_to_json(CATCHUP))).hex(), V2_CATCHUP)


def frame_of(msg):
    return wire.encode_frame(msg)


class SessionTests(unittest.TestCase):
    """snapcat's session fed a version 3 server's frames, without a socket."""

    def setUp(self):
        self.out = CapturedOutput()
        self.s = snapcat.Session(None, types.SimpleNamespace(max_frame=wire.DEFAULT_MAX_FRAME_BYTES, no_hello=False),
                                 self.out)
        self.receive({"type": "WELCOME", "version": 3, "session_id": 1, "server_name": b"t", "limits": []})
        self.start = wire.Snapshot(
            [{"id": b"main", "payload": b"", "items": [el(b"a", b"1"), el(b"b", b"2")]}])
        self.chain1 = hashlib.sha256(b"chain at 1").digest()
        self.s.parser.next_id = 2
        self.s.send({"type": "JOIN", "request_id": 1, "room": b"r", "resume": None})
        self.receive({"type": "SNAPSHOT", "request_id": 1, "room": b"r", "epoch": E, "version": 1,
                      "reason": "initial", "digest": self.start.digest(), "chain": self.chain1,
                      "snapshot": self.start.to_list()})
        # Versions 2 to 4 changed a three times and deleted b; the folded DIFF says so at once.
        self.ops = [{"op": "delete_items", "ids": [b"b"]},
                    {"op": "update_items", "kind": "reload", "elements": [el(b"a", b"4")]}]
        self.end = self.start.apply_batch(self.ops)
        self.chain4 = hashlib.sha256(b"chain at 4").digest()

    def receive(self, msg):
        self.s.receive(frame_of(msg))

    def resume(self, digest):
        [(_, join)] = [a for a in self.s.parser.parse("join r resume") if a[0] == "send"]
        self.s.send(join)
        self.assertEqual(join["resume"], {"epoch": E, "version": 1, "chain": self.chain1})
        self.receive({"type": "CATCHUP", "request_id": 2, "room": b"r", "epoch": E, "from_version": 1,
                      "to_version": 4, "folded": digest})
        self.assertIn(2, self.s.pending)
        self.receive({"type": "DIFF", "room": b"r", "epoch": E, "version": 4, "ops": self.ops, "chain": self.chain4})
        return self.s.replicas[b"r"]

    def test_a_folded_catchup_applies_its_diff_checks_the_digest_and_takes_the_chain(self):
        rep = self.resume(self.end.digest())
        self.assertEqual(self.out.lines[-2:], [
            "CATCHUP #2 r e=5 v=1..4 folded digest=%s" % self.end.digest().hex()[:16],
            "DIFF r e=5 v=4 delete_items [b]; update_items reload [a=\"4\"]"])
        self.assertTrue(rep.in_sync, rep.problem)
        self.assertEqual((rep.version, rep.chain, rep.snapshot), (4, self.chain4, self.end))
        self.assertEqual(self.s.pending, {})
        self.assertEqual(self.s.catchups, {})
        self.assertEqual(self.out.notes, [])
        # The next DIFF is live, chained from the chain taken.
        live = frame_of({"type": "DIFF", "room": b"r", "epoch": E, "version": 5,
                         "ops": [{"op": "append_items", "section": None, "elements": [el(b"c")]}]})
        chain5 = wire.chain_next(self.chain4, live)
        self.s.receive(frame_of(dict(wire.decode_frame(live), chain=chain5)))
        self.assertTrue(rep.in_sync, rep.problem)
        self.assertEqual((rep.version, rep.chain, rep.snapshot.item_count()), (5, chain5, 2))
        # One chained from anything else is a divergence, as ever.
        self.receive({"type": "DIFF", "room": b"r", "epoch": E, "version": 6,
                      "ops": [{"op": "append_items", "section": None, "elements": [el(b"d")]}], "chain": self.chain4})
        self.assertFalse(rep.in_sync)
        self.assertIn("its chain", rep.problem)

    def test_a_folded_diff_whose_result_is_not_the_digest_is_a_divergence_and_joins_afresh(self):
        rep = self.resume(hashlib.sha256(b"another state").digest())
        self.assertFalse(rep.in_sync)
        self.assertEqual(self.out.notes, ["warning: replica of r diverged: folded CATCHUP v=1..4: the replica's digest "
                                          "after its DIFF is %s, the room's %s" % (
                                              self.end.digest().hex()[:16],
                                              hashlib.sha256(b"another state").digest().hex()[:16])])
        self.assertEqual((rep.version, rep.chain), (4, self.chain4))
        self.assertEqual(self.s.pending, {})
        # `join r resume` from a replica not in sync is a JOIN without resume.
        actions = self.s.parser.parse("join r resume")
        self.assertEqual([a[0] for a in actions], ["note", "send"])
        self.assertIn("not in sync", actions[0][1])
        self.assertIsNone(actions[1][1]["resume"])

    def test_a_folded_diff_at_another_version_is_out_of_sync(self):
        self.s.parser.next_id = 3
        self.receive({"type": "CATCHUP", "request_id": 2, "room": b"r", "epoch": E, "from_version": 1,
                      "to_version": 4, "folded": self.end.digest()})
        self.receive({"type": "DIFF", "room": b"r", "epoch": E, "version": 2, "ops": self.ops, "chain": self.chain4})
        rep = self.s.replicas[b"r"]
        self.assertFalse(rep.in_sync)
        self.assertEqual(rep.problem, "DIFF e=5 v=2 is not the folded CATCHUP's e=5 v=4")

    def test_a_replayed_catchup_reads_as_it_always_has(self):
        diff = frame_of({"type": "DIFF", "room": b"r", "epoch": E, "version": 2, "ops": self.ops})
        self.receive({"type": "CATCHUP", "request_id": 2, "room": b"r", "epoch": E, "from_version": 1,
                      "to_version": 2, "folded": None})
        self.assertEqual(self.out.lines[-1], "CATCHUP #2 r e=5 v=1..2")
        chain2 = wire.chain_next(self.chain1, diff)
        self.s.receive(frame_of(dict(wire.decode_frame(diff), chain=chain2)))
        rep = self.s.replicas[b"r"]
        self.assertTrue(rep.in_sync, rep.problem)
        self.assertEqual((rep.version, rep.chain, rep.snapshot), (2, chain2, self.end))


def diff_frame(version, ops):
    """A DIFF frame as versions 1 and 2 encode it (the bytes a chain is computed over)."""
    return wire.encode_frame({"type": "DIFF", "room": ROOM, "epoch": E, "version": version, "ops": ops})


class HistoryTests(unittest.TestCase):
    """cluster_history.check_room and nemesis.replica_of on a history with folded catch-ups."""

    def setUp(self):
        # The room's history: v1 the setup, then 8 writes; its chain and state at each version.
        self.log = {1: (b"setup", diff_frame(1, setup_ops()))}
        for i in range(8):
            wid, ops = write_ops(10 + i)    # 10 inserts x10, the rest updates
            self.log[2 + i] = (wid, diff_frame(2 + i, ops))
        self.writes = {w: ("acked", E, v) for v, (w, _) in self.log.items()}
        self.chain = {0: wire.chain_start(E)}
        self.state = {0: wire.Snapshot()}
        for v in sorted(self.log):
            self.chain[v] = wire.chain_next(self.chain[v - 1], self.log[v][1])
            self.state[v] = self.state[v - 1].apply_batch(wire.decode_frame(self.log[v][1])["ops"])

    def live(self, client, base, top, snapshot=False):
        s = {"client": client, "answer": "SNAPSHOT" if snapshot else "CATCHUP", "epoch": E, "base": base,
             "diffs": [(v, self.log[v][0], self.log[v][1]) for v in range(base + 1, top + 1)],
             "chains": ([(base, self.chain[base])] if snapshot else []) +
                       [(v, self.chain[v]) for v in range(base + 1, top + 1)]}
        if snapshot:
            s.update(reason="initial", digest=self.state[base].digest(), snapshot=self.state[base].to_list())
        return s

    def folded(self, client, base, to, top, digest=None, ops=None, version=None, chain=None):
        """A segment answered by a folded CATCHUP from base to `to`, then live DIFFs to top."""
        s = self.live(client, to, top)
        s.update(answer="CATCHUP", base=base)
        if ops is None:
            # Not the smallest fold, but one: the room at `to` built again from nothing.
            main = self.state[to].sections[0]
            ops = [{"op": "delete_all_items"},
                   {"op": "append_sections", "elements": [el(main["id"], main["payload"])]},
                   {"op": "append_items", "section": None,
                    "elements": [el(i["id"], i["payload"]) for i in main["items"]]}]
        fold_version = to if version is None else version
        taken = self.chain[to] if chain is None else chain
        s["folded"] = {"from": base, "to": to, "digest": self.state[to].digest() if digest is None else digest,
                       "version": fold_version, "write_id": write_id_of(ops),
                       "diff": diff_frame(fold_version, ops), "chain": taken}
        s["chains"] = [(fold_version, taken)] + s["chains"]
        return s

    def test_the_fold_ops_are_right(self):
        s = self.folded("r", 1, 6, 9)
        self.assertEqual(self.state[1].apply_batch(wire.decode_frame(s["folded"]["diff"])["ops"]), self.state[6])

    def test_a_folded_catchup_is_not_a_gap_a_fork_nor_a_broken_chain(self):
        segments = [self.live("writer", 0, 9, snapshot=True), self.live("r", 1, 1, snapshot=True),
                    self.folded("r", 1, 6, 9)]
        log, problems = check_room(segments, self.writes)
        self.assertEqual(problems, [])
        self.assertEqual(log, self.log)
        epoch, version, state, problems = replica_of(segments, "r")
        self.assertEqual(problems, [])
        self.assertEqual((epoch, version, state), (E, 9, self.state[9]))

    def test_versions_only_folded_over_are_unseen_not_lost(self):
        # r's fold went over v2 to v6, which no one saw one by one: the history does not cover them.
        segments = [self.live("writer", 0, 1, snapshot=True), self.live("r", 1, 1, snapshot=True),
                    self.folded("r", 1, 6, 9)]
        self.assertEqual(check_room(segments, self.writes)[1], [
            "versions never seen by any client: [2, 3, 4, 5, 6] (5 of them only inside folded catch-ups, which "
            "do not show them one by one: read the history on a version 2 connection)"])
        # A version neither folded over nor seen: its acked write is lost as well.
        segments = [self.live("writer", 0, 5, snapshot=True), self.live("r", 1, 1, snapshot=True),
                    self.folded("r", 1, 5, 5), self.live("s", 6, 9)]
        self.assertEqual(check_room(segments, self.writes)[1], ["versions never seen by any client: [6]",
                                                                "write b'w14' acked at v=6 is not in the room (lost)"])

    def test_a_folded_diff_that_is_not_the_room_is_found(self):
        wrong = [{"op": "update_items", "kind": "reload", "elements": [el(b"a", b"not the room's")]}]
        segments = [self.live("writer", 0, 9, snapshot=True), self.live("r", 1, 1, snapshot=True),
                    self.folded("r", 1, 6, 9, ops=wrong)]
        problems = check_room(segments, self.writes)[1]
        self.assertEqual(len(problems), 1, problems)
        self.assertRegex(problems[0], r"^r: the folded DIFF v=1\.\.6 applied to the room at v=1 gives digest "
                                      r"[0-9a-f]{16}, not the CATCHUP's [0-9a-f]{16}$")
        self.assertRegex(replica_of(segments, "r")[3][0],
                         r"^r: after the folded DIFF 5:1\.\.6 its replica's digest is ")
        # A digest that is not the room's at `to` (and that the DIFF does not give either).
        segments[2] = self.folded("r", 1, 6, 9, digest=hashlib.sha256(b"x").digest())
        self.assertEqual(len(check_room(segments, self.writes)[1]), 2)

    def test_a_taken_chain_that_is_another_history_s_is_found(self):
        other = hashlib.sha256(b"another history").digest()
        segments = [self.live("writer", 0, 9, snapshot=True), self.live("r", 1, 1, snapshot=True),
                    self.folded("r", 1, 6, 6, chain=other)]
        self.assertEqual(check_room(segments, self.writes)[1], [
            "two chains at v=6: writer saw %s, r saw %s" % (self.chain[6].hex()[:16], other.hex()[:16])])
        # Alone at its version, it must still be the hash of the chain before and that version's DIFF.
        # (s: a version 2 connection, whose DIFFs carry no chain)
        segments = [self.live("writer", 0, 5, snapshot=True), dict(self.live("s", 5, 9), chains=[]),
                    self.folded("r", 1, 6, 9, chain=other)]
        self.assertEqual(check_room(segments, self.writes)[1], [
            "the chain at v=6 is not the hash of v=5's chain and v=6's DIFF",
            "the chain at v=7 is not the hash of v=6's chain and v=7's DIFF"])

    def test_a_fold_at_the_wrong_version_or_too_short_and_a_gap_after_it_are_found(self):
        s = self.folded("r", 1, 6, 6, version=7)
        self.assertIn("r: the folded CATCHUP to v=6 was followed by DIFF v=7", check_room([s], self.writes)[1])
        s = self.folded("r", 5, 6, 6)
        self.assertIn("r: a folded CATCHUP from v=5 to v=6 (a fold spans two versions or more)",
                      check_room([s], self.writes)[1])
        s = self.folded("r", 1, 6, 9)
        del s["diffs"][0]
        self.assertIn("r: DIFF v=8 after v=6 (a gap or a repeat)", check_room([s], self.writes)[1])


# ---------------------------------------------------------------------------------------------
# Against the daemon

class DaemonFoldTestCase(unittest.TestCase):
    daemon_args = ()

    def setUp(self):
        self.daemon = Daemon(*self.daemon_args)
        self.addCleanup(self.daemon.stop)
        self.segments = []
        self.writer = Writer(self.daemon.port, self.segments)
        self.addCleanup(self.writer.close)
        self.base = self.writer.setup()

    def explain(self, extra=""):
        return "%s\ndaemon:\n%s" % (extra, self.daemon.log())

    def resumed_by_the_python_client(self):
        """A version 3 client joins at the setup, goes away, comes back after the workload with its
        position and chain: returns (client, its segment, the SNAPSHOT it started from, top)."""
        first = Connection(self.daemon.port, "r", self.segments)
        snap = first.join(ROOM)
        self.assertEqual((snap["type"], snap["version"]), ("SNAPSHOT", self.base))
        resume = {"epoch": snap["epoch"], "version": snap["version"], "chain": first.held_chain(ROOM)}
        first.close()
        top = self.writer.workload()
        self.assertEqual(top, self.base + WRITES)
        again = Connection(self.daemon.port, "r", self.segments)
        self.addCleanup(again.close)
        answer = again.join(ROOM, resume)
        self.assertEqual((answer["type"], answer["from_version"], answer["to_version"]), ("CATCHUP", self.base, top),
                         self.explain(answer))
        self.assertEqual(again.position(ROOM), (snap["epoch"], top))
        return again, self.segments[-1], snap, top

    def follow_a_live_diff(self, client, segment, state, top):
        """One more write: its DIFF arrives chained from the chain held; returns the new state."""
        wid, ops = write_ops(WRITES)
        self.assertEqual(self.writer.write(wid, ops), top + 1)
        with client.cond:
            self.assertTrue(client.cond.wait_for(lambda: client.position(ROOM)[1] == top + 1, 30))
        [(version, _, frame)] = segment["diffs"][-1:]
        self.assertEqual(version, top + 1)
        held = dict(segment["chains"])[top]
        self.assertEqual(wire.chain_next(held, frame), dict(segment["chains"])[top + 1])
        state = state.apply_batch(wire.decode_frame(frame)["ops"])
        room = fresh(self.daemon.port)
        self.assertEqual((room["version"], room["digest"], room["chain"]),
                         (top + 1, state.digest(), client.held_chain(ROOM)))
        return state


class FoldedResumeTests(DaemonFoldTestCase):
    def test_a_version_3_resume_after_300_writes_is_one_folded_diff(self):
        client, segment, snap, top = self.resumed_by_the_python_client()
        folded = segment.get("folded")
        self.assertIsNotNone(folded, self.explain("a replayed CATCHUP: %d DIFFs" % len(segment["diffs"])))
        self.assertEqual((folded["from"], folded["to"], folded["version"]), (self.base, top, top))
        self.assertEqual(segment["diffs"], [])
        # Its ops take the replica at from_version to the room at to_version: the CATCHUP's digest
        # and the fresh JOIN's; its chain, taken, is the room's.
        state = wire.Snapshot(snap["snapshot"]).apply_batch(wire.decode_frame(folded["diff"])["ops"])
        room = fresh(self.daemon.port)
        self.assertEqual((room["version"], room["digest"], room["chain"]), (top, folded["digest"], folded["chain"]))
        self.assertEqual(state.digest(), folded["digest"])
        self.assertEqual(client.held_chain(ROOM), room["chain"])
        # Smaller than what it stands for.
        replayed = sum(len(f) + wire.CHAIN_BYTES for v, _, f in self.segments[0]["diffs"] if self.base < v <= top)
        self.assertLess(len(folded["diff"]) + wire.CHAIN_BYTES, replayed // 10)
        state = self.follow_a_live_diff(client, segment, state, top)
        # The history checker: the writer saw every version; the fold is neither a gap, a fork,
        # nor a broken chain, and its digest is the history's.
        log, problems = check_room(self.segments, self.writer.writes)
        self.assertEqual(problems, [])
        self.assertEqual(sorted(log), list(range(1, top + 2)))
        epoch, version, replica, problems = replica_of(self.segments, "r")
        self.assertEqual(problems, [])
        self.assertEqual((version, replica), (top + 1, state))

    def test_a_resume_with_a_zero_chain_is_folded_too(self):
        # A zero chain is one the replica does not know: not compared, so the resume is served.
        client = RawClient(self.daemon.port, [3])
        self.addCleanup(client.close)
        (_, snap), _ = client.join()
        client.close()
        top = self.writer.workload()
        again = RawClient(self.daemon.port, [3])
        self.addCleanup(again.close)
        (_, answer), [(_, diff)] = again.join({"epoch": snap["epoch"], "version": self.base,
                                               "chain": wire.ZERO_CHAIN})
        self.assertEqual((answer["type"], answer["to_version"], diff["version"]), ("CATCHUP", top, top))
        self.assertIsNotNone(answer["folded"])
        self.assertEqual(diff["chain"], fresh(self.daemon.port)["chain"])

    def test_snapcat_resumes_with_one_folded_diff_and_follows_the_room(self):
        s = Interactive(self.daemon.port)
        self.addCleanup(s.kill)
        s.send("join board")
        s.expect(r"^SNAPSHOT #1 board e=\d+ v=%d initial" % self.base)
        s.send("leave board")
        s.expect(r"^ACK #2 board")
        top = self.writer.workload()
        s.send("join board resume")
        line = s.expect(r"^CATCHUP #3 board ")
        self.assertRegex(line, r"^CATCHUP #3 board e=\d+ v=%d\.\.%d folded digest=[0-9a-f]{16}$" % (self.base, top),
                         self.explain())
        s.expect(r"^DIFF board e=\d+ v=%d " % top)
        s.send("verify board")
        s.expect(r"^DIGEST #4 board e=\d+ v=%d " % top)
        s.send("show board")
        head = s.expect(r"^<board ")
        self.assertIn("version=%d;" % top, head)
        self.assertNotIn("not in sync", head)
        wid, ops = write_ops(WRITES)
        self.writer.write(wid, ops)
        s.expect(r"^DIFF board e=\d+ v=%d " % (top + 1))
        s.send("verify board")
        s.expect(r"^DIGEST #5 board e=\d+ v=%d " % (top + 1))
        s.send("show board")
        head = s.expect(r"^<board ")
        room = fresh(self.daemon.port)
        self.assertIn("version=%d;" % (top + 1), head)
        self.assertIn("sha256=%s>" % room["digest"].hex(), head)
        self.assertEqual(s.close(), 0)
        self.assertNotIn("diverged", "\n".join(s.stderr))
        self.assertIn("snapcat: replica of board verified at e=%d v=%d" % (room["epoch"], top), s.stderr)
        self.assertIn("snapcat: replica of board verified at e=%d v=%d" % (room["epoch"], top + 1), s.stderr)

    def test_a_folded_diff_altered_on_the_way_is_caught_by_the_digest_and_joined_afresh(self):
        # A relay that changes one payload byte of the folded DIFF and nothing else: its chain is
        # taken, not checked, so only the state digest can show it.
        seen = {"folded": False, "altered": 0}

        def alter(frame):
            if frame[4] == 0x21 and wire.decode_frame(frame, version=3)["folded"] is not None:
                seen["folded"] = True
            elif frame[4] == 0x22 and seen["folded"] and not seen["altered"]:
                seen["altered"] += 1
                return [folded_diff_altered(frame)]
            return [frame]

        relay = Relay(self.daemon.port, alter)
        self.addCleanup(relay.close)
        s = Interactive(relay.port)
        self.addCleanup(s.kill)
        s.send("join board")
        s.expect(r"^SNAPSHOT #1 board")
        s.send("leave board")
        s.expect(r"^ACK #2 board")
        top = self.writer.workload()
        s.send("join board resume")
        s.expect(r"^CATCHUP #3 board e=\d+ v=%d\.\.%d folded " % (self.base, top))
        s.expect(r"^DIFF board e=\d+ v=%d " % top)
        s.send("show board")
        self.assertIn("not in sync: folded CATCHUP v=%d..%d: the replica's digest after its DIFF is" % (self.base, top),
                      s.expect(r"^<board "))
        self.assertEqual(seen["altered"], 1)
        # Joined afresh: a SNAPSHOT, in sync with the room.
        s.send("join board resume")
        s.expect(r"^SNAPSHOT #4 board e=\d+ v=%d initial" % top)
        s.send("show board")
        head = s.expect(r"^<board ")
        self.assertNotIn("not in sync", head)
        self.assertIn("sha256=%s>" % fresh(self.daemon.port)["digest"].hex(), head)
        self.assertEqual(s.close(), 0)
        stderr = "\n".join(s.stderr)
        self.assertIn("snapcat: warning: replica of board diverged: folded CATCHUP v=%d..%d: the replica's digest "
                      "after its DIFF is" % (self.base, top), stderr)
        self.assertIn("joining afresh, without resume", stderr)

    def test_a_resume_whose_chain_is_forged_is_a_resync(self):
        client = RawClient(self.daemon.port, [3])
        self.addCleanup(client.close)
        (_, snap), _ = client.join()
        client.close()
        top = self.writer.workload()
        for forged in (hashlib.sha256(b"forged").digest(), dict(self.segments[0]["chains"])[self.base + 1]):
            with self.subTest(forged=forged.hex()[:16]):
                again = RawClient(self.daemon.port, [3])
                self.addCleanup(again.close)
                (_, answer), diffs = again.join({"epoch": snap["epoch"], "version": self.base, "chain": forged})
                self.assertEqual((answer["type"], answer.get("reason"), answer["version"], diffs),
                                 ("SNAPSHOT", "resync", top, []), self.explain())
                again.close()


class ReplayedResumeTests(DaemonFoldTestCase):
    daemon_args = ("--no-fold-resumes",)

    def test_with_no_fold_resumes_a_version_3_resume_replays_every_version(self):
        client, segment, snap, top = self.resumed_by_the_python_client()
        self.assertNotIn("folded", segment)
        self.assertEqual([v for v, _, _ in segment["diffs"]], list(range(self.base + 1, top + 1)))
        # Each chained from the one before, from the chain held at the resume.
        chains = dict(self.segments[1]["chains"])
        held = chains[self.base]
        state = wire.Snapshot(snap["snapshot"])
        for (version, _, frame), (v, chain) in zip(segment["diffs"], segment["chains"]):
            self.assertEqual(version, v)
            self.assertEqual(wire.chain_next(held, frame), chain)
            held = chain
            state = state.apply_batch(wire.decode_frame(frame)["ops"])
        self.follow_a_live_diff(client, segment, state, top)
        self.assertEqual(check_room(self.segments, self.writer.writes)[1], [])

    def test_snapcat_shows_the_replayed_catchup_as_it_always_has(self):
        s = Interactive(self.daemon.port)
        self.addCleanup(s.kill)
        s.send("join board")
        s.expect(r"^SNAPSHOT #1 board")
        s.send("leave board")
        s.expect(r"^ACK #2 board")
        top = self.writer.workload(count=20)
        s.send("join board resume")
        s.expect(r"^CATCHUP #3 board e=\d+ v=%d\.\.%d$" % (self.base, top))
        s.expect(r"^DIFF board e=\d+ v=%d " % top)
        s.send("show board")
        head = s.expect(r"^<board ")
        self.assertNotIn("not in sync", head)
        self.assertIn("sha256=%s>" % fresh(self.daemon.port)["digest"].hex(), head)
        self.assertEqual(s.close(), 0)


class Version2ResumeTests(DaemonFoldTestCase):
    def test_a_version_2_resume_gets_the_old_layout_and_every_diff(self):
        client = RawClient(self.daemon.port, [2])
        self.addCleanup(client.close)
        self.assertEqual(client.version, 2)
        (_, snap), _ = client.join()
        client.close()
        top = self.writer.workload()
        again = RawClient(self.daemon.port, [2])
        self.addCleanup(again.close)
        (frame, answer), diffs = again.join({"epoch": snap["epoch"], "version": self.base})
        self.assertEqual(answer, {"type": "CATCHUP", "request_id": 1, "room": ROOM, "epoch": snap["epoch"],
                                  "from_version": self.base, "to_version": top})
        # Exactly version 2's bytes: no flag after to_version (the decoder read them all, no more).
        self.assertEqual(frame, wire.encode_frame(answer))
        with self.assertRaises(wire.WireError):
            wire.decode_frame(frame, version=3)
        self.assertEqual([d["version"] for _, d in diffs], list(range(self.base + 1, top + 1)))
        self.assertTrue(all("chain" not in d for _, d in diffs))
        state = wire.Snapshot(snap["snapshot"])
        for _, d in diffs:
            state = state.apply_batch(d["ops"])
        self.assertEqual(state.digest(), fresh(self.daemon.port)["digest"])
        # The connection goes on: the next frame is the live DIFF of the next write.
        wid, ops = write_ops(WRITES)
        self.writer.write(wid, ops)
        _, live = again.next()
        self.assertEqual((live["type"], live["version"]), ("DIFF", top + 1))


if __name__ == "__main__":
    unittest.main()
