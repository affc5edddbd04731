"""snapcat's command language: what each line sends, and that a mistyped line sends nothing."""

import json
import shlex
import types
import unittest

from tests.support import snapcat, wire


def sent(parser, line):
    """The messages a line sends, each round-tripped through the codec."""
    out = []
    for action in parser.parse(line):
        if action[0] == "send":
            frame = wire.encode_frame(action[1])
            # A resume with a chain is version 3's layout (PROTOCOL.md section 9); presence is 4's.
            resume = action[1].get("resume") or {}
            version = 3 if resume.get("chain") is not None else 2
            decoded = wire.decode_frame(frame, version=4 if frame[4] in wire.V4_MESSAGES else version)
            assert decoded == action[1], (decoded, action[1])
            out.append(decoded)
    return out


def el(i, p=b""):
    return {"id": i, "payload": p}


class CommandTests(unittest.TestCase):
    def setUp(self):
        self.p = snapcat.CommandParser()

    def one_op(self, line):
        [msg] = sent(self.p, line)
        self.assertEqual(msg["type"], "MUTATE")
        self.assertEqual(msg["room"], b"lobby")
        [op] = msg["ops"]
        return op

    def test_join_and_leave(self):
        [j] = sent(self.p, "join lobby")
        self.assertEqual(j, {"type": "JOIN", "request_id": 1, "room": b"lobby", "resume": None})
        [j] = sent(self.p, "join lobby since 12345:7")
        self.assertEqual(j["resume"], {"epoch": 12345, "version": 7})
        self.assertEqual(j["request_id"], 2)
        [l] = sent(self.p, "leave lobby")
        self.assertEqual(l, {"type": "LEAVE", "request_id": 3, "room": b"lobby"})

    def test_join_resume_uses_the_replica_position(self):
        p = snapcat.CommandParser(lambda room: (9, 4, b"c" * 32) if room == b"lobby" else None)
        [j] = sent(p, "join lobby resume")
        self.assertEqual(j["resume"], {"epoch": 9, "version": 4, "chain": b"c" * 32})
        with self.assertRaises(snapcat.UsageError):
            p.parse("join other resume")

    def test_section_ops(self):
        self.assertEqual(self.one_op("append-sections lobby main side=0x00ff"),
                         {"op": "append_sections", "elements": [el(b"main"), el(b"side", b"\x00\xff")]})
        self.assertEqual(self.one_op("insert-sections lobby after main x y"),
                         {"op": "insert_sections", "placement": {"side": "after", "anchor": b"main"},
                          "elements": [el(b"x"), el(b"y")]})
        self.assertEqual(self.one_op("delete-sections lobby x y"),
                         {"op": "delete_sections", "ids": [b"x", b"y"]})
        self.assertEqual(self.one_op("move-section lobby x before main"),
                         {"op": "move_section", "id": b"x",
                          "placement": {"side": "before", "anchor": b"main"}})
        self.assertEqual(self.one_op("update-sections lobby main='new title'"),
                         {"op": "update_sections", "elements": [el(b"main", b"new title")]})
        self.assertEqual(self.one_op("reload-sections lobby main=t")["op"], "update_sections")

    def test_item_ops(self):
        self.assertEqual(self.one_op("append-items lobby to main a=hello b"),
                         {"op": "append_items", "section": b"main",
                          "elements": [el(b"a", b"hello"), el(b"b")]})
        self.assertEqual(self.one_op("append-items lobby a"),
                         {"op": "append_items", "section": None, "elements": [el(b"a")]})
        self.assertEqual(self.one_op("insert-items lobby before a x=1"),
                         {"op": "insert_items", "placement": {"side": "before", "anchor": b"a"},
                          "elements": [el(b"x", b"1")]})
        self.assertEqual(self.one_op("delete-items lobby a b"),
                         {"op": "delete_items", "ids": [b"a", b"b"]})
        self.assertEqual(self.one_op("delete-all-items lobby"), {"op": "delete_all_items"})
        self.assertEqual(self.one_op("move-item lobby a after b"),
                         {"op": "move_item", "id": b"a", "placement": {"side": "after", "anchor": b"b"}})
        self.assertEqual(self.one_op("move-item lobby a to side"),
                         {"op": "move_item_to_section", "id": b"a", "section": b"side"})
        self.assertEqual(self.one_op("reload-items lobby a=x"),
                         {"op": "update_items", "kind": "reload", "elements": [el(b"a", b"x")]})
        self.assertEqual(self.one_op("reconfigure-items lobby a= b=y"),
                         {"op": "update_items", "kind": "reconfigure",
                          "elements": [el(b"a"), el(b"b", b"y")]})

    def test_quoting_hex_and_empty_identifiers(self):
        op = self.one_op("append-items lobby to 'two words' \"\" 0x=0xff 0x613d62='a b'")
        self.assertEqual(op["section"], b"two words")
        self.assertEqual(op["elements"], [el(b""), el(b"", b"\xff"), el(b"a=b", b"a b")])

    def test_request_ids_count_up_across_requests(self):
        ids = []
        for line in ["join lobby", "append-sections lobby s", "stats", "ping", "leave lobby"]:
            [m] = sent(self.p, line)
            ids.append(m.get("request_id", m.get("nonce")))
        self.assertEqual(ids, [1, 2, 3, 4, 5])
        self.assertEqual(sent(self.p, "stats")[0], {"type": "STATS", "request_id": 6})

    def test_batch_is_one_mutate(self):
        self.assertEqual(self.p.parse("begin lobby"), [])
        self.assertEqual(self.p.parse("append-sections lobby main"), [])
        self.assertEqual(self.p.parse("append-items lobby a b"), [])
        self.assertEqual(self.p.parse("delete-items lobby a"), [])
        [m] = sent(self.p, "commit")
        self.assertEqual(m["request_id"], 1)
        self.assertEqual([o["op"] for o in m["ops"]], ["append_sections", "append_items", "delete_items"])
        self.assertIsNone(self.p.batch)

    def test_batch_errors(self):
        self.p.parse("begin lobby")
        with self.assertRaisesRegex(snapcat.UsageError, "open batch is for room lobby"):
            self.p.parse("append-sections other main")
        with self.assertRaisesRegex(snapcat.UsageError, "already open"):
            self.p.parse("begin lobby")
        self.p.parse("abort")
        with self.assertRaisesRegex(snapcat.UsageError, "no open batch"):
            self.p.parse("commit")

    def test_expect_version_and_write_id_apply_to_the_next_write_only(self):
        self.p.parse("expect-version 4")
        self.p.parse("write-id w1")
        [m] = sent(self.p, "append-sections lobby s")
        self.assertEqual((m["expected_version"], m["write_id"]), (4, b"w1"))
        [m] = sent(self.p, "append-sections lobby t")
        self.assertEqual((m["expected_version"], m["write_id"]), (None, b""))
        with self.assertRaises(snapcat.UsageError):
            self.p.parse("write-id " + "x" * 33)

    def test_replace_takes_the_json_form(self):
        # payload and items may be left out; {"hex": ...} gives non-UTF-8 bytes.
        doc = [{"id": "main", "payload": "title", "items": [{"id": "a", "payload": "hi"}, {"id": "b"}]},
               {"id": {"hex": "00ff"}, "items": []}]
        expected = [{"id": b"main", "payload": b"title", "items": [el(b"a", b"hi"), el(b"b")]},
                    {"id": b"\x00\xff", "payload": b"", "items": []}]
        [m] = sent(self.p, "replace lobby " + json.dumps(doc))
        self.assertEqual((m["type"], m["room"], m["snapshot"]), ("REPLACE", b"lobby", expected))
        # Quoted as one shell word works too, and the JSON form round-trips.
        [m2] = sent(self.p, "replace lobby '" + json.dumps(wire.snapshot_to_json(expected)) + "'")
        self.assertEqual(m2["snapshot"], expected)

    def test_replace_sends_a_snapshot_that_breaks_rules_so_the_server_can_refuse_it(self):
        dup = [{"id": "s", "items": [{"id": "a"}]}, {"id": "t", "items": [{"id": "a"}]}]
        [(kind, m)] = self.p.parse("replace lobby " + json.dumps(dup))
        self.assertEqual((kind, m["type"]), ("send", "REPLACE"))
        # The frame is well formed; the receiver refuses its content with the rule's code.
        with self.assertRaises(wire.WireError) as ctx:
            wire.decode_frame(wire.encode_frame(m))
        self.assertEqual((ctx.exception.name, ctx.exception.identifier), ("duplicate_item", b"a"))

    def test_replace_refuses_json_that_is_not_a_snapshot(self):
        for line in ["replace lobby [", "replace lobby", "replace lobby {\"id\": 1}",
                     "replace lobby [{\"id\": 5}]", "replace lobby [{\"id\": {\"hex\": \"zz\"}}]",
                     "replace lobby [{\"payload\": \"p\"}]"]:
            with self.assertRaises(snapcat.UsageError, msg=line):
                self.p.parse(line)
        self.assertEqual(self.p.next_id, 1)

    def test_auth_sends_the_token_as_credentials(self):
        sent(self.p, "join lobby")
        [m] = sent(self.p, "auth eyJh.eyJz.c2ln")
        self.assertEqual(m, {"type": "AUTH", "request_id": 2, "credentials": b"eyJh.eyJz.c2ln"})
        self.assertEqual(snapcat.token_bytes(" eyJh.eyJz.c2ln\n"), b"eyJh.eyJz.c2ln")

    def test_drop_and_ttl(self):
        [m] = sent(self.p, "drop lobby")
        self.assertEqual(m, {"type": "DROP", "request_id": 1, "room": b"lobby"})
        self.assertEqual(wire.decode_frame(wire.encode_frame(m)), m)
        self.assertEqual(wire.encode_frame(m), bytes.fromhex("00000008160105") + b"lobby")
        [m] = sent(self.p, "ttl lobby 86400")
        self.assertEqual(m, {"type": "SET_TTL", "request_id": 2, "room": b"lobby", "seconds": 86400})
        self.assertEqual(wire.encode_frame(m), bytes.fromhex("0000000b170205") + b"lobby" + bytes.fromhex("80a305"))
        for line in ["drop", "drop a b", "ttl lobby", "ttl lobby -1", "ttl lobby 1.5", "ttl lobby %d" % 2**64]:
            with self.assertRaises(snapcat.UsageError, msg=line):
                self.p.parse(line)
        self.assertEqual(self.p.next_id, 3)

    def test_local_commands(self):
        self.assertEqual(self.p.parse("show lobby"), [("wait",), ("show", b"lobby")])
        self.assertEqual(self.p.parse("raw 0000 0001 ff"), [("raw", b"\x00\x00\x00\x01\xff")])
        self.assertEqual(self.p.parse("sleep 0.5"), [("sleep", 0.5)])
        self.assertEqual(self.p.parse("wait"), [("wait",)])
        self.assertEqual(self.p.parse("# a comment"), [])
        self.assertEqual(self.p.parse("   "), [])
        self.assertEqual(self.p.parse("help"), [("help",)])

    def test_mistyped_commands_raise_with_a_usage_line_and_send_nothing(self):
        bad = [
            "frobnicate lobby", "join", "join lobby since 5", "join lobby since x:y", "leave",
            "leave a b", "append-sections lobby", "insert-sections lobby beside main x",
            "insert-sections lobby before main", "delete-sections lobby", "move-section lobby a b",
            "move-section lobby a before", "update-sections lobby main", "append-items lobby",
            "append-items lobby to main", "insert-items lobby after a", "delete-items lobby",
            "delete-all-items", "delete-all-items lobby extra", "move-item lobby a b",
            "move-item lobby a sideways b", "reload-items lobby a", "reconfigure-items lobby",
            "commit", "abort", "raw", "raw 123", "raw zz", "ping now", "stats 1", "sleep",
            "sleep -1", "expect-version x", "show", "append-items lobby 'unterminated", "auth",
            "auth a b",
        ]
        for line in bad:
            with self.subTest(line=line):
                with self.assertRaises(snapcat.UsageError) as ctx:
                    self.p.parse(line)
                if not line.startswith("frobnicate") and "unterminated" not in line:
                    self.assertIn("usage: ", str(ctx.exception))
        self.assertEqual(self.p.next_id, 1, "a mistyped line must not use a request id")
        self.assertIsNone(self.p.batch)


