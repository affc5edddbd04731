"""Every vector in Protocol/vectors/*.json against snapcat's own codec and model.

messages.json, limits.json (protocol version 1), outline.json (version 2), chain.json (version
3) and presence.json (version 4), Wycheproof style: a valid frame decodes to `message` (JSON form, PROTOCOL.md section 14) and
`message` encodes back to the exact bytes; an invalid one fails with the named error, decoded as
the file's version says (flag Version1: as version 1, Version2: as version 2, Version3: as
version 3). chain.json's
`chains`: the room's chain computed over each DIFF frame; its `foldedCatchups`: a folded CATCHUP
and its DIFF applied to a replica (section 11.12). windows.json (version 4): its frames as the others', and
its `models` (section 9, "Windows") recomputed by the generator's reference model and by a second
window model written here over snapcat's Snapshot, and replayed through snapcat's session (WINDOW_STATE,
then the WINDOW_DIFF) to the window snapshot, counts and window after. batches.json and outline_batches.json: batches on a model. replay.json: DIFFs applied in order to `start` give `end`, byte for byte and by
SHA-256. Each frame is also fed to the stream decoder byte by byte, whole, all at once, and cut.
"""

import glob
import hashlib
import json
import os
import unittest

from tests.support import VECTORS, wire


def load(name):
    with open(os.path.join(VECTORS, name)) as f:
        return json.load(f)


def version_of(doc, test):
    """The protocol version a vector is decoded with (PROTOCOL.md section 16)."""
    if "Version1" in test["flags"]:
        return 1
    if "Version2" in test["flags"]:
        return 2
    return 3 if "Version3" in test["flags"] else doc["protocolVersion"]


# The two version 1 vectors whose bytes version 2 gives a meaning (PROTOCOL.md section 16).
# "DIFF with unknown opcode 0x17" stays malformed_frame in version 2 (an append_children cut short).
V1_ONLY_COMMENTS = {"unknown message type 0x18"}


def frame_files():
    """The Wycheproof-style frame files (algorithm "SnapSync wire protocol")."""
    out = []
    for path in sorted(glob.glob(os.path.join(VECTORS, "*.json"))):
        with open(path) as f:
            doc = json.load(f)
        if isinstance(doc, dict) and doc.get("algorithm") == "SnapSync wire protocol":
            out.append((os.path.basename(path), doc))
    return out


