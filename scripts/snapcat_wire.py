"""SnapSync wire protocol (versions 2 and 1) and snapshot model, written from Protocol/PROTOCOL.md alone.

This is snapcat's codec. It is an independent second implementation of the protocol (it shares no
code with the Swift codec), so the vectors in Protocol/vectors/ check both against the spec.
Standard library only.

Representation used throughout (the "native" form):
  - identifiers, payloads, credentials, write ids: ``bytes``;
  - protocol strings (room, names, messages): ``bytes`` as well, so that a non-UTF-8 string from a
    peer can still be shown; the JSON form turns them into text;
  - a message: a dict with "type" (the upper-case name, e.g. "DIFF") and one key per field, named
    as in PROTOCOL.md section 3;
  - a snapshot: a list of sections ``{"id", "payload", "items": [{"id", "payload", "level"}]}``,
    items in depth-first order with their level (0: a root; "level" may be left out for 0);
  - an op: ``{"op": name, ...fields}``; a placement: ``{"side": "before"|"after", "anchor": id}``.
"""

import hashlib
import json

# The layout a frame is read in unless the connection's version is given: version 2, without the
# chain field of version 3 (which logs, vectors of versions 1 and 2, and the chain's input use).
PROTOCOL_VERSION = 2
# What snapcat offers in HELLO, highest first; the server takes the highest it speaks, whatever
# the order (PROTOCOL.md section 8.2).
SUPPORTED_VERSIONS = [4, 3, 2, 1]
# The first version whose SNAPSHOT and DIFF carry the room's chain (section 9).
CHAIN_VERSION = 3
CHAIN_BYTES = 32
ZERO_CHAIN = bytes(CHAIN_BYTES)
# Version 2 additions that a version 1 connection does not have (section 8.2).
V2_OPCODES = {0x17, 0x18}
V2_MESSAGES = {0x18}
# Version 3 additions that versions 1 and 2 do not have: VERIFY and DIGEST (section 8.2).
V3_MESSAGES = {0x19, 0x27}
# Version 4 additions (presence, section 9): PRESENCE_WATCH, PRESENCE_LIST, SET_PRESENCE, PRESENCE
# and PRESENCE_DIFF; a version 3 (or older) connection treats them as unknown message types.
PRESENCE_VERSION = 4
V4_MESSAGES = {0x1A, 0x1B, 0x1C, 0x28, 0x29, 0x1D, 0x2A, 0x2B}
# Windowed subscriptions (section 9, "Windows"), also version 4: WINDOW, WINDOW_STATE, WINDOW_DIFF.
WINDOW_MESSAGES = {0x1D, 0x2A, 0x2B}
# Field kinds only version 3 has: a DIFF's and SNAPSHOT's chain, and CATCHUP's `folded`
# (section 11.12: opt<digest>, None for the replayed form). A message of version 1 or 2 has no key
# for them at all; one of version 3 has CATCHUP's "folded" always (None or the 32-byte digest).
V3_FIELD_KINDS = {"chain", "v3_opt_digest"}
MAGIC = b"SNAP"
DEFAULT_MAX_FRAME_BYTES = 16 * 1024 * 1024
MAX_WRITE_ID_BYTES = 32
MAX_VARINT = (1 << 64) - 1


# ---------------------------------------------------------------------------------------------
# Errors (PROTOCOL.md section 6)

ERROR_CODES = {
    1: "malformed_frame",
    2: "frame_too_large",
    3: "unknown_message_type",
    4: "handshake_required",
    5: "unsupported_version",
    6: "bad_magic",
    7: "too_many_connections",
    8: "slow_consumer",
    9: "timeout",
    10: "shutting_down",
    11: "unauthorized",
    12: "input_budget_exceeded",
    13: "token_expired",
    20: "duplicate_section",
    21: "duplicate_item",
    22: "section_not_found",
    23: "item_not_found",
    24: "anchor_section_not_found",
    25: "anchor_item_not_found",
    26: "no_sections",
    27: "anchor_is_self",
    28: "identifier_too_long",
    29: "payload_too_large",
    30: "too_many_items",
    31: "too_many_sections",
    32: "snapshot_too_large",
    40: "version_mismatch",
    41: "too_many_rooms",
    42: "too_many_rooms_for_connection",
    43: "not_joined",
    44: "invalid_room_name",
    45: "storage_failure",
    46: "write_id_conflict",
    47: "server_full",
    48: "forbidden",
    49: "room_deleted",
    50: "room_expired",
    51: "parent_not_found",
    52: "move_into_own_subtree",
    53: "outline_too_deep",
    54: "outline_unsupported",
    55: "busy",
    56: "quota_exceeded",
    57: "window_too_large",
}
ERROR_NAMES = {name: code for code, name in ERROR_CODES.items()}


def error_name(code):
    """The name of a wire error code; unknown codes are shown as ``unknown_<code>``."""
    return ERROR_CODES.get(code, "unknown_%d" % code)


class WireError(Exception):
    """A frame or field that breaks the protocol; ``name`` is the PROTOCOL.md error name."""

    def __init__(self, name, message, identifier=None):
        super().__init__("%s: %s" % (name, message))
        self.name = name
        self.code = ERROR_NAMES[name]
        self.message = message
        self.identifier = identifier    # for content rules about one identifier (section 4)


def _malformed(message):
    return WireError("malformed_frame", message)


# ---------------------------------------------------------------------------------------------
# Field encodings (PROTOCOL.md section 2)

class Reader:
    """Reads fields from one frame body; every read checks it stays inside the body."""

    def __init__(self, data, pos=0, version=PROTOCOL_VERSION):
        self.data = bytes(data)
        self.pos = pos
        self.version = version      # the connection's: version 1 reads no levels nor v2 ops

    def remaining(self):
        return len(self.data) - self.pos

    def take(self, n, what):
        if n > self.remaining():
            raise _malformed("%s runs past the end of the body (%d bytes needed, %d left)"
                             % (what, n, self.remaining()))
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def u8(self, what="u8"):
        return self.take(1, what)[0]

    def varint(self, what="varint"):
        value = 0
        for i in range(10):
            if self.pos >= len(self.data):
                raise _malformed("bad varint: %s runs past the end of the body" % what)
            byte = self.data[self.pos]
            self.pos += 1
            value |= (byte & 0x7F) << (7 * i)
            if not byte & 0x80:
                if byte == 0 and i > 0:
                    raise _malformed("bad varint: %s is not minimally encoded" % what)
                if value > MAX_VARINT:
                    raise _malformed("bad varint: %s does not fit in 64 bits" % what)
                return value
        raise _malformed("bad varint: %s is longer than 10 bytes" % what)

    def bytes_(self, what="bytes"):
        n = self.varint(what + " length")
        return self.take(n, what)

    def string(self, what="string"):
        # Validated (PROTOCOL.md section 2: snapcat rejects invalid UTF-8 as malformed_frame) but
        # kept as bytes, like identifiers, since strings are compared byte for byte.
        data = self.bytes_(what)
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            raise _malformed("%s is not valid UTF-8: %s" % (what, data.hex()))
        return data

    def digest(self, what="digest"):
        return self.take(32, what)

    def magic(self, what="magic"):
        got = self.take(4, what)
        if got != MAGIC:
            raise WireError("bad_magic", "magic is %s, not 534e4150 (\"SNAP\")" % got.hex())
        return got

    def opt(self, read, what):
        flag = self.u8(what + " presence flag")
        if flag == 0:
            return None
        if flag == 1:
            return read(what)
        raise _malformed("%s presence flag is 0x%02x (must be 0x00 or 0x01)" % (what, flag))

    def list_(self, read, what):
        n = self.varint(what + " count")
        # Every element takes at least one byte, so a count past the bytes left is malformed;
        # checking it first keeps a hostile count from looping or allocating.
        if n > self.remaining():
            raise _malformed("%s count %d exceeds the %d bytes left" % (what, n, self.remaining()))
        return [read(what) for _ in range(n)]


def enc_varint(value):
    if not isinstance(value, int) or value < 0 or value > MAX_VARINT:
        raise ValueError("varint out of range: %r" % (value,))
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def enc_bytes(data):
    data = bytes(data)
    return enc_varint(len(data)) + data


def enc_u8(value):
    if not 0 <= value <= 0xFF:
        raise ValueError("u8 out of range: %r" % (value,))
    return bytes([value])