class PresenceCommandTests(unittest.TestCase):
    """presence and set-presence (PROTOCOL.md section 9, "Presence"; version 4)."""

    def test_presence_joins_then_watches(self):
        p = snapcat.CommandParser()
        self.assertEqual(sent(p, "presence todo"), [
            {"type": "JOIN", "request_id": 1, "room": b"todo", "resume": None},
            {"type": "PRESENCE_WATCH", "request_id": 2, "room": b"todo", "watch": 1}])
        self.assertEqual(sent(p, "presence todo off"), [
            {"type": "PRESENCE_WATCH", "request_id": 3, "room": b"todo", "watch": 0}])

    def test_a_member_is_not_joined_again(self):
        p = snapcat.CommandParser(is_member=lambda room: room == b"todo")
        self.assertEqual(sent(p, "presence todo"), [
            {"type": "PRESENCE_WATCH", "request_id": 1, "room": b"todo", "watch": 1}])
        self.assertEqual(sent(p, "presence todo --list 50"), [
            {"type": "PRESENCE_LIST", "request_id": 2, "room": b"todo", "after": 0, "limit": 50}])
        self.assertEqual(sent(p, "presence todo list"), [
            {"type": "PRESENCE_LIST", "request_id": 3, "room": b"todo", "after": 0, "limit": 0}])
        self.assertEqual(sent(p, 'set-presence todo {"editing": "milk"}'), [
            {"type": "SET_PRESENCE", "request_id": 4, "room": b"todo", "state": b'{"editing": "milk"}'}])

    def test_set_presence_sends_the_json_text_or_clears(self):
        p = snapcat.CommandParser(is_member=lambda room: True)
        [m] = sent(p, "set-presence todo '{\"a\": \"é\"}'")
        self.assertEqual(m["state"], '{"a": "é"}'.encode("utf-8"))
        [m] = sent(p, "set-presence todo")
        self.assertEqual(m["state"], b"")
        [m] = sent(p, "set-presence todo " + json.dumps({"x": "y" * 2000}))
        self.assertEqual(len(m["state"]), len(json.dumps({"x": "y" * 2000})))   # sent, for the server to refuse

    def test_mistyped_presence_commands_send_nothing(self):
        p = snapcat.CommandParser()
        for line in ["presence", "presence todo sideways", "presence todo --list x", "presence todo --list 1 2",
                     "set-presence", "set-presence todo {not json", "set-presence todo 'unterminated"]:
            with self.subTest(line=line):
                with self.assertRaises(snapcat.UsageError) as ctx:
                    p.parse(line)
                self.assertIn("usage: ", str(ctx.exception))
        self.assertEqual(p.next_id, 1)