class FrameVectorTests(unittest.TestCase):
    def setUp(self):
        self.files = frame_files()
        self.assertTrue(self.files, "no frame vectors (*.json with \"tests\") in %s" % VECTORS)

    def test_the_expected_files_are_there(self):
        names = {n for n, _ in self.files}
        self.assertLessEqual({"messages.json", "limits.json", "outline.json", "chain.json", "presence.json",
                             "windows.json"}, names)
        for name, doc in self.files:
            self.assertIn(doc["protocolVersion"], wire.SUPPORTED_VERSIONS, name)
            self.assertEqual(doc.get("numberOfTests", len(doc["tests"])), len(doc["tests"]), name)
            self.assertEqual(doc["accepting"], "either", name)

    def test_valid_vectors_decode_to_the_json_form_and_encode_back(self):
        count = 0
        for name, doc in self.files:
            limits = doc["limits"]
            for t in doc["tests"]:
                if t["result"] != "valid":
                    continue
                count += 1
                with self.subTest(file=name, tcId=t["tcId"], comment=t["comment"]):
                    data = bytes.fromhex(t["hex"])
                    msg = wire.decode_frame(data, limits=limits, version=version_of(doc, t))
                    self.assertEqual(wire.message_to_json(msg), t["message"])
                    again = wire.encode_frame(wire.message_from_json(t["message"]))
                    self.assertEqual(again.hex(), t["hex"])
                    # A JSON round trip through text keeps 64-bit numbers exact.
                    self.assertEqual(json.loads(wire.dumps(t["message"])), t["message"])
        self.assertGreater(count, 0)

    def test_valid_vectors_through_the_stream_decoder(self):
        for name, doc in self.files:
            limits = doc["limits"]
            frames = [bytes.fromhex(t["hex"]) for t in doc["tests"] if t["result"] == "valid"]
            version = doc["protocolVersion"]
            for data in frames:
                with self.subTest(file=name, hex=data.hex()[:40]):
                    sp = wire.FrameSplitter(limits["max_frame_bytes"])
                    for i in range(len(data) - 1):          # byte by byte
                        sp.feed(data[i:i + 1])
                        self.assertEqual(list(sp.frames()), [])
                        self.assertEqual(len(sp.buf), i + 1, "consumed part of a frame")
                    sp.feed(data[-1:])
                    self.assertEqual(list(sp.frames()), [data])
                    self.assertEqual(len(sp.buf), 0)
            sp = wire.FrameSplitter(limits["max_frame_bytes"])   # many at once
            sp.feed(b"".join(frames))
            self.assertEqual(list(sp.frames()), frames)
            self.assertEqual(len(sp.buf), 0)
            for data in frames:                                 # truncated
                for cut in (1, 4, len(data) - 1):
                    if cut >= len(data):
                        continue
                    sp = wire.FrameSplitter(limits["max_frame_bytes"])
                    sp.feed(data[:cut])
                    self.assertEqual(list(sp.frames()), [])
                    self.assertEqual(bytes(sp.buf), data[:cut])
                    with self.assertRaises(wire.WireError) as ctx:
                        wire.decode_frame(data[:cut], limits=limits, version=version)
                    self.assertEqual(ctx.exception.name, "malformed_frame")

    def test_invalid_vectors_fail_with_the_named_error(self):
        count = 0
        for name, doc in self.files:
            limits = doc["limits"]
            for t in doc["tests"]:
                if t["result"] != "invalid":
                    continue
                count += 1
                with self.subTest(file=name, tcId=t["tcId"], comment=t["comment"]):
                    self.assertIn(t["error"], wire.ERROR_NAMES)
                    data = bytes.fromhex(t["hex"])
                    with self.assertRaises(wire.WireError) as ctx:
                        wire.decode_frame(data, limits=limits, version=version_of(doc, t))
                    self.assertEqual(ctx.exception.name, t["error"], ctx.exception.message)
                    if "identifier" in t:
                        got = ctx.exception.identifier
                        self.assertEqual(None if got is None else wire.bytes_to_json(got), t["identifier"])
                    sp = wire.FrameSplitter(limits["max_frame_bytes"])
                    sp.feed(data)
                    if "Truncated" in t["flags"]:
                        # A stream decoder waits for more and consumes nothing.
                        self.assertEqual(list(sp.frames()), [])
                        self.assertEqual(bytes(sp.buf), data)
                    elif "FrameLength" in t["flags"]:
                        # Detected from the 4 length bytes alone.
                        sp = wire.FrameSplitter(limits["max_frame_bytes"])
                        sp.feed(data[:4])
                        with self.assertRaises(wire.WireError) as ctx:
                            list(sp.frames())
                        self.assertEqual(ctx.exception.name, t["error"])
        self.assertGreater(count, 0)

    def test_version_1_vectors_read_the_same_in_version_2(self):
        # PROTOCOL.md section 16: version 2 changes the reading of exactly two version 1 vectors.
        changed = set()
        for name, doc in self.files:
            if doc["protocolVersion"] != 1:
                continue
            for t in doc["tests"]:
                data = bytes.fromhex(t["hex"])
                results = []
                for version in (1, 2):
                    try:
                        results.append(wire.message_to_json(wire.decode_frame(data, limits=doc["limits"], version=version)))
                    except wire.WireError as e:
                        results.append(e.name)
                if results[0] != results[1]:
                    changed.add(t["comment"])
                    self.assertEqual(results[1], "malformed_frame", t["comment"])
        self.assertEqual(changed, V1_ONLY_COMMENTS)


