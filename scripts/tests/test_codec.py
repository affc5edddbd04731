"""snapcat's codec against PROTOCOL.md sections 1-5, beyond what the shared vectors cover."""

import unittest

from tests.support import wire


def frame(body_hex):
    body = bytes.fromhex(body_hex.replace(" ", ""))
    return len(body).to_bytes(4, "big") + body


class VarintTests(unittest.TestCase):
    def test_round_trip_at_the_edges(self):
        for value, hexed in [(0, "00"), (1, "01"), (127, "7f"), (128, "8001"), (300, "ac02"),
                             (2**63, "80808080808080808001"),
                             (2**64 - 1, "ffffffffffffffffff01")]:
            self.assertEqual(wire.enc_varint(value).hex(), hexed)
            r = wire.Reader(bytes.fromhex(hexed))
            self.assertEqual(r.varint(), value)
            self.assertEqual(r.remaining(), 0)

    def test_bad_varints(self):
        for hexed, why in [("8000", "not minimal"), ("ff00", "not minimal"),
                           ("ffffffffffffffffff02", "past 64 bits"),
                           ("ffffffffffffffffff7f", "past 64 bits"),
                           ("8080808080808080808000", "11 bytes"), ("80", "truncated"), ("", "empty")]:
            with self.subTest(hexed=hexed, why=why):
                with self.assertRaises(wire.WireError) as ctx:
                    wire.Reader(bytes.fromhex(hexed)).varint()
                self.assertEqual(ctx.exception.name, "malformed_frame")
        with self.assertRaises(ValueError):
            wire.enc_varint(2**64)


class FrameTests(unittest.TestCase):
    messages = [
        {"type": "PING", "nonce": 7},
        {"type": "WELCOME", "version": 1, "session_id": 3, "server_name": b"snapsyncd",
         "limits": [{"key": 1, "value": 16 << 20}, {"key": 99, "value": 5}]},
        {"type": "SNAPSHOT", "request_id": 1, "room": b"lobby", "epoch": 2**40, "version": 3,
         "reason": "resync", "digest": bytes(range(32)),
         "snapshot": [{"id": b"s", "payload": b"p", "items": [{"id": b"", "payload": b"\xff"}]}]},
        {"type": "REJECT", "request_id": 9, "code": 22, "op_index": 0, "identifier": b"",
         "message": b"no section"},
        {"type": "REJECT", "request_id": 9, "code": 40, "op_index": None, "identifier": None,
         "message": b""},
        {"type": "DIFF", "room": b"r", "epoch": 1, "version": 2, "ops": [
            {"op": "update_items", "kind": "reconfigure", "elements": [{"id": b"a", "payload": b"x"}]},
            {"op": "append_items", "section": None, "elements": []}]},
    ]

    def test_whole_byte_by_byte_many_and_truncated(self):
        frames = [wire.encode_frame(m) for m in self.messages]
        for m, f in zip(self.messages, frames):
            self.assertEqual(wire.decode_frame(f), m)
            # Byte by byte: nothing comes out until the last byte is in.
            sp = wire.FrameSplitter()
            for i in range(len(f) - 1):
                sp.feed(f[i:i + 1])
                self.assertEqual(list(sp.frames()), [])
            sp.feed(f[-1:])
            self.assertEqual(list(sp.frames()), [f])
            self.assertEqual(len(sp.buf), 0)
            # Truncated bodies are malformed when decoded as a whole frame.
            for cut in range(1, len(f) - 4):
                with self.assertRaises(wire.WireError):
                    wire.decode_body(f[4:4 + cut])
        sp = wire.FrameSplitter()
        sp.feed(b"".join(frames))
        self.assertEqual(list(sp.frames()), frames)

    def test_length_limits_are_checked_before_the_body_arrives(self):
        sp = wire.FrameSplitter(max_frame_bytes=10)
        sp.feed((11).to_bytes(4, "big"))
        with self.assertRaises(wire.WireError) as ctx:
            list(sp.frames())
        self.assertEqual(ctx.exception.name, "frame_too_large")
        sp = wire.FrameSplitter(max_frame_bytes=10)
        sp.feed((10).to_bytes(4, "big") + b"\x04")
        self.assertEqual(list(sp.frames()), [])
        with self.assertRaises(wire.WireError) as ctx:
            wire.decode_frame(bytes(4))
        self.assertEqual(ctx.exception.name, "malformed_frame")

    def test_field_errors(self):
        cases = [
            ("0401ff", "malformed_frame"),                  # trailing byte after PING's nonce
            ("ff", "unknown_message_type"),
            ("30", "unknown_message_type"),
            ("01534e4151 01 01 00 00".replace(" ", ""), "bad_magic"),
            ("01534e415000 00 00".replace(" ", ""), "malformed_frame"),   # no versions
            ("1001 016c 02".replace(" ", ""), "malformed_frame"),       # opt flag 2
            ("2001016c0101 02".replace(" ", "") + "00" * 32 + "00", "malformed_frame"),  # reason 2
            ("22016c0101 01 ff".replace(" ", ""), "malformed_frame"),   # unknown opcode
            ("22016c0101 01 02 02 00 00".replace(" ", ""), "malformed_frame"),  # side 2
            ("22016c0101 01 16 02 00".replace(" ", ""), "malformed_frame"),     # kind 2
            ("12 01 016c 00 21".replace(" ", "") + "00" * 33 + "00", "malformed_frame"),  # write_id 33
            ("22016c0101 05".replace(" ", ""), "malformed_frame"),      # list count past the end
        ]
        for hexed, name in cases:
            with self.subTest(hexed=hexed):
                with self.assertRaises(wire.WireError) as ctx:
                    wire.decode_body(bytes.fromhex(hexed))
                self.assertEqual(ctx.exception.name, name)

    def test_direction_filter(self):
        hello = wire.encode_frame({"type": "HELLO", "magic": b"SNAP", "versions": [1],
                                   "client_name": b"x", "credentials": b""})
        self.assertEqual(wire.decode_frame(hello)["type"], "HELLO")
        with self.assertRaises(wire.WireError) as ctx:
            wire.decode_frame(hello, accept=wire.SERVER_TO_CLIENT)
        self.assertEqual(ctx.exception.name, "unknown_message_type")

    def test_json_form_round_trips(self):
        for m in self.messages:
            j = wire.message_to_json(m)
            self.assertEqual(wire.message_from_json(j), m)