class RenderingTests(unittest.TestCase):
    def test_presence_lines(self):
        alice = {"member_id": 7, "principal": b"alice", "joined_at": 1, "state": b'{"editing":"milk"}'}
        bob = {"member_id": 9, "principal": b"bob", "joined_at": 2, "state": b""}
        self.assertEqual(snapcat.show_message({"type": "PRESENCE", "request_id": 2, "room": b"todo", "count": 3,
                                               "members": [alice, bob], "next": 9}),
                         'PRESENCE #2 todo: 3 members: 7 alice {"editing":"milk"}, 9 bob next=9')
        self.assertEqual(snapcat.show_message({"type": "PRESENCE", "request_id": 3, "room": b"todo", "count": 1,
                                               "members": [], "next": 0}),
                         "PRESENCE #3 todo: 1 member: (none listed)")
        changes = [{"kind": "joined", "member": bob}, {"kind": "left", "member_id": 7, "reason": 1},
                   {"kind": "state", "member_id": 9, "state": b'{"a":1}'},
                   {"kind": "state", "member_id": 10, "state": b""},
                   {"kind": "shown", "member": dict(bob, member_id=11, state=b"\x00")},
                   {"kind": "hidden", "member_id": 12}, {"kind": "left", "member_id": 13, "reason": 9}]
        self.assertEqual(snapcat.show_message({"type": "PRESENCE_DIFF", "room": b"todo", "count": 4,
                                               "changes": changes}),
                         'PRESENCE_DIFF todo: 4 members: +9 bob, -7 (disconnected), ~9 state {"a":1}, '
                         '~10 state cleared, >11 bob 0x00 (shown), <12 (hidden), '
                         '-13 (disconnected: unknown reason 9)')
        self.assertEqual(snapcat.show_message({"type": "PRESENCE_DIFF", "room": b"todo", "count": 2, "changes": []}),
                         "PRESENCE_DIFF todo: 2 members: (no change in the view)")

    def test_diff_line(self):
        msg = {"type": "DIFF", "room": b"lobby", "epoch": 77, "version": 3, "ops": [
            {"op": "append_items", "section": b"main", "elements": [el(b"a", b"hello"), el(b"b")]},
            {"op": "move_item", "id": b"a", "placement": {"side": "after", "anchor": b"b"}},
            {"op": "delete_all_items"}]}
        self.assertEqual(snapcat.show_message(msg),
                         'DIFF lobby e=77 v=3 append_items to main [a="hello", b]; '
                         'move_item a after b; delete_all_items')

    def test_reject_line_names_error_op_and_identifier(self):
        msg = {"type": "REJECT", "request_id": 4, "code": 22, "op_index": 0,
               "identifier": b"missing", "message": b"no section missing"}
        self.assertEqual(snapcat.show_message(msg, b"lobby"),
                         "REJECT #4 lobby section_not_found (22) op=0 id=missing: no section missing")
        msg["code"] = 99
        self.assertIn("unknown_99 (99)", snapcat.show_message(msg))

    def test_error_line(self):
        msg = {"type": "ERROR", "code": 1, "message": b"bad varint"}
        self.assertEqual(snapcat.show_message(msg), "ERROR malformed_frame (1): bad varint")

    def test_auth_lines(self):
        left = {"type": "LEFT", "room": b"board:2", "code": 48,
                "message": b"token of alice grants no read on room board:2"}
        self.assertEqual(snapcat.show_message(left),
                         "LEFT board:2 forbidden (48): token of alice grants no read on room board:2")
        self.assertEqual(snapcat.show_message({"type": "ERROR", "code": 13, "message": b"expired"}),
                         "ERROR token_expired (13): expired")
        self.assertEqual(snapcat.show_message({"type": "ERROR", "code": 11, "message": b"no token"}),
                         "ERROR unauthorized (11): no token")
        reject = {"type": "REJECT", "request_id": 2, "code": 48, "op_index": None, "identifier": None,
                  "message": b"token of alice grants no write on room board:2"}
        self.assertEqual(snapcat.show_message(reject, b"board:2"),
                         "REJECT #2 board:2 forbidden (48): token of alice grants no write on room board:2")

    def test_identifiers_show_as_typed(self):
        self.assertEqual(snapcat.show_id(b"main"), "main")
        self.assertEqual(snapcat.show_id(b"two words"), '"two words"')
        self.assertEqual(snapcat.show_id(b""), '""')
        self.assertEqual(snapcat.show_id(b"\xff\x00"), "0xff00")
        self.assertEqual(snapcat.show_id(b"0xab"), "0x30786162")
        self.assertEqual(snapcat.show_payload(b"hi"), '"hi"')
        self.assertEqual(snapcat.show_payload(b"\xff"), "0xff")
        # What is shown can be typed back (shell words, 0xHEX).
        for ident in [b"main", b"two words", b"\xff\x00", b"", b"0xab"]:
            self.assertEqual(snapcat.parse_value(shlex.split(snapcat.show_id(ident))[0]), ident)

    def test_tree(self):
        rep = snapcat.Replica(5, 2, wire.Snapshot([
            {"id": b"main", "payload": b"", "items": [el(b"a", b"hi"), el(b"b")]},
            {"id": b"side", "payload": b"t", "items": []}]))
        tree = snapcat.show_tree(b"lobby", rep).splitlines()
        self.assertTrue(tree[0].startswith("<lobby epoch=5 version=2; 2 sections, 2 items; sha256="))
        self.assertEqual(tree[1:], ['├─ section main', '│  ├─ item a="hi"', '│  └─ item b',
                                    '└─ section side="t"'])

    def test_tree_of_an_outline_shows_children_under_their_parents_with_levels(self):
        # main: a{a1{a11}, a2}, b   side: c{c1}
        lv = lambda i, n: dict(el(i), level=n) if n else el(i)
        rep = snapcat.Replica(5, 2, wire.Snapshot([
            {"id": b"main", "payload": b"", "items": [lv(b"a", 0), lv(b"a1", 1), lv(b"a11", 2), lv(b"a2", 1),
                                                      lv(b"b", 0)]},
            {"id": b"side", "payload": b"", "items": [lv(b"c", 0), lv(b"c1", 1)]}]))
        self.assertEqual(snapcat.show_tree(b"lobby", rep).splitlines()[1:], [
            '├─ section main',
            '│  ├─ item a',
            '│  │  ├─ item a1 (level 1)',
            '│  │  │  └─ item a11 (level 2)',
            '│  │  └─ item a2 (level 1)',
            '│  └─ item b',
            '└─ section side',
            '   └─ item c',
            '      └─ item c1 (level 1)'])
        self.assertEqual(snapcat.show_items_nested(rep.snapshot.sections[0]["items"]), "[a{a1{a11}, a2}, b]")