class ChainVectorTests(unittest.TestCase):
    def test_chain_histories(self):
        histories = load("chain.json")["chains"]
        self.assertTrue(histories)
        for history in histories:
            chain = wire.chain_start(history["epoch"])
            self.assertEqual(chain.hex(), history["start"])
            for step in history["diffs"]:
                frame = bytes.fromhex(step["hex"])
                msg = wire.decode_frame(frame, version=2)
                self.assertEqual((msg["type"], msg["epoch"], msg["version"]), ("DIFF", history["epoch"], step["version"]))
                chain = wire.chain_next(chain, frame)
                self.assertEqual(chain.hex(), step["chain"], step["version"])

    def test_catchup_forms(self):
        # Section 11.12: version 3 CATCHUPs carry `folded` (None: the replay form), older ones
        # have no such field.
        forms = []
        for name, doc in frame_files():
            for t in doc["tests"]:
                if t["result"] != "valid" or t["message"]["type"] != "CATCHUP":
                    continue
                with self.subTest(file=name, tcId=t["tcId"], comment=t["comment"]):
                    version = version_of(doc, t)
                    msg = wire.decode_frame(bytes.fromhex(t["hex"]), limits=doc["limits"], version=version)
                    if version < 3:
                        self.assertNotIn("folded", msg)
                        continue
                    self.assertIn("folded", msg)
                    forms.append(msg["folded"] is not None)
                    if msg["folded"] is not None:
                        self.assertEqual(msg["folded"], wire.bytes_from_json(t["message"]["folded"]))
        self.assertGreaterEqual(forms.count(False), 2)
        self.assertGreaterEqual(forms.count(True), 2)

    def state(self, state):
        """A scenario's state: its Snapshot, checked against its encoding and digest, and its chain."""
        snap = wire.Snapshot(wire.snapshot_from_json(state["snapshot"]))
        self.assertEqual(snap.encode().hex(), state["hex"])
        self.assertEqual(snap.digest().hex(), state["digest"])
        return snap, bytes.fromhex(state["chain"])

    def frame(self, entry):
        """A scenario's frame, decoded as version 3 to its `message` and encoded back to its bytes."""
        data = bytes.fromhex(entry["hex"])
        msg = wire.decode_frame(data, version=3)
        self.assertEqual(wire.message_to_json(msg), entry["message"])
        self.assertEqual(wire.encode_frame(msg), data)
        return msg, data

    def test_folded_catchups(self):
        # Section 11.12 end to end: the folded DIFF applied to the replica's state at from_version
        # gives `end`; the replica takes the DIFF's chain; the digest matches exactly when `holds`.
        # `replay`, the other form of the same answer, leads to the same state and chain.
        doc = load("chain.json")
        scenarios = doc.get("foldedCatchups", [])
        self.assertGreaterEqual(len(scenarios), 2)
        self.assertEqual({s["holds"] for s in scenarios}, {True, False})
        self.assertTrue(any("replay" in s for s in scenarios))
        for s in scenarios:
            with self.subTest(comment=s["comment"]):
                start, start_chain = self.state(s["start"])
                end, end_chain = self.state(s["end"])
                v, r = s["start"]["version"], s["end"]["version"]
                catchup, _ = self.frame(s["catchup"])
                self.assertEqual(catchup["type"], "CATCHUP")
                self.assertEqual((catchup["room"].decode(), catchup["epoch"]), (s["room"], s["epoch"]))
                self.assertEqual((catchup["from_version"], catchup["to_version"]), (v, r))
                self.assertGreaterEqual(r, v + 2)
                self.assertEqual(len(catchup["folded"] or b""), 32, "not the folded form")
                diff, diff_frame = self.frame(s["diff"])
                self.assertEqual((diff["type"], diff["room"], diff["epoch"]), ("DIFF", catchup["room"], catchup["epoch"]))
                self.assertEqual(diff["version"], r, "one DIFF, at to_version")
                # The chain cannot be computed from the replica's: it is taken.
                self.assertNotEqual(wire.chain_next(start_chain, wire.unchained_diff_frame(diff_frame)), diff["chain"])
                self.assertEqual(diff["chain"], end_chain)
                replica = start.apply_batch(diff["ops"], limits=doc["limits"])
                replica.check_invariants()
                self.assertEqual(wire.snapshot_to_json(replica.sections), s["end"]["snapshot"])
                self.assertEqual(replica.encode(), end.encode())
                self.assertEqual(replica.digest() == catchup["folded"], s["holds"])
                if "replay" not in s:
                    continue
                first, _ = self.frame(s["replay"][0])
                self.assertEqual({k: first[k] for k in ("type", "room", "epoch", "from_version", "to_version")},
                                 {k: catchup[k] for k in ("type", "room", "epoch", "from_version", "to_version")})
                self.assertIsNone(first["folded"], "the replay form")
                self.assertEqual(len(s["replay"]) - 1, r - v)
                replayed, held = start, start_chain
                for k, entry in enumerate(s["replay"][1:]):
                    msg, data = self.frame(entry)
                    self.assertEqual((msg["type"], msg["version"]), ("DIFF", v + k + 1))
                    held = wire.chain_next(held, wire.unchained_diff_frame(data))
                    self.assertEqual(held, msg["chain"])
                    replayed = replayed.apply_batch(msg["ops"], limits=doc["limits"])
                self.assertEqual(replayed.encode(), replica.encode())
                self.assertEqual(replayed.digest(), catchup["folded"])
                self.assertEqual(held, diff["chain"])