def enc_opt(value, enc):
    return b"\x00" if value is None else b"\x01" + enc(value)


def enc_list(values, enc):
    return enc_varint(len(values)) + b"".join(enc(v) for v in values)


# ---------------------------------------------------------------------------------------------
# Snapshots (PROTOCOL.md section 4)

def read_element(r, what="element"):
    return {"id": r.bytes_(what + " id"), "payload": r.bytes_(what + " payload")}


def enc_element(e):
    return enc_bytes(e["id"]) + enc_bytes(e.get("payload", b""))


def read_section(r, what="section"):
    sid = r.bytes_("section id")
    payload = r.bytes_("section payload")
    items = r.list_(lambda w: read_element(r, "item"), "items")
    return {"id": sid, "payload": payload, "items": items}


def enc_section(s):
    return enc_bytes(s["id"]) + enc_bytes(s.get("payload", b"")) + enc_list(s.get("items", []), enc_element)


def level(item):
    return item.get("level", 0)


def at_level(item, lv):
    """The item at level lv, in the native form: "level" only when it is above 0, so that a flat
    snapshot reads exactly as in version 1."""
    out = {k: v for k, v in item.items() if k != "level"}
    if lv:
        out["level"] = lv
    return out


def read_levels(r, groups):
    """The `levels` part (PROTOCOL.md section 4) after a snapshot field's items, grouped by
    section: every byte left in the body. Sets each item's "level"; malformed_frame unless it is
    one varint per item, each section starting at 0, no step up of more than one, and not all 0.
    Version 1 reads none (what is left is then trailing bytes)."""
    if r.version < 2 or not r.remaining():
        return
    n = sum(len(items) for items in groups)
    if r.remaining() < n:       # each varint takes a byte: checked before reading any
        raise _malformed("levels: %d bytes left for %d items" % (r.remaining(), n))
    deepest = 0
    for items in groups:
        previous = -1
        for item in items:
            lv = r.varint("level")
            if lv > previous + 1:
                raise _malformed("levels: item %s at level %d after level %d"
                                 % (_show(item["id"]), lv, previous))
            previous = lv
            if lv:
                item["level"] = lv
            deepest = max(deepest, lv)
    if r.remaining():
        raise _malformed("levels: %d bytes left after one level per item" % r.remaining())
    if deepest == 0:
        raise _malformed("levels: every level is 0 (a flat snapshot has no levels part)")


def enc_levels(items):
    return b"".join(enc_varint(level(i)) for i in items) if any(level(i) for i in items) else b""


def read_snapshot(r, what="snapshot"):
    sections = r.list_(lambda w: read_section(r), "sections")
    read_levels(r, [s["items"] for s in sections])
    return sections


def read_section_items(r, what="items"):
    items = r.list_(lambda w: read_element(r, "item"), "items")
    read_levels(r, [items])
    return items


def encode_snapshot(snapshot):
    """The canonical encoding of a snapshot (also what its digest is computed over)."""
    return enc_list(snapshot, enc_section) + enc_levels([i for s in snapshot for i in s.get("items", [])])


def encode_section_items(items):
    return enc_list(items, enc_element) + enc_levels(items)


def snapshot_digest(snapshot):
    return hashlib.sha256(encode_snapshot(snapshot)).digest()


def _show(ident):
    try:
        return repr(bytes(ident).decode("utf-8"))
    except UnicodeDecodeError:
        return "0x" + bytes(ident).hex()


def _check_element(e, limits, what):
    if len(e["id"]) > limits["max_identifier_bytes"]:
        raise WireError("identifier_too_long", "%s identifier of %d bytes exceeds "
                        "max_identifier_bytes %d" % (what, len(e["id"]), limits["max_identifier_bytes"]),
                        e["id"])
    if len(e["payload"]) > limits["max_payload_bytes"]:
        raise WireError("payload_too_large", "%s %s payload of %d bytes exceeds max_payload_bytes %d"
                        % (what, _show(e["id"]), len(e["payload"]), limits["max_payload_bytes"]),
                        e["id"])


def check_snapshot_content(snapshot, limits=None):
    """The rules every snapshot obeys (PROTOCOL.md section 4): unique identifiers and the content
    limits, checked in the section's order: the encoding's size first, then each section followed
    by its items; for each element its identifier's length, its payload's size, uniqueness, then
    the count it would take over the limit. Raises WireError named after the first broken rule
    (not malformed_frame)."""
    limits = limits_from(limits)
    size = len(encode_snapshot(snapshot))
    if size > limits["max_snapshot_bytes"]:
        raise WireError("snapshot_too_large", "snapshot encoding of %d bytes exceeds "
                        "max_snapshot_bytes %d" % (size, limits["max_snapshot_bytes"]))
    sections, items = set(), set()
    for sec in snapshot:
        _check_element(sec, limits, "section")
        if sec["id"] in sections:
            raise WireError("duplicate_section", "section %s appears twice" % _show(sec["id"]), sec["id"])
        sections.add(sec["id"])
        if len(sections) > limits["max_sections_per_room"]:
            raise WireError("too_many_sections", "more than max_sections_per_room %d sections"
                            % limits["max_sections_per_room"])
        for item in sec["items"]:
            _check_item(item, items, limits)
    _check_depth([i for s in snapshot for i in s["items"]], limits)


def _check_item(item, seen, limits):
    """One item of a snapshot field or of REPLACE_SECTION's items, in the order of section 4:
    identifier and payload, then uniqueness among `seen` (which it joins), then the count."""
    _check_element(item, limits, "item")
    if item["id"] in seen:
        raise WireError("duplicate_item", "item %s appears twice" % _show(item["id"]), item["id"])
    seen.add(item["id"])
    if len(seen) > limits["max_items_per_room"]:
        raise WireError("too_many_items", "more than max_items_per_room %d items"
                        % limits["max_items_per_room"])


def _check_depth(items, limits):
    for item in items:
        if level(item) >= limits["max_outline_depth"]:
            raise WireError("outline_too_deep", "item %s at level %d (max_outline_depth %d)"
                            % (_show(item["id"]), level(item), limits["max_outline_depth"]), item["id"])


def check_section_items_content(items, limits=None):
    """REPLACE_SECTION's items (PROTOCOL.md section 11.21): the field's size, then item by item
    identifier, payload, uniqueness and count, then the depth."""
    limits = limits_from(limits)
    size = len(encode_section_items(items))
    if size > limits["max_snapshot_bytes"]:
        raise WireError("snapshot_too_large", "items of %d bytes exceed max_snapshot_bytes %d"
                        % (size, limits["max_snapshot_bytes"]))
    seen = set()
    for item in items:
        _check_item(item, seen, limits)
    _check_depth(items, limits)


def op_identifiers(op):
    """Every identifier an op names (elements, ids, anchors, sections), in field order."""
    out = []
    for field, kind in OP_CODES[op["op"]][1]:
        v = op[field]
        if kind == "elements":
            out.extend(e["id"] for e in v)
        elif kind == "ids":
            out.extend(v)
        elif kind == "placement":
            out.append(v["anchor"])
        elif kind == "id" or (kind == "opt_id" and v is not None):
            out.append(v)
    return out


def check_ops_content(ops, limits=None):
    """Identifier and payload limits over a DIFF's ops (PROTOCOL.md sections 11.13 and 12)."""
    limits = limits_from(limits)
    for op in ops:
        for ident in op_identifiers(op):
            if len(ident) > limits["max_identifier_bytes"]:
                raise WireError("identifier_too_long", "%s identifier of %d bytes exceeds "
                                "max_identifier_bytes %d" % (op["op"], len(ident),
                                                             limits["max_identifier_bytes"]), ident)
        for e in op.get("elements", []):
            _check_element(e, limits, op["op"])


def decode_snapshot(data):
    r = Reader(data)
    snap = read_snapshot(r)
    if r.remaining():
        raise _malformed("%d bytes left over after the snapshot" % r.remaining())
    return snap


# ---------------------------------------------------------------------------------------------
# Operations (PROTOCOL.md section 5)

SIDES = {0: "before", 1: "after"}
SIDE_CODES = {v: k for k, v in SIDES.items()}
UPDATE_KINDS = {0: "reload", 1: "reconfigure"}
UPDATE_KIND_CODES = {v: k for k, v in UPDATE_KINDS.items()}

