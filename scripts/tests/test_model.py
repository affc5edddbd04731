"""snapcat's replica model: the op semantics of PROTOCOL.md sections 5 and 7, batch atomicity."""

import argparse
import contextlib
import hashlib
import io
import unittest

from tests.support import snapcat, wire


def el(i, p=b""):
    return {"id": i, "payload": p}


def snap(*sections):
    """snap(("s", ["a", "b"]), ("t", [])) -> Snapshot."""
    return wire.Snapshot([{"id": s.encode(), "payload": b"", "items": [el(i.encode()) for i in items]}
                          for s, items in sections])


def shape(snapshot):
    return [(s["id"].decode(), [i["id"].decode() for i in s["items"]]) for s in snapshot.sections]


def at(side, anchor):
    return {"side": side, "anchor": anchor}


class ApplyTests(unittest.TestCase):
    base = (("s", ["a", "b", "c"]), ("t", ["d"]))

    def apply(self, *ops, start=None):
        before = start or snap(*self.base)
        original = before.to_list()
        after = before.apply_batch(list(ops))
        after.check_invariants()
        self.assertEqual(before.to_list(), original, "apply_batch must not touch its input")
        return after

    def reject(self, ops, name, op_index, identifier, start=None):
        before = start or snap(*self.base)
        original = before.to_list()
        with self.assertRaises(wire.BatchError) as ctx:
            before.apply_batch(list(ops))
        e = ctx.exception
        self.assertEqual((e.name, e.op_index, e.identifier), (name, op_index, identifier))
        self.assertEqual(before.to_list(), original, "a rejected batch leaves the snapshot as it was")
        before.check_invariants()

    def test_sections(self):
        s = self.apply({"op": "append_sections", "elements": [el(b"u", b"p"), el(b"v")]})
        self.assertEqual(shape(s), [("s", ["a", "b", "c"]), ("t", ["d"]), ("u", []), ("v", [])])
        self.assertEqual(s.sections[2]["payload"], b"p")
        s = self.apply({"op": "insert_sections", "placement": at("before", b"t"), "elements": [el(b"x"), el(b"y")]})
        self.assertEqual([x for x, _ in shape(s)], ["s", "x", "y", "t"])
        s = self.apply({"op": "insert_sections", "placement": at("after", b"t"), "elements": [el(b"x")]})
        self.assertEqual([x for x, _ in shape(s)], ["s", "t", "x"])
        s = self.apply({"op": "delete_sections", "ids": [b"s"]})
        self.assertEqual(shape(s), [("t", ["d"])])
        self.assertEqual(s.item_count(), 1, "deleting a section deletes its items")
        s = self.apply({"op": "move_section", "id": b"s", "placement": at("after", b"t")})
        self.assertEqual([x for x, _ in shape(s)], ["t", "s"])
        s = self.apply({"op": "move_section", "id": b"t", "placement": at("before", b"s")})
        self.assertEqual([x for x, _ in shape(s)], ["t", "s"])
        s = self.apply({"op": "update_sections", "elements": [el(b"t", b"new")]})
        self.assertEqual(s.sections[1]["payload"], b"new")

    def test_items(self):
        s = self.apply({"op": "append_items", "section": None, "elements": [el(b"x")]})
        self.assertEqual(shape(s)[1], ("t", ["d", "x"]), "no section means the last one")
        s = self.apply({"op": "append_items", "section": b"s", "elements": [el(b"x", b"1"), el(b"y")]})
        self.assertEqual(shape(s)[0], ("s", ["a", "b", "c", "x", "y"]))
        s = self.apply({"op": "insert_items", "placement": at("before", b"a"), "elements": [el(b"x"), el(b"y")]})
        self.assertEqual(shape(s)[0], ("s", ["x", "y", "a", "b", "c"]))
        s = self.apply({"op": "insert_items", "placement": at("after", b"d"), "elements": [el(b"x")]})
        self.assertEqual(shape(s)[1], ("t", ["d", "x"]))
        s = self.apply({"op": "delete_items", "ids": [b"b", b"d"]})
        self.assertEqual(shape(s), [("s", ["a", "c"]), ("t", [])])
        s = self.apply({"op": "delete_all_items"})
        self.assertEqual(shape(s), [], "delete_all_items removes the sections too")
        s = self.apply({"op": "move_item", "id": b"a", "placement": at("after", b"d")})
        self.assertEqual(shape(s), [("s", ["b", "c"]), ("t", ["d", "a"])], "moves cross sections")
        s = self.apply({"op": "move_item", "id": b"c", "placement": at("before", b"a")})
        self.assertEqual(shape(s)[0], ("s", ["c", "a", "b"]))
        s = self.apply({"op": "move_item_to_section", "id": b"a", "section": b"t"})
        self.assertEqual(shape(s), [("s", ["b", "c"]), ("t", ["d", "a"])])
        s = self.apply({"op": "move_item_to_section", "id": b"d", "section": b"u"},
                       start=snap(("s", []), ("t", ["d"]), ("u", [])))
        self.assertEqual(shape(s), [("s", []), ("t", []), ("u", ["d"])])
        for kind in ("reload", "reconfigure"):
            s = self.apply({"op": "update_items", "kind": kind, "elements": [el(b"b", b"v")]})
            self.assertEqual(s.sections[0]["items"][1], el(b"b", b"v"))

    def test_ops_see_the_effects_of_earlier_ops_in_the_batch(self):
        s = self.apply({"op": "append_sections", "elements": [el(b"u")]},
                       {"op": "append_items", "section": None, "elements": [el(b"x")]},
                       {"op": "move_item", "id": b"a", "placement": at("before", b"x")},
                       start=snap(("s", ["a"])))
        self.assertEqual(shape(s), [("s", []), ("u", ["a", "x"])])

    def test_rejections(self):
        self.reject([{"op": "append_sections", "elements": [el(b"t")]}], "duplicate_section", 0, b"t")
        self.reject([{"op": "append_sections", "elements": [el(b"u"), el(b"u")]}], "duplicate_section", 0, b"u")
        self.reject([{"op": "insert_sections", "placement": at("after", b"zz"), "elements": [el(b"u")]}],
                    "anchor_section_not_found", 0, b"zz")
        self.reject([{"op": "delete_sections", "ids": [b"zz"]}], "section_not_found", 0, b"zz")
        self.reject([{"op": "move_section", "id": b"zz", "placement": at("after", b"s")}],
                    "section_not_found", 0, b"zz")
        self.reject([{"op": "move_section", "id": b"s", "placement": at("after", b"zz")}],
                    "anchor_section_not_found", 0, b"zz")
        self.reject([{"op": "move_section", "id": b"s", "placement": at("after", b"s")}],
                    "anchor_is_self", 0, b"s")
        self.reject([{"op": "update_sections", "elements": [el(b"zz")]}], "section_not_found", 0, b"zz")
        self.reject([{"op": "append_items", "section": b"zz", "elements": [el(b"x")]}],
                    "section_not_found", 0, b"zz")
        self.reject([{"op": "append_items", "section": None, "elements": [el(b"x")]}],
                    "no_sections", 0, None, start=snap())
        self.reject([{"op": "append_items", "section": b"t", "elements": [el(b"a")]}],
                    "duplicate_item", 0, b"a")
        self.reject([{"op": "insert_items", "placement": at("before", b"zz"), "elements": [el(b"x")]}],
                    "anchor_item_not_found", 0, b"zz")
        self.reject([{"op": "delete_items", "ids": [b"zz"]}], "item_not_found", 0, b"zz")
        self.reject([{"op": "move_item", "id": b"zz", "placement": at("after", b"a")}],
                    "item_not_found", 0, b"zz")
        self.reject([{"op": "move_item", "id": b"a", "placement": at("after", b"zz")}],
                    "anchor_item_not_found", 0, b"zz")
        self.reject([{"op": "move_item", "id": b"a", "placement": at("before", b"a")}],
                    "anchor_is_self", 0, b"a")
        self.reject([{"op": "move_item_to_section", "id": b"a", "section": b"zz"}],
                    "section_not_found", 0, b"zz")
        self.reject([{"op": "update_items", "kind": "reload", "elements": [el(b"zz")]}],
                    "item_not_found", 0, b"zz")

    def test_a_late_failure_rejects_the_whole_batch_with_its_index(self):
        self.reject([{"op": "append_sections", "elements": [el(b"u")]},
                     {"op": "delete_items", "ids": [b"a"]},
                     {"op": "delete_items", "ids": [b"a"]}], "item_not_found", 2, b"a")

    def test_digest_is_sha256_of_the_canonical_encoding(self):
        empty = wire.Snapshot()
        self.assertEqual(empty.encode(), b"\x00")
        self.assertEqual(empty.digest(), hashlib.sha256(b"\x00").digest())
        s = snap(("s", ["a"]))
        self.assertEqual(s.encode(), bytes([1, 1]) + b"s" + bytes([0, 1, 1]) + b"a" + bytes([0]))

    def test_snapshot_constructor_refuses_duplicates(self):
        with self.assertRaises(ValueError):
            snap(("s", ["a"]), ("t", ["a"]))
        with self.assertRaises(ValueError):
            snap(("s", []), ("s", []))