class CoverageTests(unittest.TestCase):
    """The vectors and PROTOCOL.md cover everything snapcat's codec knows, and nothing less."""

    def test_every_message_type_has_a_valid_vector(self):
        types = {t["message"]["type"] for name in ("messages.json", "outline.json", "chain.json", "presence.json",
                                                   "windows.json")
                 for t in load(name)["tests"] if t["result"] == "valid"}
        self.assertEqual(types, {name for name, _ in wire.MESSAGES.values()})

    def test_the_error_table_of_protocol_md_is_snapcats(self):
        # PROTOCOL.md section 6: | code | name | ERROR, REJECT or LEFT | meaning |
        with open(os.path.join(VECTORS, os.pardir, "PROTOCOL.md"), encoding="utf-8") as f:
            rows = {}
            for line in f:
                cells = [c.strip() for c in line.split("|")]
                if len(cells) > 4 and cells[1].isdigit() and cells[3] in ("ERROR", "REJECT", "LEFT"):
                    rows[int(cells[1])] = cells[2]
        self.assertEqual(rows, wire.ERROR_CODES)


class PresenceVectorTests(unittest.TestCase):
    """presence.json (version 4): what the vectors cover, and what a version 3 connection does."""

    def setUp(self):
        self.doc = load("presence.json")

    def test_every_change_kind_and_left_reason_is_covered(self):
        kinds, reasons = set(), set()
        for t in self.doc["tests"]:
            if t["result"] == "valid" and t["message"]["type"] == "PRESENCE_DIFF":
                for c in t["message"]["changes"]:
                    kinds.add(c["kind"])
                    if c["kind"] == "left":
                        reasons.add(c["reason"])
        self.assertEqual(kinds, set(wire.PRESENCE_KINDS.values()))
        self.assertLessEqual(set(wire.LEFT_REASONS), reasons)
        self.assertTrue(reasons - set(wire.LEFT_REASONS), "no unknown left reason among the valid vectors")

    def test_presence_frames_are_unknown_types_in_version_3(self):
        for t in self.doc["tests"]:
            if t["result"] != "valid" or t["message"]["type"] not in {
                    "PRESENCE_WATCH", "PRESENCE_LIST", "SET_PRESENCE", "PRESENCE", "PRESENCE_DIFF"}:
                continue
            with self.subTest(tcId=t["tcId"], comment=t["comment"]):
                with self.assertRaises(wire.WireError) as ctx:
                    wire.decode_frame(bytes.fromhex(t["hex"]), version=3)
                self.assertEqual(ctx.exception.name, "unknown_message_type")
                # And as version 4, once more, from one side only (section 3's "sent by").
                msg = wire.decode_frame(bytes.fromhex(t["hex"]), version=4)
                side = wire.CLIENT_TO_SERVER if msg["type"] in wire.CLIENT_TO_SERVER else wire.SERVER_TO_CLIENT
                wire.decode_frame(bytes.fromhex(t["hex"]), accept=side, version=4)

    def test_unknown_left_reasons_read_as_disconnected(self):
        self.assertEqual(wire.left_reason_name(0), "left")
        self.assertEqual(wire.left_reason_name(5), "disconnected")
        self.assertEqual(wire.left_reason_name(255), "disconnected")


# A second model of windows (PROTOCOL.md section 9, "Windows"), written from the spec over snapcat's
# Snapshot, independent of Protocol/vectors/generate.py's.

class QuietOutput:
    json_mode = False

    def __init__(self):
        self.notes = []

    def line(self, text):
        pass

    def note(self, text):
        self.notes.append(text)

    def frame_bytes(self, direction, frame):
        pass