class OutlineCommandTests(unittest.TestCase):
    """The commands of protocol version 2 (outlines, REPLACE_SECTION)."""

    def setUp(self):
        self.p = snapcat.CommandParser()

    one_op = CommandTests.one_op

    def test_outline_commands(self):
        self.assertEqual(self.one_op("append-items lobby to-parent a x=X y"),
                         {"op": "append_children", "parent": b"a", "elements": [el(b"x", b"X"), el(b"y")]})
        self.assertEqual(self.one_op("move-item lobby b to-parent 0x00"),
                         {"op": "move_item_to_parent", "id": b"b", "parent": b"\x00"})
        for bad in ("append-items lobby to-parent a", "move-item lobby b to-parent"):
            with self.assertRaises(snapcat.UsageError):
                self.p.parse(bad)

    def test_replace_section_takes_nested_json_items(self):
        [msg] = sent(self.p, 'replace-section lobby main [{"id": "a", "payload": "A", "children": '
                             '[{"id": "a1", "children": [{"id": "a11"}]}]}, {"id": "b"}]')
        self.assertEqual(msg["type"], "REPLACE_SECTION")
        self.assertEqual((msg["room"], msg["section"], msg["expected_version"]), (b"lobby", b"main", None))
        self.assertEqual(msg["items"], [el(b"a", b"A"), dict(el(b"a1"), level=1), dict(el(b"a11"), level=2), el(b"b")])
        # Quoted JSON, and the JSON form of the message nests the items again.
        [msg] = sent(self.p, "replace-section lobby 'main' '[{\"id\": \"x\", \"children\": [{\"id\": \"y\"}]}]'")
        self.assertEqual(wire.message_to_json(msg)["items"], [{"id": "x", "payload": "", "children": [{"id": "y", "payload": ""}]}])
        for bad in ("replace-section lobby main", "replace-section lobby [1]", "replace-section lobby main {}"):
            with self.assertRaises(snapcat.UsageError):
                self.p.parse(bad)