# opcode -> (name, [(field, kind)]); kinds: elements, ids, placement, id, opt_section, section, kind
OPS = {
    0x01: ("append_sections", [("elements", "elements")]),
    0x02: ("insert_sections", [("placement", "placement"), ("elements", "elements")]),
    0x03: ("delete_sections", [("ids", "ids")]),
    0x04: ("move_section", [("id", "id"), ("placement", "placement")]),
    0x05: ("update_sections", [("elements", "elements")]),
    0x10: ("append_items", [("section", "opt_id"), ("elements", "elements")]),
    0x11: ("insert_items", [("placement", "placement"), ("elements", "elements")]),
    0x12: ("delete_items", [("ids", "ids")]),
    0x13: ("delete_all_items", []),
    0x14: ("move_item", [("id", "id"), ("placement", "placement")]),
    0x15: ("move_item_to_section", [("id", "id"), ("section", "id")]),
    0x16: ("update_items", [("kind", "kind"), ("elements", "elements")]),
    0x17: ("append_children", [("parent", "id"), ("elements", "elements")]),
    0x18: ("move_item_to_parent", [("id", "id"), ("parent", "id")]),
}
OP_CODES = {name: (code, fields) for code, (name, fields) in OPS.items()}


def read_placement(r, what="placement"):
    side = r.u8("placement side")
    if side not in SIDES:
        raise _malformed("unknown placement side 0x%02x" % side)
    return {"side": SIDES[side], "anchor": r.bytes_("placement anchor")}


def enc_placement(p):
    return enc_u8(SIDE_CODES[p["side"]]) + enc_bytes(p["anchor"])


def read_op(r, what="op"):
    opcode = r.u8("opcode")
    if opcode not in OPS or (r.version < 2 and opcode in V2_OPCODES):
        raise _malformed("unknown opcode 0x%02x" % opcode)
    name, fields = OPS[opcode]
    op = {"op": name}
    for field, kind in fields:
        if kind == "elements":
            op[field] = r.list_(lambda w: read_element(r), "elements")
        elif kind == "ids":
            op[field] = r.list_(lambda w: r.bytes_("id"), "ids")
        elif kind == "placement":
            op[field] = read_placement(r)
        elif kind == "id":
            op[field] = r.bytes_(field)
        elif kind == "opt_id":
            op[field] = r.opt(r.bytes_, field)
        elif kind == "kind":
            k = r.u8("update kind")
            if k not in UPDATE_KINDS:
                raise _malformed("unknown update kind 0x%02x" % k)
            op[field] = UPDATE_KINDS[k]
    return op


def enc_op(op):
    code, fields = OP_CODES[op["op"]]
    out = bytearray([code])
    for field, kind in fields:
        v = op[field]
        if kind == "elements":
            out += enc_list(v, enc_element)
        elif kind == "ids":
            out += enc_list(v, enc_bytes)
        elif kind == "placement":
            out += enc_placement(v)
        elif kind == "id":
            out += enc_bytes(v)
        elif kind == "opt_id":
            out += enc_opt(v, enc_bytes)
        elif kind == "kind":
            out += enc_u8(UPDATE_KIND_CODES[v])
    return bytes(out)


# ---------------------------------------------------------------------------------------------
# Messages (PROTOCOL.md section 3)

LIMIT_KEYS = {
    1: "max_frame_bytes",
    2: "max_identifier_bytes",
    3: "max_payload_bytes",
    4: "max_items_per_room",
    5: "max_sections_per_room",
    6: "max_rooms_per_connection",
    7: "max_snapshot_bytes",
    8: "history_count",
    9: "max_outline_depth",
    10: "max_presence_bytes",
    11: "presence_view",
    12: "max_window_rows",
}
LIMIT_CODES = {v: k for k, v in LIMIT_KEYS.items()}
# PROTOCOL.md section 12: what a missing WELCOME key means.
DEFAULT_LIMITS = {
    "max_frame_bytes": 16 * 1024 * 1024,
    "max_identifier_bytes": 256,
    "max_payload_bytes": 64 * 1024,
    "max_items_per_room": 1_000_000,
    "max_sections_per_room": 100_000,
    "max_rooms_per_connection": 64,
    "max_snapshot_bytes": 16 * 1024 * 1024 - 64 * 1024,
    "history_count": 1024,
    "max_outline_depth": 64,
    "max_presence_bytes": 1024,
    "presence_view": 100,
    "max_window_rows": 1000,
}


def limits_from(values=None):
    """A full limits dict: DEFAULT_LIMITS overridden by ``values`` (by name, or by WELCOME key)."""
    limits = dict(DEFAULT_LIMITS)
    for k, v in (values or {}).items():
        name = LIMIT_KEYS.get(k, k) if isinstance(k, int) else k
        if name in limits:
            limits[name] = v
    return limits
SNAPSHOT_REASONS = {0: "initial", 1: "resync"}
SNAPSHOT_REASON_CODES = {v: k for k, v in SNAPSHOT_REASONS.items()}

# Presence (PROTOCOL.md sections 11.27, 11.28). A member is {"member_id": int, "principal": bytes,
# "joined_at": int, "state": bytes}; a change {"kind": name, "member": member} (joined, shown),
# {"kind": "left", "member_id", "reason": int}, {"kind": "state", "member_id", "state": bytes} or
# {"kind": "hidden", "member_id"}. An unknown `left` reason is kept as its number (not an error).
PRESENCE_KINDS = {0: "joined", 1: "left", 2: "state", 3: "shown", 4: "hidden"}
PRESENCE_KIND_CODES = {v: k for k, v in PRESENCE_KINDS.items()}
LEFT_REASONS = {0: "left", 1: "disconnected", 2: "timed_out", 3: "removed", 4: "node_lost"}


def left_reason_name(reason):
    """A `left` reason's name; an unknown one reads as disconnected (section 11.28)."""
    return LEFT_REASONS.get(reason, "disconnected")


def read_member(r, what="member"):
    member_id = r.varint(what + " member_id")
    if member_id == 0:
        raise _malformed("%s member_id is 0 (ids are never 0)" % what)
    return {"member_id": member_id, "principal": r.string(what + " principal"),
            "joined_at": r.varint(what + " joined_at"), "state": r.bytes_(what + " state")}


def enc_member(m):
    return (enc_varint(m["member_id"]) + enc_bytes(m["principal"]) + enc_varint(m["joined_at"])
            + enc_bytes(m["state"]))


def read_members(r, what="members"):
    members = r.list_(lambda w: read_member(r, "member"), what)
    for previous, m in zip(members, members[1:]):
        if m["member_id"] <= previous["member_id"]:
            raise _malformed("members not strictly ascending: member_id %d after %d"
                             % (m["member_id"], previous["member_id"]))
    return members


def read_change(r):
    kind = r.u8("change kind")
    if kind not in PRESENCE_KINDS:
        raise _malformed("unknown presence change kind %d (0 joined, 1 left, 2 state, 3 shown, 4 hidden)" % kind)
    name = PRESENCE_KINDS[kind]
    if name in ("joined", "shown"):
        return {"kind": name, "member": read_member(r)}
    member_id = r.varint("change member_id")
    if member_id == 0:
        raise _malformed("%s change of member_id 0 (ids are never 0)" % name)
    change = {"kind": name, "member_id": member_id}
    if name == "left":
        change["reason"] = r.u8("left reason")
    elif name == "state":
        change["state"] = r.bytes_("change state")
    return change


def change_member_id(c):
    return c["member"]["member_id"] if "member" in c else c["member_id"]


def read_changes(r, what="changes"):
    changes = r.list_(lambda w: read_change(r), what)
    named = set()
    for c in changes:
        member_id = change_member_id(c)
        if member_id in named:
            raise _malformed("member_id %d changed twice in one PRESENCE_DIFF" % member_id)
        named.add(member_id)
    return changes


def enc_change(c):
    out = enc_u8(PRESENCE_KIND_CODES[c["kind"]])
    if c["kind"] in ("joined", "shown"):
        return out + enc_member(c["member"])
    out += enc_varint(c["member_id"])
    if c["kind"] == "left":
        out += enc_u8(c["reason"])
    elif c["kind"] == "state":
        out += enc_bytes(c["state"])
    return out


def member_to_json(m):
    return {"member_id": m["member_id"], "principal": string_to_json(m["principal"]),
            "joined_at": m["joined_at"], "state": bytes_to_json(m["state"])}