class WindowModelVectorTests(unittest.TestCase):
    """windows.json's `models`: what a windowed member sees of one room version. A second model
    of the rule, written apart from the generator's, is the Swift model's
    (Tests/SnapSyncWireTests/WindowVectorTests.swift); here, snapcat's replica takes each frame."""

    def setUp(self):
        self.doc = load("windows.json")
        self.models = self.doc["models"]

    def test_there_are_enough_and_they_cover_every_op_kind_and_branch(self):
        self.assertGreaterEqual(len(self.models), 80)
        kinds = {o["op"] for m in self.models for o in m["ops"]}
        self.assertEqual(kinds, {name for name, _ in wire.OPS.values()})
        branches = {b for m in self.models for b in m["reanchoring"]}
        self.assertEqual(branches, {None, "next", "previous", "first"})
        windows = {wire.window_kind(w) for m in self.models for w in m["window"]}
        self.assertEqual(windows, {"first", "last", "around"})
        self.assertEqual({m["frameDue"] for m in self.models}, {True, False})
        self.assertTrue(any(m["diff"] and not m["diff"]["message"]["ops"] for m in self.models),
                        "no frame carrying counts alone")
        self.assertEqual(len({m["description"] for m in self.models}), len(self.models), "descriptions repeat")

    def test_the_reference_model_gives_the_same(self):
        import importlib.util
        spec = importlib.util.spec_from_file_location("snapsync_generate", os.path.join(VECTORS, "generate.py"))
        gen = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(gen)
        for m in self.models:
            with self.subTest(tcId=m["tcId"], description=m["description"]):
                room = [(gen.el(gen.unjb(s["id"]), gen.unjb(s["payload"])),
                         [gen.at(lv, gen.el(gen.unjb(i["id"]), gen.unjb(i["payload"])))
                          for i, lv in gen.flatten_json(s["items"])]) for s in m["room"]]
                window = [wire.section_window_from_json(w) for w in m["window"]]
                ops = [wire.op_from_json(o) for o in m["ops"]]
                step = gen.window_step(room, window, ops)
                self.assertEqual(gen.snapshot_json(step["ws_before"]), m["before"]["snapshot"])
                self.assertEqual(gen.snapshot_json(step["ws_after"]), m["after"]["snapshot"])
                self.assertEqual(gen.window_json(step["window"]), m["after"]["window"])
                self.assertEqual(step["branches"], m["reanchoring"])
                self.assertEqual(step["due"], m["frameDue"])

    def test_snapcat_replays_each_diff_onto_the_window_snapshot_before(self):
        import types
        from tests.support import snapcat
        for m in self.models:
            if m["diff"] is None:
                continue
            with self.subTest(tcId=m["tcId"], description=m["description"]):
                out = QuietOutput()
                session = snapcat.Session(None, types.SimpleNamespace(max_frame=wire.DEFAULT_MAX_FRAME_BYTES,
                                                                      no_hello=False), out)
                session.receive(wire.encode_frame({"type": "WELCOME", "version": 4, "session_id": 1,
                                                   "server_name": b"t", "limits": []}))
                diff = wire.decode_frame(bytes.fromhex(m["diff"]["hex"]), version=4)
                session.receive(wire.encode_frame({
                    "type": "WINDOW_STATE", "request_id": 1, "room": diff["room"], "epoch": diff["epoch"],
                    "version": diff["version"] - 1, "chain": bytes(32),
                    "window": [wire.section_window_from_json(w) for w in m["window"]],
                    "counts": m["before"]["counts"], "snapshot": wire.snapshot_from_json(m["before"]["snapshot"])}))
                session.receive(bytes.fromhex(m["diff"]["hex"]))
                rep = session.replicas[diff["room"]]
                self.assertTrue(rep.in_sync, (rep.problem, out.notes))
                self.assertEqual(out.notes, [])
                self.assertEqual(wire.snapshot_to_json(rep.snapshot.sections), m["after"]["snapshot"])
                self.assertEqual([rep.counts[s["id"]] for s in rep.snapshot.sections], m["after"]["counts"])
                self.assertEqual([wire.section_window_to_json(w) for w in rep.window], m["after"]["window"])
                self.assertEqual(rep.version, diff["version"])

    def test_the_json_form_in_protocol_md_is_the_examples(self):
        # PROTOCOL.md section 14 prints the WINDOW, WINDOW_STATE and WINDOW_DIFF examples in JSON
        # form by hand; they must be the vectors' (generated) ones.
        with open(os.path.join(VECTORS, os.pardir, "PROTOCOL.md"), encoding="utf-8") as f:
            spec = f.read()
        block = spec.split("The WINDOW, WINDOW_STATE and WINDOW_DIFF of", 1)[1].split("```json\n", 1)[1].split("```", 1)[0]
        decoder, k, shown = json.JSONDecoder(), 0, []
        while block[k:].strip():
            while block[k].isspace():
                k += 1
            obj, k = decoder.raw_decode(block, k)
            shown.append(obj)
        examples = {t["comment"]: t["message"] for t in self.doc["tests"] if "Example" in t["flags"]}
        self.assertEqual(shown, [examples["PROTOCOL.md example " + n] for n in ("WINDOW", "WINDOW_STATE", "WINDOW_DIFF")])

    def test_window_frames_are_unknown_types_in_version_3(self):
        for t in self.doc["tests"]:
            if t["result"] != "valid" or t["message"]["type"] not in {"WINDOW", "WINDOW_STATE", "WINDOW_DIFF"}:
                continue
            with self.subTest(tcId=t["tcId"], comment=t["comment"]):
                with self.assertRaises(wire.WireError) as ctx:
                    wire.decode_frame(bytes.fromhex(t["hex"]), version=3)
                self.assertEqual(ctx.exception.name, "unknown_message_type")