class CapturedOutput:
    json_mode = False

    def __init__(self):
        self.lines, self.notes = [], []

    def line(self, text):
        self.lines.append(text)

    def note(self, text):
        self.notes.append(text)

    def frame_bytes(self, direction, frame):
        pass


class SessionTests(unittest.TestCase):
    """What a session does with the server's frames, without a socket."""

    def setUp(self):
        self.out = CapturedOutput()
        args = types.SimpleNamespace(max_frame=wire.DEFAULT_MAX_FRAME_BYTES, no_hello=False)
        self.session = snapcat.Session(None, args, self.out)

    def receive(self, msg):
        self.session.receive(wire.encode_frame(msg))

    def test_left_room_deleted_drops_the_replica_before_the_drop_is_acknowledged(self):
        s = self.session
        s.parser.next_id = 3
        s.send({"type": "DROP", "request_id": 2, "room": b"todo"})
        self.receive({"type": "SNAPSHOT", "request_id": 1, "room": b"todo", "epoch": 5, "version": 0,
                      "reason": "initial", "digest": wire.snapshot_digest([]), "snapshot": []})
        self.receive({"type": "LEFT", "room": b"todo", "code": 49, "message": b"room todo was deleted"})
        self.assertNotIn(b"todo", s.replicas)
        self.receive({"type": "ACK", "request_id": 2, "epoch": 5, "version": 0})
        self.assertEqual(s.pending, {})
        self.assertEqual(self.out.lines[-2:], ["LEFT todo room_deleted (49): room todo was deleted",
                                               "ACK #2 todo e=5 v=0"])

    def test_left_drops_the_replica_and_later_diffs_of_the_room(self):
        s = self.session
        s.parser.next_id = 3
        s.send({"type": "AUTH", "request_id": 2, "credentials": b"t"})
        self.receive({"type": "SNAPSHOT", "request_id": 1, "room": b"board:2", "epoch": 5, "version": 0,
                      "reason": "initial", "digest": wire.snapshot_digest([]), "snapshot": []})
        self.assertIn(b"board:2", s.replicas)
        self.receive({"type": "LEFT", "room": b"board:2", "code": 48, "message": b"no read"})
        self.assertNotIn(b"board:2", s.replicas)
        self.receive({"type": "ACK", "request_id": 2, "epoch": 0, "version": 0})
        self.assertEqual(s.pending, {})
        self.assertEqual(self.out.lines[-2:], ["LEFT board:2 forbidden (48): no read", "ACK #2 e=0 v=0 (AUTH accepted)"])
        # A DIFF for a room left is not applied to anything (there is no replica to resume from).
        self.receive({"type": "DIFF", "room": b"board:2", "epoch": 5, "version": 1, "ops": [
            {"op": "append_sections", "elements": [{"id": b"s", "payload": b""}]}]})
        self.assertNotIn(b"board:2", s.replicas)
        self.assertIsNone(s._position(b"board:2"))
        self.assertEqual(s.status, snapcat.EXIT_OK)

    def welcome(self, version):
        self.receive({"type": "WELCOME", "version": version, "session_id": 7, "server_name": b"t", "limits": []})

    def test_presence_list_pages_through_every_member(self):
        s = self.session
        self.welcome(4)
        s.outbuf.clear()
        for action in s.run_line("presence todo --list 1"):
            s.send(action[1])
        frames = [wire.decode_body(f[4:], version=4) for f in snapcat._split_exactly(bytes(s.outbuf))]
        self.assertEqual([f["type"] for f in frames], ["JOIN", "PRESENCE_LIST"])
        s.outbuf.clear()
        member = {"member_id": 7, "principal": b"a", "joined_at": 0, "state": b""}
        self.receive({"type": "PRESENCE", "request_id": 2, "room": b"todo", "count": 2, "members": [member],
                      "next": 7})
        [again] = [wire.decode_body(f[4:], version=4) for f in snapcat._split_exactly(bytes(s.outbuf))]
        self.assertEqual(again, {"type": "PRESENCE_LIST", "request_id": 3, "room": b"todo", "after": 7, "limit": 1})
        s.outbuf.clear()
        self.receive({"type": "PRESENCE", "request_id": 3, "room": b"todo", "count": 2,
                      "members": [dict(member, member_id=9)], "next": 0})
        self.assertEqual(bytes(s.outbuf), b"")
        self.assertNotIn(2, s.pending)
        self.assertNotIn(3, s.pending)
        self.assertEqual(self.out.lines[-2:], ["PRESENCE #2 todo: 2 members: 7 a next=7",
                                               "PRESENCE #3 todo: 2 members: 9 a"])

    def test_presence_is_not_sent_on_a_version_3_connection(self):
        s = self.session
        self.welcome(3)
        s.outbuf.clear()
        for action in s.run_line("set-presence todo {}"):
            s.send(action[1])
        frames = [wire.decode_body(f[4:], version=3) for f in snapcat._split_exactly(bytes(s.outbuf))]
        self.assertEqual([f["type"] for f in frames], ["JOIN"])
        self.assertTrue(s.mistyped)
        self.assertIn("needs protocol version 4", self.out.notes[-1])

    def test_a_watched_view_follows_the_diffs_and_what_does_not_fit_is_reported(self):
        s = self.session
        self.welcome(4)
        s.send({"type": "PRESENCE_WATCH", "request_id": 2, "room": b"todo", "watch": 1})
        alice = {"member_id": 7, "principal": b"alice", "joined_at": 0, "state": b""}
        bob = dict(alice, member_id=9, principal=b"bob")
        self.receive({"type": "PRESENCE", "request_id": 2, "room": b"todo", "count": 1, "members": [alice], "next": 0})
        self.receive({"type": "PRESENCE_DIFF", "room": b"todo", "count": 2, "changes": [
            {"kind": "joined", "member": bob}, {"kind": "state", "member_id": 7, "state": b"{}"}]})
        self.assertEqual(s.presence_views[b"todo"], {7: dict(alice, state=b"{}"), 9: bob})
        self.assertEqual(self.out.notes, [])
        self.receive({"type": "PRESENCE_DIFF", "room": b"todo", "count": 1, "changes": [
            {"kind": "left", "member_id": 9, "reason": 0}, {"kind": "hidden", "member_id": 12}]})
        self.assertEqual(list(s.presence_views[b"todo"]), [7])
        self.assertEqual(self.out.notes, ["warning: presence of todo: hidden of member 12, not in the view"])
        self.receive({"type": "PRESENCE_DIFF", "room": b"todo", "count": 0, "changes": []})
        self.assertIn("the view holds 1 members, over the room's 0", self.out.notes[-1])
        s.send({"type": "PRESENCE_WATCH", "request_id": 3, "room": b"todo", "watch": 0})
        self.receive({"type": "ACK", "request_id": 3, "epoch": 0, "version": 0})
        self.assertNotIn(b"todo", s.presence_views)
        self.assertEqual(self.out.lines[-1], "ACK #3 todo e=0 v=0 (presence no longer watched)")

    def test_the_ack_of_set_presence_says_so(self):
        s = self.session
        self.welcome(4)
        s.send({"type": "SET_PRESENCE", "request_id": 4, "room": b"todo", "state": b"{}"})
        self.receive({"type": "ACK", "request_id": 4, "epoch": 0, "version": 0})
        self.assertEqual(self.out.lines[-1], "ACK #4 todo e=0 v=0 (presence set)")
        self.assertEqual(s.pending, {})

    def test_token_errors_end_with_the_server_error_status(self):
        self.receive({"type": "ERROR", "code": 13, "message": b"token of alice expired at 2100-01-01T00:00:00Z"})
        self.assertEqual(self.session.status, snapcat.EXIT_SERVER_ERROR)
        self.assertEqual(self.out.lines, ["ERROR token_expired (13): token of alice expired at 2100-01-01T00:00:00Z"])