class PresenceCodecTests(unittest.TestCase):
    """The presence messages of version 4 (PROTOCOL.md sections 11.24-11.28) through snapcat's codec."""

    alice = {"member_id": 7, "principal": b"alice", "joined_at": 1767225600000, "state": b'{"at":"milk"}'}
    bob = {"member_id": 2**64 - 1, "principal": "b\u00f6b".encode(), "joined_at": 0, "state": b"\x00\xff"}
    messages = [
        {"type": "PRESENCE_WATCH", "request_id": 1, "room": b"todo", "watch": 1},
        {"type": "PRESENCE_WATCH", "request_id": 2, "room": b"todo", "watch": 0},
        {"type": "PRESENCE_LIST", "request_id": 3, "room": b"todo", "after": 2**64 - 1, "limit": 0},
        {"type": "SET_PRESENCE", "request_id": 4, "room": b"todo", "state": b""},
        {"type": "SET_PRESENCE", "request_id": 5, "room": b"todo", "state": b"\x01" * 1025},
        {"type": "PRESENCE", "request_id": 6, "room": b"todo", "count": 0, "members": [], "next": 0},
        {"type": "PRESENCE", "request_id": 7, "room": b"todo", "count": 3, "members": [alice, bob], "next": 0},
        {"type": "PRESENCE_DIFF", "room": b"todo", "count": 0, "changes": []},
        {"type": "PRESENCE_DIFF", "room": b"todo", "count": 9, "changes": [
            {"kind": "joined", "member": alice}, {"kind": "left", "member_id": 1, "reason": 200},
            {"kind": "state", "member_id": 3, "state": b""}, {"kind": "shown", "member": bob},
            {"kind": "hidden", "member_id": 4}]},
    ]

    def test_round_trips_in_version_4_only(self):
        for m in self.messages:
            with self.subTest(type=m["type"]):
                f = wire.encode_frame(m)
                self.assertEqual(wire.decode_frame(f, version=4), m)
                self.assertEqual(wire.message_from_json(wire.message_to_json(m)), m)
                for cut in range(1, len(f) - 4):
                    with self.assertRaises(wire.WireError):
                        wire.decode_body(f[4:4 + cut], version=4)
                for version in (1, 2, 3):
                    with self.assertRaises(wire.WireError) as ctx:
                        wire.decode_frame(f, version=version)
                    self.assertEqual(ctx.exception.name, "unknown_message_type")

    def test_the_json_form_of_a_change(self):
        j = wire.message_to_json(self.messages[-1])
        self.assertEqual(j["changes"][0]["member"]["principal"], "alice")
        self.assertEqual(j["changes"][1], {"kind": "left", "member_id": 1, "reason": 200})
        self.assertEqual(j["changes"][3]["member"]["state"], {"hex": "00ff"})
        self.assertEqual(j["changes"][4], {"kind": "hidden", "member_id": 4})

    def test_rules(self):
        def diff(*changes):
            return {"type": "PRESENCE_DIFF", "room": b"r", "count": 1, "changes": list(changes)}
        bad = [
            wire.encode_body({"type": "PRESENCE_WATCH", "request_id": 1, "room": b"r", "watch": 1})[:-1] + b"\x02",
            wire.encode_body({"type": "PRESENCE", "request_id": 1, "room": b"r", "count": 2,
                              "members": [self.bob, self.alice], "next": 0}),
            wire.encode_body({"type": "PRESENCE", "request_id": 1, "room": b"r", "count": 2,
                              "members": [dict(self.alice, member_id=0)], "next": 0}),
            wire.encode_body(diff({"kind": "hidden", "member_id": 7}, {"kind": "joined", "member": self.alice})),
            wire.encode_body(diff({"kind": "hidden", "member_id": 0})),
            bytes.fromhex("29 01 72 01 01 05 01".replace(" ", "")),     # kind 5
        ]
        for body in bad:
            with self.subTest(body=body.hex()):
                with self.assertRaises(wire.WireError) as ctx:
                    wire.decode_body(body, version=4)
                self.assertEqual(ctx.exception.name, "malformed_frame")
        with self.assertRaises(ValueError):
            wire.encode_body({"type": "PRESENCE_WATCH", "request_id": 1, "room": b"r", "watch": 2})