def member_from_json(j):
    return {"member_id": j["member_id"], "principal": string_from_json(j["principal"]),
            "joined_at": j["joined_at"], "state": bytes_from_json(j.get("state", ""))}


def change_to_json(c):
    if c["kind"] in ("joined", "shown"):
        return {"kind": c["kind"], "member": member_to_json(c["member"])}
    out = {"kind": c["kind"], "member_id": c["member_id"]}
    if c["kind"] == "left":
        out["reason"] = c["reason"]
    elif c["kind"] == "state":
        out["state"] = bytes_to_json(c["state"])
    return out


def change_from_json(j):
    if j.get("kind") not in PRESENCE_KIND_CODES:
        raise ValueError("unknown presence change kind %r" % (j.get("kind"),))
    if j["kind"] in ("joined", "shown"):
        return {"kind": j["kind"], "member": member_from_json(j["member"])}
    out = {"kind": j["kind"], "member_id": j["member_id"]}
    if j["kind"] == "left":
        out["reason"] = j["reason"]
    elif j["kind"] == "state":
        out["state"] = bytes_from_json(j["state"])
    return out

# Windows (PROTOCOL.md section 9, "Windows"; sections 11.29-11.31). A section window is
# {"section": bytes, "first": n}, {"section": bytes, "last": n} or
# {"section": bytes, "around": anchor bytes, "before": n, "after": n}, in the native form as in
# the JSON form (byte strings as bytes); a section count {"section": bytes, "items": n}.
WINDOW_KINDS = {0: "first", 1: "last", 2: "around"}
WINDOW_KIND_CODES = {v: k for k, v in WINDOW_KINDS.items()}


def window_kind(w):
    """Which of first, last or around a section window is."""
    for name in ("first", "last", "around"):
        if name in w:
            return name
    raise ValueError("a section window has first, last or around: %r" % (w,))


def window_size(w):
    """The rows a section window asks for: count, or before + 1 + after (section 9)."""
    if "around" in w:
        return w["before"] + 1 + w["after"]
    return w[window_kind(w)]


def read_section_window(r, what="section window"):
    section = r.bytes_(what + " section")
    kind = r.u8(what + " kind")
    if kind not in WINDOW_KINDS:
        raise _malformed("unknown section window kind %d (0 first, 1 last, 2 around)" % kind)
    name = WINDOW_KINDS[kind]
    if name == "around":
        return {"section": section, "around": r.bytes_(what + " anchor"), "before": r.varint(what + " before"),
                "after": r.varint(what + " after")}
    return {"section": section, name: r.varint(what + " count")}


def enc_section_window(w):
    name = window_kind(w)
    out = enc_bytes(w["section"]) + enc_u8(WINDOW_KIND_CODES[name])
    if name == "around":
        return out + enc_bytes(w["around"]) + enc_varint(w["before"]) + enc_varint(w["after"])
    return out + enc_varint(w[name])


def section_window_to_json(w):
    name = window_kind(w)
    out = {"section": bytes_to_json(w["section"])}
    if name == "around":
        out.update(around=bytes_to_json(w["around"]), before=w["before"], after=w["after"])
    else:
        out[name] = w[name]
    return out


def section_window_from_json(j):
    name = window_kind(j)
    out = {"section": bytes_from_json(j["section"])}
    if name == "around":
        out.update(around=bytes_from_json(j["around"]), before=j["before"], after=j["after"])
    else:
        out[name] = j[name]
    return out


def read_section_count(r, what="section count"):
    return {"section": r.bytes_(what + " section"), "items": r.varint(what + " items")}


def enc_section_count(c):
    return enc_bytes(c["section"]) + enc_varint(c["items"])


# Field kinds: u8 varint bytes string digest magic versions limits position? write_id ops
# snapshot stats reason opt_varint opt_bytes
MESSAGES = {
    0x01: ("HELLO", [("magic", "magic"), ("versions", "versions"), ("client_name", "string"),
                     ("credentials", "bytes")]),
    0x02: ("WELCOME", [("version", "varint"), ("session_id", "varint"), ("server_name", "string"),
                       ("limits", "limits")]),
    0x03: ("ERROR", [("code", "varint"), ("message", "string")]),
    0x04: ("PING", [("nonce", "varint")]),
    0x05: ("PONG", [("nonce", "varint")]),
    0x10: ("JOIN", [("request_id", "varint"), ("room", "string"), ("resume", "opt_position")]),
    0x11: ("LEAVE", [("request_id", "varint"), ("room", "string")]),
    0x12: ("MUTATE", [("request_id", "varint"), ("room", "string"),
                      ("expected_version", "opt_varint"), ("write_id", "write_id"), ("ops", "ops")]),
    0x13: ("REPLACE", [("request_id", "varint"), ("room", "string"),
                       ("expected_version", "opt_varint"), ("write_id", "write_id"),
                       ("snapshot", "snapshot")]),
    0x14: ("STATS", [("request_id", "varint")]),
    0x15: ("AUTH", [("request_id", "varint"), ("credentials", "bytes")]),
    0x16: ("DROP", [("request_id", "varint"), ("room", "string")]),
    0x17: ("SET_TTL", [("request_id", "varint"), ("room", "string"), ("seconds", "varint")]),
    0x18: ("REPLACE_SECTION", [("request_id", "varint"), ("room", "string"),
                               ("expected_version", "opt_varint"), ("write_id", "write_id"),
                               ("section", "bytes"), ("items", "section_items")]),
    0x19: ("VERIFY", [("request_id", "varint"), ("room", "string")]),
    0x20: ("SNAPSHOT", [("request_id", "varint"), ("room", "string"), ("epoch", "varint"),
                        ("version", "varint"), ("reason", "reason"), ("digest", "digest"),
                        ("chain", "chain"), ("snapshot", "snapshot")]),
    0x21: ("CATCHUP", [("request_id", "varint"), ("room", "string"), ("epoch", "varint"),
                       ("from_version", "varint"), ("to_version", "varint"), ("folded", "v3_opt_digest")]),
    0x22: ("DIFF", [("room", "string"), ("epoch", "varint"), ("version", "varint"), ("ops", "ops"),
                    ("chain", "chain")]),
    0x23: ("ACK", [("request_id", "varint"), ("epoch", "varint"), ("version", "varint")]),
    0x24: ("REJECT", [("request_id", "varint"), ("code", "varint"), ("op_index", "opt_varint"),
                      ("identifier", "opt_bytes"), ("message", "string")]),
    0x25: ("STATS_REPLY", [("request_id", "varint"), ("stats", "stats")]),
    0x26: ("LEFT", [("room", "string"), ("code", "varint"), ("message", "string")]),
    0x27: ("DIGEST", [("request_id", "varint"), ("room", "string"), ("epoch", "varint"),
                      ("version", "varint"), ("digest", "digest"), ("chain", "chain")]),
    0x1A: ("PRESENCE_WATCH", [("request_id", "varint"), ("room", "string"), ("watch", "watch")]),
    0x1B: ("PRESENCE_LIST", [("request_id", "varint"), ("room", "string"), ("after", "varint"),
                             ("limit", "varint")]),
    0x1C: ("SET_PRESENCE", [("request_id", "varint"), ("room", "string"), ("state", "bytes")]),
    0x28: ("PRESENCE", [("request_id", "varint"), ("room", "string"), ("count", "varint"),
                        ("members", "members"), ("next", "varint")]),
    0x29: ("PRESENCE_DIFF", [("room", "string"), ("count", "varint"), ("changes", "changes")]),
    0x1D: ("WINDOW", [("request_id", "varint"), ("room", "string"), ("window", "window")]),
    0x2A: ("WINDOW_STATE", [("request_id", "varint"), ("room", "string"), ("epoch", "varint"),
                            ("version", "varint"), ("chain", "digest"), ("window", "window"),
                            ("counts", "counts"), ("snapshot", "snapshot")]),
    0x2B: ("WINDOW_DIFF", [("request_id", "varint"), ("room", "string"), ("epoch", "varint"),
                           ("version", "varint"), ("window", "opt_window"), ("counts", "section_counts"),
                           ("ops", "ops")]),
}
MESSAGE_CODES = {name: (code, fields) for code, (name, fields) in MESSAGES.items()}
CLIENT_TO_SERVER = {"HELLO", "PING", "PONG", "JOIN", "LEAVE", "MUTATE", "REPLACE", "STATS", "AUTH", "DROP",
                    "SET_TTL", "REPLACE_SECTION", "VERIFY", "PRESENCE_WATCH", "PRESENCE_LIST",
                    "SET_PRESENCE", "WINDOW"}