if __name__ == "__main__":
    unittest.main()


class ReplicaLimitTests(unittest.TestCase):
    """A replica applies a DIFF under the limits the server announced (PROTOCOL.md section 5):
    one that breaks them cannot be followed, like one that does not apply (section 11.13)."""

    def session(self):
        s = snapcat.Session(None, argparse.Namespace(max_frame=1 << 24, no_hello=False), snapcat.Output(True, False))
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            s.handle({"type": "WELCOME", "version": 1, "session_id": 1, "server_name": b"t",
                      "limits": [{"key": 4, "value": 2}]})
            snap = [{"id": b"s", "payload": b"", "items": [{"id": b"a", "payload": b""}]}]
            s.handle({"type": "SNAPSHOT", "request_id": 1, "room": b"r", "epoch": 5, "version": 1, "reason": "initial",
                      "digest": wire.snapshot_digest(snap), "snapshot": snap})
        return s

    def diff(self, s, version, ops):
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            s.handle({"type": "DIFF", "room": b"r", "epoch": 5, "version": version, "ops": ops})

    def test_a_diff_within_the_limits_applies(self):
        s = self.session()
        self.diff(s, 2, [{"op": "append_items", "section": b"s", "elements": [{"id": b"b", "payload": b""}]}])
        self.assertTrue(s.replicas[b"r"].in_sync)
        self.assertEqual(s.replicas[b"r"].snapshot.item_count(), 2)

    def test_a_diff_over_the_announced_limits_loses_the_replica(self):
        s = self.session()
        self.diff(s, 2, [{"op": "append_items", "section": b"s",
                          "elements": [{"id": b"b", "payload": b""}, {"id": b"c", "payload": b""}]}])
        self.assertFalse(s.replicas[b"r"].in_sync)
        self.assertIn("too_many_items", s.replicas[b"r"].problem)