class WindowCodecTests(unittest.TestCase):
    """WINDOW, WINDOW_STATE and WINDOW_DIFF (PROTOCOL.md sections 11.29-11.31, version 4)."""

    around = {"section": b"posts", "around": b"post500", "before": 1, "after": 2}
    snapshot = [{"id": b"pinned", "payload": b"P", "items": []},
                {"id": b"posts", "payload": b"", "items": [{"id": b"post500", "payload": b""},
                                                          {"id": b"c", "payload": b"", "level": 1}]}]
    messages = [
        {"type": "WINDOW", "request_id": 1, "room": b"feed",
         "window": [around, {"section": b"pinned", "first": 0}, {"section": b"\x00", "last": 2**64 - 1}]},
        {"type": "WINDOW", "request_id": 2, "room": b"feed", "window": []},
        {"type": "WINDOW_STATE", "request_id": 1, "room": b"feed", "epoch": 9, "version": 1000,
         "chain": bytes(range(32)), "window": [around], "counts": [1, 1000], "snapshot": snapshot},
        {"type": "WINDOW_DIFF", "request_id": 0, "room": b"feed", "epoch": 9, "version": 1001, "window": None,
         "counts": [{"section": b"posts", "items": 999}], "ops": [{"op": "delete_items", "ids": [b"c"]}]},
        {"type": "WINDOW_DIFF", "request_id": 3, "room": b"feed", "epoch": 9, "version": 1001,
         "window": [{"section": b"posts", "last": 5}], "counts": [], "ops": []},
    ]

    def test_round_trips_in_version_4_only(self):
        for msg in self.messages:
            with self.subTest(type=msg["type"], request_id=msg["request_id"]):
                data = wire.encode_frame(msg)
                self.assertEqual(wire.decode_frame(data, version=4), msg)
                self.assertEqual(wire.message_from_json(wire.message_to_json(msg)), msg)
                side = wire.CLIENT_TO_SERVER if msg["type"] == "WINDOW" else wire.SERVER_TO_CLIENT
                wire.decode_frame(data, accept=side, version=4)
                other = wire.SERVER_TO_CLIENT if msg["type"] == "WINDOW" else wire.CLIENT_TO_SERVER
                for accept, version in ((other, 4), (None, 3)):
                    with self.assertRaises(wire.WireError) as ctx:
                        wire.decode_frame(data, accept=accept, version=version)
                    self.assertEqual(ctx.exception.name, "unknown_message_type")

    def test_layout_bytes(self):
        # Section 11.29: section bytes, kind u8, then the kind's fields.
        self.assertEqual(wire.encode_body(self.messages[0]).hex(),
                         "1d" "01" "0466656564" "03"
                         "05706f737473" "02" "07706f7374353030" "01" "02"
                         "0670696e6e6564" "00" "00"
                         "0100" "01" "ffffffffffffffffff01")
        # Section 11.31: window is an opt, then the counts, then the ops.
        self.assertEqual(wire.encode_body(self.messages[4]).hex(),
                         "2b" "03" "0466656564" "09" "e907" "01" "01" "05706f737473" "01" "05" "00" "00")

    def test_the_json_form(self):
        self.assertEqual(wire.message_to_json(self.messages[0])["window"], [
            {"section": "posts", "around": "post500", "before": 1, "after": 2}, {"section": "pinned", "first": 0},
            {"section": {"hex": "00"}, "last": 2**64 - 1}])
        j = wire.message_to_json(self.messages[3])
        self.assertIsNone(j["window"])
        self.assertEqual(j["counts"], [{"section": "posts", "items": 999}])
        self.assertEqual(wire.message_to_json(self.messages[2])["counts"], [1, 1000])

    def test_rules(self):
        window = wire.encode_body(self.messages[1])[:-1]
        for kind in (3, 0x80, 0xFF):
            with self.subTest(kind=kind):
                body = window + bytes([1]) + wire.enc_bytes(b"s") + bytes([kind]) + b"\x01"
                with self.assertRaises(wire.WireError) as ctx:
                    wire.decode_body(body, version=4)
                self.assertEqual(ctx.exception.name, "malformed_frame")
                self.assertIn("section window kind", ctx.exception.message)
        state = dict(self.messages[2])
        for counts in ([1], [1, 2, 3], []):
            with self.subTest(counts=counts):
                with self.assertRaises(wire.WireError) as ctx:
                    wire.decode_body(wire.encode_body(dict(state, counts=counts)), version=4)
                self.assertEqual(ctx.exception.name, "malformed_frame")
        head = bytes.fromhex("2b" "00" "0466656564" "09" "e907")
        for flag in (2, 0xFF):
            with self.assertRaises(wire.WireError) as ctx:
                wire.decode_body(head + bytes([flag]) + b"\x00\x00", version=4)
            self.assertEqual(ctx.exception.name, "malformed_frame")
        # The content limits apply to WINDOW_STATE's snapshot and WINDOW_DIFF's ops (section 12).
        with self.assertRaises(wire.WireError) as ctx:
            wire.decode_body(wire.encode_body(dict(self.messages[3], ops=[{"op": "delete_items", "ids": [b"x" * 9]}])),
                             limits={"max_identifier_bytes": 8}, version=4)
        self.assertEqual(ctx.exception.name, "identifier_too_long")
        with self.assertRaises(wire.WireError) as ctx:
            wire.decode_body(wire.encode_body(self.messages[2]), limits={"max_items_per_room": 1}, version=4)
        self.assertEqual(ctx.exception.name, "too_many_items")

    def test_sizes_limit_key_and_error_code(self):
        self.assertEqual(wire.window_size(self.around), 4)
        self.assertEqual(wire.window_size({"section": b"s", "last": 7}), 7)
        self.assertEqual(wire.LIMIT_KEYS[12], "max_window_rows")
        self.assertEqual(wire.limits_from({12: 50})["max_window_rows"], 50)
        self.assertEqual(wire.DEFAULT_LIMITS["max_window_rows"], 1000)
        self.assertEqual(wire.error_name(57), "window_too_large")


if __name__ == "__main__":
    unittest.main()