SERVER_TO_CLIENT = {"WELCOME", "ERROR", "PING", "PONG", "SNAPSHOT", "CATCHUP", "DIFF", "ACK",
                    "REJECT", "STATS_REPLY", "LEFT", "DIGEST", "PRESENCE", "PRESENCE_DIFF",
                    "WINDOW_STATE", "WINDOW_DIFF"}


def _read_field(r, kind, name):
    if kind == "varint":
        return r.varint(name)
    if kind == "u8":
        return r.u8(name)
    if kind == "bytes":
        return r.bytes_(name)
    if kind == "string":
        return r.string(name)
    if kind in ("digest", "chain"):
        return r.digest(name)
    if kind == "magic":
        return r.magic(name)
    if kind == "versions":
        versions = r.list_(r.varint, name)
        if not versions:
            raise _malformed("HELLO lists no versions (at least one is required)")
        return versions
    if kind == "limits":
        return r.list_(lambda w: {"key": r.varint("limit key"), "value": r.varint("limit value")},
                       name)
    if kind == "stats":
        return r.list_(lambda w: {"name": r.string("stat name"), "value": r.varint("stat value")},
                       name)
    if kind == "opt_position":
        # Version 3: the replica's chain at that position follows (section 9).
        return r.opt(lambda w: dict({"epoch": r.varint("epoch"), "version": r.varint("version")},
                                    **({"chain": r.digest("resume.chain")} if r.version >= CHAIN_VERSION else {})),
                     name)
    if kind == "opt_varint":
        return r.opt(r.varint, name)
    if kind == "opt_bytes":
        return r.opt(r.bytes_, name)
    if kind == "v3_opt_digest":
        return r.opt(r.digest, name)
    if kind == "write_id":
        wid = r.bytes_(name)
        if len(wid) > MAX_WRITE_ID_BYTES:
            raise _malformed("write_id is %d bytes (at most %d)" % (len(wid), MAX_WRITE_ID_BYTES))
        return wid
    if kind == "ops":
        return r.list_(lambda w: read_op(r), name)
    if kind == "snapshot":
        return read_snapshot(r)
    if kind == "section_items":
        return read_section_items(r)
    if kind == "watch":
        watch = r.u8(name)
        if watch > 1:
            raise _malformed("watch is %d (0 stop or 1 start)" % watch)
        return watch
    if kind == "members":
        return read_members(r, name)
    if kind == "changes":
        return read_changes(r, name)
    if kind == "window":
        return r.list_(lambda w: read_section_window(r), name)
    if kind == "opt_window":
        return r.opt(lambda w: r.list_(lambda w2: read_section_window(r), name), name)
    if kind == "counts":
        return r.list_(lambda w: r.varint("count"), name)
    if kind == "section_counts":
        return r.list_(lambda w: read_section_count(r), name)
    if kind == "reason":
        reason = r.u8(name)
        if reason not in SNAPSHOT_REASONS:
            raise _malformed("unknown SNAPSHOT reason %d" % reason)
        return SNAPSHOT_REASONS[reason]
    raise AssertionError(kind)


def _enc_field(kind, v):
    if kind == "varint":
        return enc_varint(v)
    if kind == "u8":
        return enc_u8(v)
    if kind in ("bytes", "string"):
        return enc_bytes(v)
    if kind in ("digest", "chain"):
        if len(v) != 32:
            raise ValueError("%s must be 32 bytes" % kind)
        return bytes(v)
    if kind == "magic":
        if len(v) != 4:
            raise ValueError("magic must be 4 bytes")
        return bytes(v)
    if kind == "versions":
        return enc_list(v, enc_varint)
    if kind == "limits":
        return enc_list(v, lambda l: enc_varint(l["key"]) + enc_varint(l["value"]))
    if kind == "stats":
        return enc_list(v, lambda s: enc_bytes(s["name"]) + enc_varint(s["value"]))
    if kind == "opt_position":
        return enc_opt(v, lambda p: enc_varint(p["epoch"]) + enc_varint(p["version"])
                       + (_enc_field("chain", p["chain"]) if p.get("chain") is not None else b""))
    if kind == "opt_varint":
        return enc_opt(v, enc_varint)
    if kind == "opt_bytes":
        return enc_opt(v, enc_bytes)
    if kind == "v3_opt_digest":
        return enc_opt(v, lambda d: _enc_field("digest", d))
    if kind == "write_id":
        if len(v) > MAX_WRITE_ID_BYTES:
            raise ValueError("write_id is longer than %d bytes" % MAX_WRITE_ID_BYTES)
        return enc_bytes(v)
    if kind == "ops":
        return enc_list(v, enc_op)
    if kind == "snapshot":
        return encode_snapshot(v)
    if kind == "section_items":
        return encode_section_items(v)
    if kind == "reason":
        return enc_u8(SNAPSHOT_REASON_CODES[v])
    if kind == "watch":
        if v not in (0, 1):
            raise ValueError("watch is 0 or 1, not %r" % (v,))
        return enc_u8(v)
    if kind == "members":
        return enc_list(v, enc_member)
    if kind == "changes":
        return enc_list(v, enc_change)
    if kind == "window":
        return enc_list(v, enc_section_window)
    if kind == "opt_window":
        return enc_opt(v, lambda w: enc_list(w, enc_section_window))
    if kind == "counts":
        return enc_list(v, enc_varint)
    if kind == "section_counts":
        return enc_list(v, enc_section_count)
    raise AssertionError(kind)


def decode_body(body, accept=None, limits=None, version=PROTOCOL_VERSION):
    """Decodes one frame body (type byte + fields) into a message dict.

    ``accept`` is the set of message names this receiver may get (e.g. SERVER_TO_CLIENT); a known
    type outside it is ``unknown_message_type`` too, as PROTOCOL.md section 6 says. ``limits``
    (by name; defaults for the rest) bound the content of SNAPSHOT, REPLACE and DIFF, which is
    checked once the whole frame has decoded (section 12); MUTATE ops are left to whoever applies
    them. ``version`` is the connection's (section 8.2): version 1 knows no REPLACE_SECTION, no
    opcodes 0x17/0x18 and no levels part; versions 1 and 2 no chain fields, VERIFY or DIGEST;
    versions 1 to 3 no presence messages.
    """
    if not body:
        raise _malformed("empty frame body (L must be at least 1)")
    mtype = body[0]
    if (mtype not in MESSAGES or (accept is not None and MESSAGES[mtype][0] not in accept)
            or (version < 2 and mtype in V2_MESSAGES) or (version < CHAIN_VERSION and mtype in V3_MESSAGES)
            or (version < PRESENCE_VERSION and mtype in V4_MESSAGES)):
        raise WireError("unknown_message_type", "message type 0x%02x" % mtype)
    name, fields = MESSAGES[mtype]
    r = Reader(body, 1, version)
    msg = {"type": name}
    for field, kind in fields:
        if kind in V3_FIELD_KINDS and version < CHAIN_VERSION:
            continue    # versions 1 and 2 have no such field; the message has no key for it
        msg[field] = _read_field(r, kind, field)
    if r.remaining():
        raise _malformed("%d bytes left over after the last field of %s" % (r.remaining(), name))
    if name == "WINDOW_STATE" and len(msg["counts"]) != len(msg["snapshot"]):
        # Section 11.30: one count per section of the snapshot, in order.
        raise _malformed("WINDOW_STATE has %d counts for %d sections" % (len(msg["counts"]), len(msg["snapshot"])))
    if name in ("SNAPSHOT", "REPLACE", "WINDOW_STATE"):
        check_snapshot_content(msg["snapshot"], limits)
    elif name == "REPLACE_SECTION":
        check_section_items_content(msg["items"], limits)
    elif name in ("DIFF", "WINDOW_DIFF"):
        check_ops_content(msg["ops"], limits)
    return msg


def _has_field(msg, field, kind):
    """Whether a message (native or JSON form) has a field: a version 3 only field is left out
    when the message is of version 1 or 2, which a chain of None or no CATCHUP "folded" key says
    (CATCHUP's "folded": None is version 3's replayed form, encoded as flag 0x00)."""
    if kind == "chain":
        return msg.get(field) is not None
    if kind == "v3_opt_digest":
        return field in msg
    return True