class BatchVectorTests(unittest.TestCase):
    """batches.json: which rule answers a batch that breaks several, and what applies."""

    def test_batches_apply_or_fail_as_the_vectors_say(self):
        for name in ("batches.json", "outline_batches.json"):
            self.check_batches(name)

    def check_batches(self, name):
        doc = load(name)
        self.assertGreater(len(doc["tests"]), 0)
        for t in doc["tests"]:
            with self.subTest(file=name, tcId=t["tcId"], comment=t["comment"]):
                start = wire.Snapshot(wire.snapshot_from_json(t["start"]))
                before = start.to_list()
                ops = wire.decode_frame(bytes.fromhex(t["hex"]))["ops"]
                if t["result"] == "accepted":
                    end = start.apply_batch(ops, limits=doc["limits"])
                    end.check_invariants()
                    self.assertEqual(wire.snapshot_to_json(end.sections), t["end"])
                    self.assertEqual(end.digest().hex(), t["endDigest"])
                else:
                    with self.assertRaises(wire.BatchError) as ctx:
                        start.apply_batch(ops, limits=doc["limits"])
                    e = ctx.exception
                    self.assertEqual((e.name, e.op_index), (t["error"], t["opIndex"]))
                    self.assertEqual(None if e.identifier is None else wire.bytes_to_json(e.identifier), t["identifier"])
                    self.assertEqual(start.to_list(), before)


class ReplayVectorTests(unittest.TestCase):
    def setUp(self):
        path = os.path.join(VECTORS, "replay.json")
        self.assertTrue(os.path.exists(path), "no replay vectors at %s" % path)
        self.doc = load("replay.json")

    def check_state(self, state, snapshot):
        self.assertEqual(wire.snapshot_to_json(snapshot.sections), state["snapshot"])
        encoded = snapshot.encode()
        self.assertEqual(encoded.hex(), state["hex"])
        self.assertEqual(hashlib.sha256(encoded).hexdigest(), state["digest"])
        self.assertEqual(snapshot.digest().hex(), state["digest"])

    def test_replay_reproduces_the_end_snapshot_and_digest(self):
        doc = self.doc
        start = wire.Snapshot(wire.snapshot_from_json(doc["start"]["snapshot"]))
        self.check_state(doc["start"], start)
        self.assertEqual(wire.decode_snapshot(bytes.fromhex(doc["start"]["hex"])), start.sections)
        replica, version = start, doc["start"]["version"]
        for d in doc["diffs"]:
            with self.subTest(version=d["version"]):
                msg = wire.decode_frame(bytes.fromhex(d["hex"]))
                self.assertEqual(wire.message_to_json(msg), d["message"])
                self.assertEqual(wire.encode_frame(msg).hex(), d["hex"])
                self.assertEqual((msg["room"].decode(), msg["epoch"]), (doc["room"], doc["epoch"]))
                self.assertEqual(msg["version"], version + 1, "DIFF versions must have no gap")
                replica = replica.apply_batch(msg["ops"])
                replica.check_invariants()
                version = msg["version"]
        self.assertEqual(version, doc["end"]["version"])
        self.check_state(doc["end"], replica)
        self.assertNotEqual(doc["start"]["digest"], doc["end"]["digest"])

    def test_the_empty_snapshot(self):
        empty = wire.Snapshot()
        self.assertEqual(empty.encode().hex(), self.doc["empty"]["hex"])
        self.assertEqual(empty.digest().hex(), self.doc["empty"]["digest"])


if __name__ == "__main__":
    unittest.main()