class WindowCommandTests(unittest.TestCase):
    """join ROOM window ... and window ROOM ... (WINDOW, PROTOCOL.md section 11.29)."""

    def setUp(self):
        self.p = snapcat.CommandParser()

    def test_join_window_and_window_send_window(self):
        [w] = sent(self.p, "join feed window posts around post500 10 20 pinned first 3 log last 0")
        self.assertEqual(w, {"type": "WINDOW", "request_id": 1, "room": b"feed", "window": [
            {"section": b"posts", "around": b"post500", "before": 10, "after": 20},
            {"section": b"pinned", "first": 3}, {"section": b"log", "last": 0}]})
        [w] = sent(self.p, "window feed posts last 100")
        self.assertEqual(w, {"type": "WINDOW", "request_id": 2, "room": b"feed",
                             "window": [{"section": b"posts", "last": 100}]})
        [w] = sent(self.p, "window feed")
        self.assertEqual(w["window"], [])
        [w] = sent(self.p, "join feed window 0x00ff first 1")
        self.assertEqual(w["window"], [{"section": b"\x00\xff", "first": 1}])

    def test_mistyped_windows_send_nothing(self):
        for bad in ["window", "window feed posts", "window feed posts first", "window feed posts middle 3",
                    "window feed posts first -1", "window feed posts first x", "window feed posts around a 1",
                    "join feed window posts around a 1 x", "window feed posts first %d" % 2**64]:
            with self.subTest(line=bad):
                with self.assertRaises(snapcat.UsageError) as ctx:
                    self.p.parse(bad)
                self.assertIn("usage:", str(ctx.exception))
        self.assertEqual(self.p.next_id, 1)