def encode_body(msg):
    code, fields = MESSAGE_CODES[msg["type"]]
    return bytes([code]) + b"".join(_enc_field(kind, msg[field]) for field, kind in fields
                                    if _has_field(msg, field, kind))


def encode_frame(msg):
    body = encode_body(msg)
    return len(body).to_bytes(4, "big") + body


def frame_length(buf, max_frame_bytes=DEFAULT_MAX_FRAME_BYTES):
    """Length of the first whole frame in buf (header included), or None if it is not all there.

    Checks L before anything is buffered for the body, as PROTOCOL.md section 1 asks.
    """
    if len(buf) < 4:
        return None
    n = int.from_bytes(buf[:4], "big")
    if n == 0:
        raise _malformed("frame body length is 0 (must be at least 1)")
    if n > max_frame_bytes:
        raise WireError("frame_too_large", "frame body of %d bytes exceeds max_frame_bytes %d"
                        % (n, max_frame_bytes))
    if len(buf) < 4 + n:
        return None
    return 4 + n


def decode_frame(data, accept=None, limits=None, version=PROTOCOL_VERSION):
    """Decodes exactly one whole frame (4-byte length + body); anything else is an error."""
    n = frame_length(data, limits_from(limits)["max_frame_bytes"])
    if n is None:
        raise _malformed("truncated frame (%d bytes)" % len(data))
    if n != len(data):
        raise _malformed("%d bytes after the frame" % (len(data) - n))
    return decode_body(data[4:], accept, limits, version)


class FrameSplitter:
    """Incremental framing: feed bytes, take whole frames; consumes nothing of a partial frame."""

    def __init__(self, max_frame_bytes=DEFAULT_MAX_FRAME_BYTES):
        self.buf = bytearray()
        self.max_frame_bytes = max_frame_bytes

    def feed(self, data):
        self.buf += data

    def frames(self):
        while True:
            n = frame_length(self.buf, self.max_frame_bytes)
            if n is None:
                return
            frame = bytes(self.buf[:n])
            del self.buf[:n]
            yield frame


# ---------------------------------------------------------------------------------------------
# JSON form

def _is_control(ch):
    o = ord(ch)
    return o <= 0x1F or 0x7F <= o <= 0x9F


def bytes_to_json(b):
    """A byte string in the JSON form (PROTOCOL.md section 14): the text when it is UTF-8 without
    control characters, else {"hex": lower-case hex}. Exactly one form is right for given bytes."""
    b = bytes(b)
    try:
        text = b.decode("utf-8")
    except UnicodeDecodeError:
        return {"hex": b.hex()}
    if any(_is_control(ch) for ch in text):
        return {"hex": b.hex()}
    return text


def bytes_from_json(v):
    """Either form of a byte string (a reader accepts both, whichever bytes they hold)."""
    if isinstance(v, str):
        return v.encode("utf-8")
    if isinstance(v, dict) and set(v) == {"hex"} and isinstance(v["hex"], str):
        try:
            return bytes.fromhex(v["hex"])
        except ValueError:
            raise ValueError("bad hex in %r" % (v,))
    raise ValueError("a byte string is a JSON string or {\"hex\": \"...\"}, not %r" % (v,))


def string_to_json(b):
    return bytes(b).decode("utf-8")     # validated when decoded


def string_from_json(v):
    if not isinstance(v, str):
        raise ValueError("expected a string, got %r" % (v,))
    return v.encode("utf-8")


def element_to_json(e):
    return {"id": bytes_to_json(e["id"]), "payload": bytes_to_json(e["payload"])}


def element_from_json(e):
    return {"id": bytes_from_json(e["id"]), "payload": bytes_from_json(e.get("payload", ""))}


def items_to_json(items):
    """Depth-first items with levels -> the nested JSON form (section 14): the roots, each with
    "children" when it has any."""
    roots, path = [], []
    for i in items:
        node = element_to_json(i)
        del path[level(i):]
        (path[-1].setdefault("children", []) if path else roots).append(node)
        path.append(node)
    return roots


def items_from_json(j, depth=0):
    """The nested JSON form -> depth-first items with levels."""
    if not isinstance(j, list):
        raise ValueError("items are a JSON list")
    out = []
    for i in j:
        if not isinstance(i, dict) or "id" not in i:
            raise ValueError("an item is an object with \"id\" (and \"payload\", \"children\")")
        out.append(at_level(element_from_json(i), depth))
        out += items_from_json(i.get("children", []), depth + 1)
    return out


def snapshot_to_json(snap):
    return [{"id": bytes_to_json(s["id"]), "payload": bytes_to_json(s["payload"]),
             "items": items_to_json(s["items"])} for s in snap]


def snapshot_from_json(j):
    if not isinstance(j, list):
        raise ValueError("a snapshot is a JSON list of sections")
    out = []
    for s in j:
        if not isinstance(s, dict) or "id" not in s:
            raise ValueError("a section is an object with \"id\", \"payload\" and \"items\"")
        out.append({"id": bytes_from_json(s["id"]), "payload": bytes_from_json(s.get("payload", "")),
                    "items": items_from_json(s.get("items", []))})
    return out


def op_to_json(op):
    _, fields = OP_CODES[op["op"]]
    out = {"op": op["op"]}
    for field, kind in fields:
        v = op[field]
        if kind == "elements":
            out[field] = [element_to_json(e) for e in v]
        elif kind == "ids":
            out[field] = [bytes_to_json(i) for i in v]
        elif kind == "placement":
            out[field] = {"side": v["side"], "anchor": bytes_to_json(v["anchor"])}
        elif kind == "id":
            out[field] = bytes_to_json(v)
        elif kind == "opt_id":
            out[field] = None if v is None else bytes_to_json(v)
        elif kind == "kind":
            out[field] = v
    return out


def op_from_json(j):
    if j.get("op") not in OP_CODES:
        raise ValueError("unknown op %r" % (j.get("op"),))
    _, fields = OP_CODES[j["op"]]
    op = {"op": j["op"]}
    for field, kind in fields:
        v = j.get(field)
        if kind == "elements":
            op[field] = [element_from_json(e) for e in v]
        elif kind == "ids":
            op[field] = [bytes_from_json(i) for i in v]
        elif kind == "placement":
            op[field] = {"side": v["side"], "anchor": bytes_from_json(v["anchor"])}
        elif kind == "id":
            op[field] = bytes_from_json(v)
        elif kind == "opt_id":
            op[field] = None if v is None else bytes_from_json(v)
        elif kind == "kind":
            op[field] = v
    return op


def _field_to_json(kind, v):
    if v is None:
        return None
    if kind in ("varint", "u8", "versions", "opt_varint", "reason", "watch"):
        return v
    if kind in ("bytes", "digest", "chain", "magic", "opt_bytes", "write_id", "v3_opt_digest"):
        return bytes_to_json(v)
    if kind == "members":
        return [member_to_json(m) for m in v]
    if kind == "changes":
        return [change_to_json(c) for c in v]
    if kind == "window":
        return [section_window_to_json(w) for w in v]
    if kind == "opt_window":
        return [section_window_to_json(w) for w in v]
    if kind == "counts":
        return list(v)
    if kind == "section_counts":
        return [{"section": bytes_to_json(c["section"]), "items": c["items"]} for c in v]
    if kind == "string":
        return string_to_json(v)
    if kind == "limits":
        return [{"key": l["key"], "value": l["value"]} for l in v]
    if kind == "stats":
        return [{"name": string_to_json(s["name"]), "value": s["value"]} for s in v]
    if kind == "opt_position":
        return dict({"epoch": v["epoch"], "version": v["version"]},
                    **({"chain": bytes_to_json(v["chain"])} if v.get("chain") is not None else {}))
    if kind == "ops":
        return [op_to_json(o) for o in v]
    if kind == "snapshot":
        return snapshot_to_json(v)
    if kind == "section_items":
        return items_to_json(v)
    raise AssertionError(kind)


def _field_from_json(kind, v):
    if v is None:
        return None
    if kind in ("varint", "u8", "versions", "opt_varint", "reason", "watch"):
        return v
    if kind in ("bytes", "digest", "chain", "magic", "opt_bytes", "write_id", "v3_opt_digest"):
        return bytes_from_json(v)
    if kind == "members":
        return [member_from_json(m) for m in v]
    if kind == "changes":
        return [change_from_json(c) for c in v]
    if kind == "window":
        return [section_window_from_json(w) for w in v]
    if kind == "opt_window":
        return [section_window_from_json(w) for w in v]
    if kind == "counts":
        return list(v)
    if kind == "section_counts":
        return [{"section": bytes_from_json(c["section"]), "items": c["items"]} for c in v]
    if kind == "string":
        return string_from_json(v)
    if kind == "limits":
        return [{"key": l["key"], "value": l["value"]} for l in v]
    if kind == "stats":
        return [{"name": string_from_json(s["name"]), "value": s["value"]} for s in v]
    if kind == "opt_position":
        return dict({"epoch": v["epoch"], "version": v["version"]},
                    **({"chain": bytes_from_json(v["chain"])} if v.get("chain") is not None else {}))
    if kind == "ops":
        return [op_from_json(o) for o in v]
    if kind == "snapshot":
        return snapshot_from_json(v)
    if kind == "section_items":
        return items_from_json(v)
    raise AssertionError(kind)


def message_to_json(msg):
    """The JSON form of a decoded message."""
    _, fields = MESSAGE_CODES[msg["type"]]
    out = {"type": msg["type"]}
    for field, kind in fields:
        if not _has_field(msg, field, kind):
            continue
        out[field] = _field_to_json(kind, msg[field])
    return out


def message_from_json(j):
    if j.get("type") not in MESSAGE_CODES:
        raise ValueError("unknown message type %r" % (j.get("type"),))
    _, fields = MESSAGE_CODES[j["type"]]
    msg = {"type": j["type"]}
    for field, kind in fields:
        if not _has_field(j, field, kind):
            continue
        msg[field] = _field_from_json(kind, j.get(field))
    return msg


def dumps(obj):
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


# ---------------------------------------------------------------------------------------------
# The snapshot model: applying ops (PROTOCOL.md sections 5 and 7)

class BatchError(Exception):
    """A batch that cannot apply: ``name`` is a REJECT error name, with the op index and id."""

    def __init__(self, name, op_index, identifier, message):
        super().__init__("%s at op %s%s: %s" % (
            name, op_index, "" if identifier is None else " (%r)" % (identifier,), message))
        self.name = name
        self.op_index = op_index
        self.identifier = identifier
        self.message = message