FEED_EPOCH = 2246800662264969608


class WindowSessionTests(unittest.TestCase):
    """A windowed replica: WINDOW_STATE, then WINDOW_DIFF frames, shown with counts."""

    def setUp(self):
        self.out = CapturedOutput()
        args = types.SimpleNamespace(max_frame=wire.DEFAULT_MAX_FRAME_BYTES, no_hello=False)
        self.session = snapcat.Session(None, args, self.out)
        self.receive({"type": "WELCOME", "version": 4, "session_id": 7, "server_name": b"t", "limits": []})

    def receive(self, msg):
        self.session.receive(wire.encode_frame(msg))

    def state(self):
        s = self.session
        [(_, request)] = s.run_line("join feed window posts around p5 1 1")
        s.send(request)
        self.assertTrue(s._is_member(b"feed"))
        self.receive({"type": "WINDOW_STATE", "request_id": request["request_id"], "room": b"feed", "epoch": FEED_EPOCH, "version": 9,
                      "chain": bytes(32), "window": [{"section": b"posts", "around": b"p5", "before": 1, "after": 1}],
                      "counts": [1, 1000000], "snapshot": [
                          {"id": b"pinned", "payload": b"", "items": []},
                          {"id": b"posts", "payload": b"", "items": [{"id": b"p4", "payload": b""},
                                                                    {"id": b"p5", "payload": b""},
                                                                    {"id": b"p6", "payload": b""}]}]})
        self.assertEqual(s.pending, {})
        return s.replicas[b"feed"]

    def test_a_window_state_then_diffs(self):
        rep = self.state()
        self.assertTrue(rep.windowed)
        self.assertEqual(self.out.lines[-1],
                         "WINDOW_STATE #1 feed e=%d v=9 window=[posts around p5 1 1] 2 sections, 1,000,001 items, "
                         "3 shown: pinned (1 item) | posts (1,000,000 items) [p4, p5, p6]" % FEED_EPOCH)
        # A live change: p5 deleted, re-anchored on p6, p7 comes in; versions may skip.
        self.receive({"type": "WINDOW_DIFF", "request_id": 0, "room": b"feed", "epoch": FEED_EPOCH, "version": 12,
                      "window": [{"section": b"posts", "around": b"p6", "before": 1, "after": 1}],
                      "counts": [{"section": b"posts", "items": 999999}],
                      "ops": [{"op": "delete_items", "ids": [b"p5"]},
                              {"op": "insert_items", "placement": {"side": "after", "anchor": b"p6"},
                               "elements": [{"id": b"p7", "payload": b""}]}]})
        self.assertEqual(self.out.lines[-1],
                         "WINDOW_DIFF feed e=%d v=12 window=[posts around p6 1 1]; counts posts=999999; "
                         "delete_items [p5]; insert_items after p6 [p7]" % FEED_EPOCH)
        self.assertTrue(rep.in_sync, rep.problem)
        self.assertEqual(rep.version, 12)
        self.assertEqual(rep.counts, {b"pinned": 1, b"posts": 999999})
        self.assertEqual(self.out.notes, [])
        self.out.lines.clear()
        snapcat.show_replica(self.session, self.out, b"feed")
        self.assertEqual(self.out.lines[0].split("\n"), [
            "<feed epoch=%d version=12; windowed [posts around p6 1 1]; 2 sections, 1,000,000 items, 3 shown>"
            % FEED_EPOCH,
            "├─ section pinned (1 item): not in the window",
            "└─ section posts (999,999 items): rows shown 3 (around p6 1 1)",
            "   ├─ item p4", "   ├─ item p6", "   └─ item p7"])
        # The answer to a WINDOW that moves the window: its request id, the window, the new rows.
        for action in self.session.run_line("window feed posts first 1"):
            self.session.send(action[1])
        self.receive({"type": "WINDOW_DIFF", "request_id": 2, "room": b"feed", "epoch": FEED_EPOCH, "version": 12,
                      "window": [{"section": b"posts", "first": 1}], "counts": [],
                      "ops": [{"op": "delete_items", "ids": [b"p4", b"p6", b"p7"]},
                              {"op": "append_items", "section": b"posts", "elements": [{"id": b"p0", "payload": b""}]}]})
        self.assertEqual(self.session.pending, {})
        self.assertEqual(self.out.lines[-1].split(" ", 2)[:2], ["WINDOW_DIFF", "#2"])
        self.assertEqual([i["id"] for i in rep.snapshot.sections[1]["items"]], [b"p0"])
        self.assertTrue(rep.in_sync, rep.problem)

    def test_a_diff_that_does_not_apply_is_reported(self):
        rep = self.state()
        self.receive({"type": "WINDOW_DIFF", "request_id": 0, "room": b"feed", "epoch": FEED_EPOCH, "version": 10,
                      "window": None, "counts": [], "ops": [{"op": "delete_items", "ids": [b"nope"]}]})
        self.assertFalse(rep.in_sync)
        self.assertIn("does not apply", rep.problem)
        self.assertTrue(any("windowed replica of feed out of sync" in n for n in self.out.notes), self.out.notes)

    def test_a_diff_going_back_or_of_another_epoch_is_reported(self):
        for epoch, version in ((FEED_EPOCH, 8), (FEED_EPOCH + 1, 10)):
            with self.subTest(epoch=epoch, version=version):
                rep = self.state()
                self.receive({"type": "WINDOW_DIFF", "request_id": 0, "room": b"feed", "epoch": epoch,
                              "version": version, "window": None, "counts": [], "ops": []})
                self.assertFalse(rep.in_sync)
                self.assertIn("does not follow", rep.problem)

    def test_counts_that_do_not_fit_are_reported(self):
        rep = self.state()
        self.receive({"type": "WINDOW_DIFF", "request_id": 0, "room": b"feed", "epoch": FEED_EPOCH, "version": 10,
                      "window": None, "counts": [{"section": b"posts", "items": 2}], "ops": []})
        self.assertFalse(rep.in_sync)
        self.assertIn("shows 3 items but counts 2", rep.problem)

    def test_a_windowed_replica_is_not_resumed_and_a_diff_for_it_is_reported(self):
        rep = self.state()
        [note, (kind, msg)] = self.session.run_line("join feed resume")
        self.assertEqual(note[0], "note")
        self.assertIn("windowed", note[1])
        self.assertIsNone(msg["resume"])
        self.receive({"type": "DIFF", "room": b"feed", "epoch": FEED_EPOCH, "version": 10, "ops": [],
                      "chain": bytes(32)})
        self.assertFalse(rep.in_sync)
        # A SNAPSHOT (the answer to a JOIN) makes the replica a full one again.
        self.receive({"type": "SNAPSHOT", "request_id": 5, "room": b"feed", "epoch": FEED_EPOCH, "version": 10,
                      "reason": "initial", "digest": wire.snapshot_digest([]), "chain": bytes(32), "snapshot": []})
        self.assertFalse(self.session.replicas[b"feed"].windowed)

    def test_window_is_not_sent_on_a_version_3_connection(self):
        out = CapturedOutput()
        args = types.SimpleNamespace(max_frame=wire.DEFAULT_MAX_FRAME_BYTES, no_hello=False)
        s = snapcat.Session(None, args, out)
        s.receive(wire.encode_frame({"type": "WELCOME", "version": 3, "session_id": 7, "server_name": b"t",
                                     "limits": []}))
        s.outbuf.clear()
        for action in s.run_line("window feed posts first 3"):
            s.send(action[1])
        self.assertEqual(bytes(s.outbuf), b"")
        self.assertTrue(s.mistyped)
        self.assertIn("window needs protocol version 4", out.notes[-1])


if __name__ == "__main__":
    unittest.main()