class Snapshot:
    """Ordered sections of ordered items, with identifiers unique as PROTOCOL.md requires.

    A section's items are kept in depth-first order with their levels (section 4), so an item's
    subtree is the run from it to the next item at its level or above, and every op of section 5
    is a list edit of such runs. Lookups go through two dicts (section id -> section, item id ->
    section id), so membership tests are O(1); positional edits are O(n) list operations, which
    is fine for a debugger.
    """

    def __init__(self, sections=None):
        self.limits = None          # only while apply_batch runs with limits
        self.sections = []          # [{"id", "payload", "items": [{"id", "payload"}]}]
        self.section_index = {}     # section id -> section dict
        self.item_section = {}      # item id -> section id
        for s in sections or []:
            sec = {"id": bytes(s["id"]), "payload": bytes(s.get("payload", b"")), "items": []}
            if sec["id"] in self.section_index:
                raise ValueError("duplicate section %r" % (sec["id"],))
            self.sections.append(sec)
            self.section_index[sec["id"]] = sec
            for i in s.get("items", []):
                iid = bytes(i["id"])
                if iid in self.item_section:
                    raise ValueError("duplicate item %r" % (iid,))
                sec["items"].append(at_level({"id": iid, "payload": bytes(i.get("payload", b""))}, level(i)))
                self.item_section[iid] = sec["id"]

    def copy(self):
        return Snapshot(self.to_list())

    def to_list(self):
        return [{"id": s["id"], "payload": s["payload"],
                 "items": [dict(i) for i in s["items"]]} for s in self.sections]

    def encode(self):
        return encode_snapshot(self.sections)

    def digest(self):
        return hashlib.sha256(self.encode()).digest()

    def item_count(self):
        return len(self.item_section)

    def is_outline(self):
        return any(level(i) for s in self.sections for i in s["items"])

    def __eq__(self, other):
        return isinstance(other, Snapshot) and self.to_list() == other.to_list()

    def check_invariants(self):
        seen_items = {}
        assert len(self.section_index) == len(self.sections)
        for s in self.sections:
            assert self.section_index.get(s["id"]) is s
            previous = -1
            for i in s["items"]:
                assert i["id"] not in seen_items, "item %r twice" % (i["id"],)
                assert 0 <= level(i) <= previous + 1 and i.get("level") != 0, "item %r at level %d" % (i["id"], level(i))
                previous = level(i)
                seen_items[i["id"]] = s["id"]
        assert seen_items == self.item_section

    # -- helpers --------------------------------------------------------------------------

    def _section_pos(self, sid):
        for n, s in enumerate(self.sections):
            if s["id"] == sid:
                return n
        raise KeyError(sid)

    def _item_pos(self, iid):
        sec = self.section_index[self.item_section[iid]]
        for n, i in enumerate(sec["items"]):
            if i["id"] == iid:
                return sec, n
        raise KeyError(iid)

    def _check_payload(self, k, e):
        if self.limits is not None and len(e["payload"]) > self.limits["max_payload_bytes"]:
            raise BatchError("payload_too_large", k, e["id"], "payload of %d bytes exceeds "
                             "max_payload_bytes %d" % (len(e["payload"]), self.limits["max_payload_bytes"]))

    def _check_new(self, k, e, existing, duplicate, count, too_many, limit_name):
        """An element an op adds (PROTOCOL.md section 6): identifier, payload, uniqueness, count."""
        if self.limits is not None and len(e["id"]) > self.limits["max_identifier_bytes"]:
            raise BatchError("identifier_too_long", k, e["id"], "identifier of %d bytes exceeds "
                             "max_identifier_bytes %d" % (len(e["id"]), self.limits["max_identifier_bytes"]))
        self._check_payload(k, e)
        if e["id"] in existing:
            raise BatchError(duplicate, k, e["id"], "%s already exists" % duplicate.split("_")[1])
        if self.limits is not None and count >= self.limits[limit_name]:
            raise BatchError(too_many, k, None, "the room would exceed %s %d" % (limit_name, self.limits[limit_name]))

    def _add_sections(self, k, elements, pos):
        for e in elements:
            self._check_new(k, e, self.section_index, "duplicate_section", len(self.sections),
                            "too_many_sections", "max_sections_per_room")
            sec = {"id": e["id"], "payload": e["payload"], "items": []}
            self.sections.insert(pos, sec)
            self.section_index[e["id"]] = sec
            pos += 1

    def _add_items(self, k, elements, sec, pos, lv=0):
        for e in elements:
            self._check_new(k, e, self.item_section, "duplicate_item", len(self.item_section),
                            "too_many_items", "max_items_per_room")
            if self.limits is not None and lv >= self.limits["max_outline_depth"]:
                raise BatchError("outline_too_deep", k, e["id"], "the item would be at level %d "
                                 "(max_outline_depth %d)" % (lv, self.limits["max_outline_depth"]))
            sec["items"].insert(pos, at_level({"id": e["id"], "payload": e["payload"]}, lv))
            self.item_section[e["id"]] = sec["id"]
            pos += 1

    @staticmethod
    def _end(sec, n):
        """One past the last item of the subtree that starts at sec["items"][n]."""
        items, e = sec["items"], n + 1
        while e < len(items) and level(items[e]) > level(items[n]):
            e += 1
        return e

    def _subtree(self, iid):
        sec, n = self._item_pos(iid)
        return sec["items"][n:self._end(sec, n)]

    def _take(self, iid):
        """Removes the item's subtree and returns it."""
        sec, n = self._item_pos(iid)
        e = self._end(sec, n)
        run = sec["items"][n:e]
        del sec["items"][n:e]
        for i in run:
            del self.item_section[i["id"]]
        return run

    def _put(self, sec, pos, run, lv):
        shift = lv - level(run[0])
        sec["items"][pos:pos] = [at_level(i, level(i) + shift) for i in run]
        for i in run:
            self.item_section[i["id"]] = sec["id"]

    def _check_move(self, k, iid, target):
        """move_into_own_subtree when the anchor or parent `target` is iid or one of its descendants."""
        if any(i["id"] == target for i in self._subtree(iid)):
            raise BatchError("move_into_own_subtree", k, iid, "%s would go inside its own subtree" % _show(iid))

    def _check_moved_depth(self, k, iid, lv):
        run = self._subtree(iid)
        deepest = lv + max(level(i) for i in run) - level(run[0])
        if self.limits is not None and deepest >= self.limits["max_outline_depth"]:
            raise BatchError("outline_too_deep", k, iid, "its subtree would reach level %d (max_outline_depth %d)"
                             % (deepest, self.limits["max_outline_depth"]))

    def _placement(self, p):
        """(section, index, level) where a sibling of the anchor goes (section 5)."""
        sec, n = self._item_pos(p["anchor"])
        return sec, (self._end(sec, n) if p["side"] == "after" else n), level(sec["items"][n])

    # -- ops ------------------------------------------------------------------------------

    def apply_op(self, op, k=0):
        """Applies one op in place. On error the snapshot may be half-changed: use apply_batch."""
        name = op["op"]
        if name == "append_sections":
            self._add_sections(k, op["elements"], len(self.sections))
        elif name == "insert_sections":
            anchor = op["placement"]["anchor"]
            if anchor not in self.section_index:
                raise BatchError("anchor_section_not_found", k, anchor, "no such anchor section")
            pos = self._section_pos(anchor) + (1 if op["placement"]["side"] == "after" else 0)
            self._add_sections(k, op["elements"], pos)
        elif name == "delete_sections":
            for sid in op["ids"]:
                if sid not in self.section_index:
                    raise BatchError("section_not_found", k, sid, "no such section")
                sec = self.section_index.pop(sid)
                for i in sec["items"]:
                    del self.item_section[i["id"]]
                del self.sections[self._section_pos_obj(sec)]
        elif name == "move_section":
            sid, anchor = op["id"], op["placement"]["anchor"]
            if sid not in self.section_index:
                raise BatchError("section_not_found", k, sid, "no such section")
            if anchor not in self.section_index:
                raise BatchError("anchor_section_not_found", k, anchor, "no such anchor section")
            if anchor == sid:
                raise BatchError("anchor_is_self", k, sid, "section moved relative to itself")
            sec = self.sections.pop(self._section_pos(sid))
            pos = self._section_pos(anchor) + (1 if op["placement"]["side"] == "after" else 0)
            self.sections.insert(pos, sec)
        elif name == "update_sections":
            for e in op["elements"]:
                if e["id"] not in self.section_index:
                    raise BatchError("section_not_found", k, e["id"], "no such section")
                self._check_payload(k, e)
                self.section_index[e["id"]]["payload"] = e["payload"]
        elif name == "append_items":
            sid = op["section"]
            if sid is None:
                if not self.sections:
                    raise BatchError("no_sections", k, None, "append_items without a section "
                                     "and the room has no sections")
                sec = self.sections[-1]
            else:
                if sid not in self.section_index:
                    raise BatchError("section_not_found", k, sid, "no such section")
                sec = self.section_index[sid]
            self._add_items(k, op["elements"], sec, len(sec["items"]))
        elif name == "insert_items":
            anchor = op["placement"]["anchor"]
            if anchor not in self.item_section:
                raise BatchError("anchor_item_not_found", k, anchor, "no such anchor item")
            sec, pos, lv = self._placement(op["placement"])
            self._add_items(k, op["elements"], sec, pos, lv)
        elif name == "delete_items":
            for iid in op["ids"]:
                if iid not in self.item_section:
                    raise BatchError("item_not_found", k, iid, "no such item")
                self._take(iid)
        elif name == "delete_all_items":
            self.sections = []
            self.section_index = {}
            self.item_section = {}
        elif name == "move_item":
            iid, anchor = op["id"], op["placement"]["anchor"]
            if iid not in self.item_section:
                raise BatchError("item_not_found", k, iid, "no such item")
            if anchor not in self.item_section:
                raise BatchError("anchor_item_not_found", k, anchor, "no such anchor item")
            if anchor == iid:
                raise BatchError("anchor_is_self", k, iid, "item moved relative to itself")
            self._check_move(k, iid, anchor)
            asec, an = self._item_pos(anchor)
            self._check_moved_depth(k, iid, level(asec["items"][an]))
            run = self._take(iid)
            sec, pos, lv = self._placement(op["placement"])
            self._put(sec, pos, run, lv)
        elif name == "move_item_to_section":
            iid, sid = op["id"], op["section"]
            if iid not in self.item_section:
                raise BatchError("item_not_found", k, iid, "no such item")
            if sid not in self.section_index:
                raise BatchError("section_not_found", k, sid, "no such section")
            run = self._take(iid)
            target = self.section_index[sid]
            self._put(target, len(target["items"]), run, 0)
        elif name == "update_items":
            for e in op["elements"]:
                if e["id"] not in self.item_section:
                    raise BatchError("item_not_found", k, e["id"], "no such item")
                self._check_payload(k, e)
                sec, n = self._item_pos(e["id"])
                sec["items"][n]["payload"] = e["payload"]
        elif name == "append_children":
            parent = op["parent"]
            if parent not in self.item_section:
                raise BatchError("parent_not_found", k, parent, "no such parent item")
            sec, n = self._item_pos(parent)
            self._add_items(k, op["elements"], sec, self._end(sec, n), level(sec["items"][n]) + 1)
        elif name == "move_item_to_parent":
            iid, parent = op["id"], op["parent"]
            if iid not in self.item_section:
                raise BatchError("item_not_found", k, iid, "no such item")
            if parent not in self.item_section:
                raise BatchError("parent_not_found", k, parent, "no such parent item")
            self._check_move(k, iid, parent)
            psec, pn = self._item_pos(parent)
            self._check_moved_depth(k, iid, level(psec["items"][pn]) + 1)
            run = self._take(iid)
            sec, n = self._item_pos(parent)
            self._put(sec, self._end(sec, n), run, level(sec["items"][n]) + 1)
        else:
            raise ValueError("unknown op %r" % (name,))

    def _section_pos_obj(self, sec):
        for n, s in enumerate(self.sections):
            if s is sec:
                return n
        raise KeyError(sec["id"])

    def apply_batch(self, ops, limits=None):
        """Applies a whole batch atomically: returns the new Snapshot, or raises BatchError and
        leaves self untouched. With ``limits`` (by name), the content limits are enforced as a
        server and a replica applying a DIFF do (PROTOCOL.md sections 5, 6 and 12): per element,
        and the size after each op that grows the encoding."""
        work = self.copy()
        work.limits = None if limits is None else limits_from(limits)
        try:
            size = len(work.encode())
            for k, op in enumerate(ops):
                work.apply_op(op, k)
                if work.limits is not None:
                    before, size = size, len(work.encode())
                    if size > before and size > work.limits["max_snapshot_bytes"]:
                        raise BatchError("snapshot_too_large", k, None,
                                         "the snapshot would encode to %d bytes (max_snapshot_bytes %d)"
                                         % (size, work.limits["max_snapshot_bytes"]))
        finally:
            work.limits = None
        return work


# ---------------------------------------------------------------------------------------------
# The room's chain (PROTOCOL.md section 9, "The room's chain"; version 3).

def chain_start(epoch):
    """chain(epoch, 0)."""
    return hashlib.sha256(b"snapsync-chain\x00" + epoch.to_bytes(8, "big")).digest()


def unchained_diff_frame(frame):
    """The version 1 and 2 frame of a version 3 DIFF frame (length prefix included): its chain
    field left out and its length 32 less, the bytes the chain is computed over."""
    if len(frame) < 4 + 1 + CHAIN_BYTES:
        raise ValueError("not a version 3 DIFF frame")
    return (len(frame) - 4 - CHAIN_BYTES).to_bytes(4, "big") + bytes(frame[4:len(frame) - CHAIN_BYTES])


def chain_next(chain, unchained_frame):
    """chain(v) from chain(v - 1) and the version 1 and 2 DIFF frame of version v."""
    return hashlib.sha256(bytes(chain) + bytes(unchained_frame)).digest()


def chain_follows(held, frame, received):
    """Whether a version 3 DIFF frame whose chain field is `received` follows a replica whose
    chain is `held`: a zero chain on either side is one the server does not know, not compared."""
    if held is None or held == ZERO_CHAIN or received == ZERO_CHAIN:
        return True
    return chain_next(held, unchained_diff_frame(frame)) == received

