#!/usr/bin/env python3
"""Generates the SnapSync wire test vectors (Protocol/vectors/*.json) from PROTOCOL.md alone.

This is a third, independent implementation of the encoding: it shares no code with the Swift
codec (Sources/SnapSyncWire) or with snapcat (scripts/snapcat_wire.py), so that the three check
each other. It only encodes (and applies ops, for the replay set); the decoders under test do the
rest. Standard library only; deterministic: running it twice gives byte-identical files.

    python3 Protocol/vectors/generate.py          # rewrite the files (and the examples in
                                                  # PROTOCOL.md and AUTH.md)
    python3 Protocol/vectors/generate.py --check  # exit 1 if the committed files are stale
"""

import base64
import hashlib
import hmac
import json
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
GENERATOR_VERSION = "1"

# ---------------------------------------------------------------------------------------------
# Field encodings (PROTOCOL.md section 2)


def varint(n):
    assert 0 <= n < 1 << 64, n
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def u8(n):
    assert 0 <= n <= 0xFF
    return bytes([n])


def bstr(b):
    return varint(len(b)) + b


def text(s):
    return bstr(s.encode("utf-8") if isinstance(s, str) else s)


def opt(value, enc):
    return b"\x00" if value is None else b"\x01" + enc(value)


def lst(values, enc):
    return varint(len(values)) + b"".join(enc(v) for v in values)


def frame(body):
    return len(body).to_bytes(4, "big") + body


# ---------------------------------------------------------------------------------------------
# The JSON form (PROTOCOL.md, "JSON form"). Byte strings are a JSON string when they are valid
# UTF-8 without control characters, else {"hex": "..."}.


def is_plain(b):
    try:
        s = b.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in s)


def jb(b):
    return b.decode("utf-8") if is_plain(b) else {"hex": b.hex()}


# ---------------------------------------------------------------------------------------------
# Operations (section 5). In this script an op is a dict in JSON form with bytes values; the
# helpers below build them, `enc_op` encodes, `op_json` converts to the JSON form.

SIDES = {"before": 0, "after": 1}
KINDS = {"reload": 0, "reconfigure": 1}
OPCODES = {
    "append_sections": 0x01, "insert_sections": 0x02, "delete_sections": 0x03,
    "move_section": 0x04, "update_sections": 0x05, "append_items": 0x10, "insert_items": 0x11,
    "delete_items": 0x12, "delete_all_items": 0x13, "move_item": 0x14,
    "move_item_to_section": 0x15, "update_items": 0x16,
    "append_children": 0x17, "move_item_to_parent": 0x18,   # version 2
}


def B(x):
    return x.encode("utf-8") if isinstance(x, str) else bytes(x)


def el(id_, payload=b""):
    return {"id": B(id_), "payload": B(payload)}


def pl(side, anchor):
    return {"side": side, "anchor": B(anchor)}


def enc_el(e):
    return bstr(e["id"]) + bstr(e["payload"])


def enc_pl(p):
    return u8(SIDES[p["side"]]) + bstr(p["anchor"])


def enc_op(op):
    name = op["op"]
    out = u8(OPCODES[name])
    if name in ("append_sections", "update_sections"):
        out += lst(op["elements"], enc_el)
    elif name in ("insert_sections", "insert_items"):
        out += enc_pl(op["placement"]) + lst(op["elements"], enc_el)
    elif name in ("delete_sections", "delete_items"):
        out += lst(op["ids"], bstr)
    elif name in ("move_section", "move_item"):
        out += bstr(op["id"]) + enc_pl(op["placement"])
    elif name == "append_items":
        out += opt(op["section"], bstr) + lst(op["elements"], enc_el)
    elif name == "delete_all_items":
        pass
    elif name == "move_item_to_section":
        out += bstr(op["id"]) + bstr(op["section"])
    elif name == "update_items":
        out += u8(KINDS[op["kind"]]) + lst(op["elements"], enc_el)
    elif name == "append_children":
        out += bstr(op["parent"]) + lst(op["elements"], enc_el)
    elif name == "move_item_to_parent":
        out += bstr(op["id"]) + bstr(op["parent"])
    else:
        raise AssertionError(name)
    return out


def el_json(e):
    return {"id": jb(e["id"]), "payload": jb(e["payload"])}


def op_json(op):
    out = {}
    for k, v in op.items():
        if k == "elements":
            out[k] = [el_json(e) for e in v]
        elif k == "ids":
            out[k] = [jb(i) for i in v]
        elif k == "placement":
            out[k] = {"side": v["side"], "anchor": jb(v["anchor"])}
        elif k in ("id", "section", "parent"):
            out[k] = None if v is None else jb(v)
        else:
            out[k] = v
    return out


# Op constructors, named as in the table.
def append_sections(*els): return {"op": "append_sections", "elements": list(els)}
def insert_sections(p, *els): return {"op": "insert_sections", "placement": p, "elements": list(els)}
def delete_sections(*ids): return {"op": "delete_sections", "ids": [B(i) for i in ids]}
def move_section(id_, p): return {"op": "move_section", "id": B(id_), "placement": p}
def update_sections(*els): return {"op": "update_sections", "elements": list(els)}
def append_items(section, *els): return {"op": "append_items", "section": None if section is None else B(section), "elements": list(els)}
def insert_items(p, *els): return {"op": "insert_items", "placement": p, "elements": list(els)}
def delete_items(*ids): return {"op": "delete_items", "ids": [B(i) for i in ids]}
def delete_all_items(): return {"op": "delete_all_items"}
def move_item(id_, p): return {"op": "move_item", "id": B(id_), "placement": p}
def move_item_to_section(id_, section): return {"op": "move_item_to_section", "id": B(id_), "section": B(section)}
def update_items(kind, *els): return {"op": "update_items", "kind": kind, "elements": list(els)}
def append_children(parent, *els): return {"op": "append_children", "parent": B(parent), "elements": list(els)}
def move_item_to_parent(id_, parent): return {"op": "move_item_to_parent", "id": B(id_), "parent": B(parent)}


# ---------------------------------------------------------------------------------------------
# Snapshots (section 4): a list of (section element, [item elements]). An item element may carry
# "level" (version 2; absent means 0), its items being in depth-first order.


def at(level, e):
    """The item element `e` at `level` (0: a root)."""
    return dict(e, level=level)


def level_of(e):
    return e.get("level", 0)


def enc_levels(items):
    """The `levels` part of section 4: present only when some item is below the roots."""
    return b"".join(varint(level_of(i)) for i in items) if any(level_of(i) for i in items) else b""


def enc_snapshot(snap):
    return lst(snap, lambda s: enc_el(s[0]) + lst(s[1], enc_el)) + enc_levels([i for s in snap for i in s[1]])


def enc_section_items(items):
    return lst(items, enc_el) + enc_levels(items)


def items_json(items):
    """Depth-first items with levels -> the nested JSON form (section 14): roots, each with its
    `children` when it has any."""
    roots, stack = [], []
    for i in items:
        node = el_json(i)
        del stack[level_of(i):]
        (stack[-1].setdefault("children", []) if stack else roots).append(node)
        stack.append(node)
    return roots


def snapshot_json(snap):
    return [{"id": jb(s[0]["id"]), "payload": jb(s[0]["payload"]), "items": items_json(s[1])}
            for s in snap]


def digest(snap):
    return hashlib.sha256(enc_snapshot(snap)).digest()


# ---------------------------------------------------------------------------------------------
# Messages (section 3). Each encoder takes the message's fields in JSON-form order and returns
# (body, json). Field names are exactly the layout's.

MAGIC = b"SNAP"


def hello(versions, client_name, credentials=b""):
    body = u8(0x01) + MAGIC + lst(versions, varint) + text(client_name) + bstr(B(credentials))
    return body, {"type": "HELLO", "magic": "SNAP", "versions": versions, "client_name": client_name,
                  "credentials": jb(B(credentials))}


def welcome(version, session_id, server_name, limits):
    body = (u8(0x02) + varint(version) + varint(session_id) + text(server_name)
            + lst(limits, lambda kv: varint(kv[0]) + varint(kv[1])))
    return body, {"type": "WELCOME", "version": version, "session_id": session_id, "server_name": server_name,
                  "limits": [{"key": k, "value": v} for k, v in limits]}


def error(code, message):
    return u8(0x03) + varint(code) + text(message), {"type": "ERROR", "code": code, "message": message}


def ping(nonce):
    return u8(0x04) + varint(nonce), {"type": "PING", "nonce": nonce}


def pong(nonce):
    return u8(0x05) + varint(nonce), {"type": "PONG", "nonce": nonce}


def join(request_id, room, resume=None, chain=None):
    """`chain`: version 3's field of the resume position (section 9); None for versions 1 and 2."""
    body = (u8(0x10) + varint(request_id) + text(room)
            + opt(resume, lambda p: varint(p[0]) + varint(p[1]) + (chain or b"")))
    position = None if resume is None else {"epoch": resume[0], "version": resume[1]}
    if position is not None and chain is not None:
        position["chain"] = jb(chain)
    return body, {"type": "JOIN", "request_id": request_id, "room": room, "resume": position}


def leave(request_id, room):
    return u8(0x11) + varint(request_id) + text(room), {"type": "LEAVE", "request_id": request_id, "room": room}


def mutate(request_id, room, expected_version, write_id, ops):
    body = (u8(0x12) + varint(request_id) + text(room) + opt(expected_version, varint) + bstr(B(write_id))
            + lst(ops, enc_op))
    return body, {"type": "MUTATE", "request_id": request_id, "room": room, "expected_version": expected_version,
                  "write_id": jb(B(write_id)), "ops": [op_json(o) for o in ops]}


def replace(request_id, room, expected_version, write_id, snap):
    body = (u8(0x13) + varint(request_id) + text(room) + opt(expected_version, varint) + bstr(B(write_id))
            + enc_snapshot(snap))
    return body, {"type": "REPLACE", "request_id": request_id, "room": room, "expected_version": expected_version,
                  "write_id": jb(B(write_id)), "snapshot": snapshot_json(snap)}


def replace_section(request_id, room, expected_version, write_id, section, items):
    body = (u8(0x18) + varint(request_id) + text(room) + opt(expected_version, varint) + bstr(B(write_id))
            + bstr(B(section)) + enc_section_items(items))
    return body, {"type": "REPLACE_SECTION", "request_id": request_id, "room": room,
                  "expected_version": expected_version, "write_id": jb(B(write_id)), "section": jb(B(section)),
                  "items": items_json(items)}


def stats(request_id):
    return u8(0x14) + varint(request_id), {"type": "STATS", "request_id": request_id}


def auth(request_id, credentials):
    return (u8(0x15) + varint(request_id) + bstr(B(credentials)),
            {"type": "AUTH", "request_id": request_id, "credentials": jb(B(credentials))})


def drop(request_id, room):
    return (u8(0x16) + varint(request_id) + text(room),
            {"type": "DROP", "request_id": request_id, "room": room})


def set_ttl(request_id, room, seconds):
    return (u8(0x17) + varint(request_id) + text(room) + varint(seconds),
            {"type": "SET_TTL", "request_id": request_id, "room": room, "seconds": seconds})


def verify(request_id, room):
    return (u8(0x19) + varint(request_id) + text(room),
            {"type": "VERIFY", "request_id": request_id, "room": room})


def digest_reply(request_id, room, epoch, version, digest_bytes, chain):
    body = u8(0x27) + varint(request_id) + text(room) + varint(epoch) + varint(version) + digest_bytes + chain
    return body, {"type": "DIGEST", "request_id": request_id, "room": room, "epoch": epoch, "version": version,
                  "digest": jb(digest_bytes), "chain": jb(chain)}


REASONS = {"initial": 0, "resync": 1}


def snapshot(request_id, room, epoch, version, reason, snap, digest_bytes=None, chain=None):
    """`chain`: version 3's field (section 9), before `snapshot`; None for versions 1 and 2."""
    d = digest(snap) if digest_bytes is None else digest_bytes
    body = (u8(0x20) + varint(request_id) + text(room) + varint(epoch) + varint(version) + u8(REASONS[reason])
            + d + (chain or b"") + enc_snapshot(snap))
    js = {"type": "SNAPSHOT", "request_id": request_id, "room": room, "epoch": epoch, "version": version,
          "reason": reason, "digest": jb(d), "snapshot": snapshot_json(snap)}
    if chain is not None:
        js["chain"] = jb(chain)
    return body, js


def catchup(request_id, room, epoch, from_version, to_version, v3=False, folded=None):
    """`v3`: version 3's layout, whose last field is `folded opt<digest>` (section 11.12): None for the
    replay form, else the digest of the room's state at `to_version` (the folded form). Versions 1
    and 2 have no such field."""
    assert v3 or folded is None
    body = u8(0x21) + varint(request_id) + text(room) + varint(epoch) + varint(from_version) + varint(to_version)
    js = {"type": "CATCHUP", "request_id": request_id, "room": room, "epoch": epoch,
          "from_version": from_version, "to_version": to_version}
    if v3:
        assert folded is None or len(folded) == 32
        body += opt(folded, lambda d: d)
        js["folded"] = None if folded is None else jb(folded)
    return body, js


def diff(room, epoch, version, ops, chain=None):
    """`chain`: version 3's field (section 9), at the end; None for versions 1 and 2."""
    body = u8(0x22) + text(room) + varint(epoch) + varint(version) + lst(ops, enc_op) + (chain or b"")
    js = {"type": "DIFF", "room": room, "epoch": epoch, "version": version, "ops": [op_json(o) for o in ops]}
    if chain is not None:
        js["chain"] = jb(chain)
    return body, js


def ack(request_id, epoch, version):
    return (u8(0x23) + varint(request_id) + varint(epoch) + varint(version),
            {"type": "ACK", "request_id": request_id, "epoch": epoch, "version": version})


def reject(request_id, code, op_index, identifier, message):
    body = (u8(0x24) + varint(request_id) + varint(code) + opt(op_index, varint)
            + opt(None if identifier is None else B(identifier), bstr) + text(message))
    return body, {"type": "REJECT", "request_id": request_id, "code": code, "op_index": op_index,
                  "identifier": None if identifier is None else jb(B(identifier)), "message": message}


def stats_reply(request_id, pairs):
    body = u8(0x25) + varint(request_id) + lst(pairs, lambda p: text(p[0]) + varint(p[1]))
    return body, {"type": "STATS_REPLY", "request_id": request_id,
                  "stats": [{"name": n, "value": v} for n, v in pairs]}


def left(room, code, message):
    return (u8(0x26) + text(room) + varint(code) + text(message),
            {"type": "LEFT", "room": room, "code": code, "message": message})


# Presence (section 9, "Presence"; sections 11.24-11.28; version 4). A member and a change are
# dicts in JSON form with bytes values, as ops are.

PRESENCE_KINDS = {"joined": 0, "left": 1, "state": 2, "shown": 3, "hidden": 4}
LEFT_REASONS = {0: "left", 1: "disconnected", 2: "timed_out", 3: "removed", 4: "node_lost"}


def member(member_id, principal, joined_at, state=b""):
    return {"member_id": member_id, "principal": principal, "joined_at": joined_at, "state": B(state)}


def enc_member(m):
    return varint(m["member_id"]) + text(m["principal"]) + varint(m["joined_at"]) + bstr(m["state"])


def member_json(m):
    return {"member_id": m["member_id"], "principal": m["principal"], "joined_at": m["joined_at"],
            "state": jb(m["state"])}


def joined(m): return {"kind": "joined", "member": m}
def departed(member_id, reason): return {"kind": "left", "member_id": member_id, "reason": reason}
def state_set(member_id, state): return {"kind": "state", "member_id": member_id, "state": B(state)}
def shown(m): return {"kind": "shown", "member": m}
def hidden(member_id): return {"kind": "hidden", "member_id": member_id}


def enc_change(c):
    out = u8(PRESENCE_KINDS[c["kind"]])
    if c["kind"] in ("joined", "shown"):
        return out + enc_member(c["member"])
    out += varint(c["member_id"])
    if c["kind"] == "left":
        return out + u8(c["reason"])
    if c["kind"] == "state":
        return out + bstr(c["state"])
    return out


def change_json(c):
    if c["kind"] in ("joined", "shown"):
        return {"kind": c["kind"], "member": member_json(c["member"])}
    out = {"kind": c["kind"], "member_id": c["member_id"]}
    if c["kind"] == "left":
        out["reason"] = c["reason"]
    elif c["kind"] == "state":
        out["state"] = jb(c["state"])
    return out


def presence_watch(request_id, room, watch):
    return (u8(0x1A) + varint(request_id) + text(room) + u8(watch),
            {"type": "PRESENCE_WATCH", "request_id": request_id, "room": room, "watch": watch})


def presence_list(request_id, room, after, limit):
    return (u8(0x1B) + varint(request_id) + text(room) + varint(after) + varint(limit),
            {"type": "PRESENCE_LIST", "request_id": request_id, "room": room, "after": after, "limit": limit})


def set_presence(request_id, room, state):
    return (u8(0x1C) + varint(request_id) + text(room) + bstr(B(state)),
            {"type": "SET_PRESENCE", "request_id": request_id, "room": room, "state": jb(B(state))})


def presence(request_id, room, count, members, next_):
    body = u8(0x28) + varint(request_id) + text(room) + varint(count) + lst(members, enc_member) + varint(next_)
    return body, {"type": "PRESENCE", "request_id": request_id, "room": room, "count": count,
                  "members": [member_json(m) for m in members], "next": next_}


def presence_diff(room, count, changes):
    body = u8(0x29) + text(room) + varint(count) + lst(changes, enc_change)
    return body, {"type": "PRESENCE_DIFF", "room": room, "count": count,
                  "changes": [change_json(c) for c in changes]}


# The room's chain (section 9, version 3).

def chain_start(epoch):
    return hashlib.sha256(b"snapsync-chain\x00" + epoch.to_bytes(8, "big")).digest()


def chain_next(chain, diff_frame):
    """The chain after a version whose DIFF frame, as versions 1 and 2 encode it (length prefix
    included), is `diff_frame`."""
    return hashlib.sha256(chain + diff_frame).digest()


# ---------------------------------------------------------------------------------------------
# A token (Protocol/AUTH.md): a JWT in compact form, HS256 with a key published in AUTH.md (so it
# must never be used by a real server). HMAC-SHA256 from the standard library; exp is in 2100 so
# that the example stays valid for tests against a daemon holding the example key.


def b64url(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode("ascii")


def compact_json(obj):
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


EXAMPLE_SECRET = b"example secret: never use it!!!!"     # 32 bytes, the HS256 minimum
assert len(EXAMPLE_SECRET) == 32
EXAMPLE_KEY = {"kty": "oct", "kid": "example", "alg": "HS256", "use": "sig", "k": b64url(EXAMPLE_SECRET)}
EXAMPLE_HEADER = {"alg": "HS256", "kid": "example", "typ": "JWT"}
EXAMPLE_CLAIMS = {"sub": "alice", "iat": 1767225600, "exp": 4102444800,
                  "rooms": [{"match": "board:*", "rights": ["read", "write"]},
                            {"match": "todo", "rights": ["read"]}]}


def example_token():
    signing_input = b64url(compact_json(EXAMPLE_HEADER)) + "." + b64url(compact_json(EXAMPLE_CLAIMS))
    signature = hmac.new(EXAMPLE_SECRET, signing_input.encode("ascii"), hashlib.sha256).digest()
    return signing_input + "." + b64url(signature)


TOKEN = example_token().encode("ascii")


# ---------------------------------------------------------------------------------------------
# A reference model for the replay set (sections 5 and 7), only for batches that succeed.


class Model:
    """Items are kept per section in depth-first order with their levels (section 4), so a subtree
    is the run from an item up to the next item at its level or above (section 5)."""

    def __init__(self, snap):
        self.sections = [[dict(s), [dict(i, level=level_of(i)) for i in items]] for s, items in snap]

    def snap(self):
        return [(s, list(items)) for s, items in self.sections]

    def sidx(self, id_):
        return next(k for k, s in enumerate(self.sections) if s[0]["id"] == id_)

    def iloc(self, id_):
        return next((k, j) for k, s in enumerate(self.sections) for j, i in enumerate(s[1]) if i["id"] == id_)

    def end(self, k, j):
        """One past the last item of the subtree at section k, index j."""
        items, e = self.sections[k][1], j + 1
        while e < len(items) and items[e]["level"] > items[j]["level"]:
            e += 1
        return e

    def take(self, id_):
        k, j = self.iloc(id_)
        e = self.end(k, j)
        run = self.sections[k][1][j:e]
        del self.sections[k][1][j:e]
        return run

    def put(self, k, j, run, level):
        shift = level - run[0]["level"]
        self.sections[k][1][j:j] = [dict(i, level=i["level"] + shift) for i in run]

    def placed(self, placement):
        """(section, index, level) where a sibling of the anchor goes."""
        k, j = self.iloc(placement["anchor"])
        level = self.sections[k][1][j]["level"]
        return k, (self.end(k, j) if placement["side"] == "after" else j), level

    def apply(self, op):
        name = op["op"]
        fresh = lambda es, level: [dict(e, level=level) for e in es]
        if name == "append_sections":
            self.sections += [[dict(e), []] for e in op["elements"]]
        elif name == "insert_sections":
            at_ = self.sidx(op["placement"]["anchor"]) + (op["placement"]["side"] == "after")
            self.sections[at_:at_] = [[dict(e), []] for e in op["elements"]]
        elif name == "delete_sections":
            for id_ in op["ids"]:
                del self.sections[self.sidx(id_)]
        elif name == "move_section":
            moved = self.sections.pop(self.sidx(op["id"]))
            at_ = self.sidx(op["placement"]["anchor"]) + (op["placement"]["side"] == "after")
            self.sections.insert(at_, moved)
        elif name == "update_sections":
            for e in op["elements"]:
                self.sections[self.sidx(e["id"])][0] = dict(e)
        elif name == "append_items":
            k = len(self.sections) - 1 if op["section"] is None else self.sidx(op["section"])
            self.sections[k][1] += fresh(op["elements"], 0)
        elif name == "insert_items":
            k, j, level = self.placed(op["placement"])
            self.sections[k][1][j:j] = fresh(op["elements"], level)
        elif name == "delete_items":
            for id_ in op["ids"]:
                self.take(id_)
        elif name == "delete_all_items":
            self.sections = []
        elif name == "move_item":
            run = self.take(op["id"])
            k, j, level = self.placed(op["placement"])
            self.put(k, j, run, level)
        elif name == "move_item_to_section":
            run = self.take(op["id"])
            k = self.sidx(op["section"])
            self.put(k, len(self.sections[k][1]), run, 0)
        elif name == "update_items":
            for e in op["elements"]:
                k, j = self.iloc(e["id"])
                self.sections[k][1][j] = dict(e, level=self.sections[k][1][j]["level"])
        elif name == "append_children":
            k, j = self.iloc(op["parent"])
            level = self.sections[k][1][j]["level"] + 1
            e = self.end(k, j)
            self.sections[k][1][e:e] = fresh(op["elements"], level)
        elif name == "move_item_to_parent":
            run = self.take(op["id"])
            k, j = self.iloc(op["parent"])
            self.put(k, self.end(k, j), run, self.sections[k][1][j]["level"] + 1)
        else:
            raise AssertionError(name)


# ---------------------------------------------------------------------------------------------
# Test cases

NOTES = {
    "Valid": "A well-formed frame. Decoding MUST give `message`; encoding `message` MUST give `hex` exactly "
             "(every message has exactly one encoding).",
    "EdgeCase": "Valid, at a boundary: empty list or string, empty identifier, zero or maximal varint, "
                "a limit exactly reached.",
    "EveryOp": "Valid; part of the set that covers each operation kind at least once.",
    "Truncated": "`hex` is a proper prefix of a frame. A stream decoder MUST report 'need more bytes' and "
                 "consume nothing; only when the stream ends there is it an error (`malformed_frame`). "
                 "A decoder of one whole frame reports `malformed_frame` at once.",
    "FrameLength": "The 4-byte length prefix is itself wrong (zero, or over max_frame_bytes). A receiver "
                   "MUST detect it from the 4 length bytes alone, before buffering any of the body, so `hex` "
                   "may hold only the prefix.",
    "UnknownType": "The type byte is not a message type of this protocol version.",
    "BadVarint": "A varint that breaks section 2: non-minimal (overlong), longer than 10 bytes, or over 64 bits.",
    "BadFlag": "An `opt` presence flag other than 0x00 or 0x01.",
    "BadEnum": "An unknown opcode, placement side, update kind or snapshot reason.",
    "TrailingBytes": "Bytes left in the body after the last field.",
    "FieldOverrun": "A length or count that runs past the end of the body.",
    "LayoutRule": "Breaks a rule of a layout: empty HELLO versions, write_id over 32 bytes, bad magic.",
    "InvalidUtf8": "A `string` field that is not UTF-8. Receivers MAY reject it (section 2); the reference "
                   "implementations do, with `malformed_frame`. An implementation that does not validate MAY skip these.",
    "ContentRule": "A whole, well-formed SNAPSHOT, REPLACE, REPLACE_SECTION or DIFF whose content breaks a model "
                   "rule or limit. The error is the rule's code (20-32, or 53 outline_too_deep in version 2), not "
                   "malformed_frame: a server answers a REPLACE or REPLACE_SECTION like this with REJECT. `identifier` is the one that REJECT carries (JSON form), "
                   "or null for a rule about no one identifier (counts, size).",
    "MultiRule": "A ContentRule case that breaks two or more rules: `error` is the first in the order of "
                 "section 4 (size first, then each section followed by its items, element by element).",
    "Example": "Valid; a worked example printed in PROTOCOL.md (regenerated from here, so the two agree).",
    "Levels": "A snapshot field (or REPLACE_SECTION items) whose `levels` part breaks section 4: not one "
              "varint per item, a section starting below the roots, a jump of more than one level, or "
              "all levels 0. Always malformed_frame.",
    "Version1": "Decode as a version 1 connection does: a version 2 frame that version 1 refuses (section 8.2).",
    "Version2": "Decode as a version 2 connection does: a version 3 frame that version 2 refuses or reads "
                "otherwise (section 8.2).",
    "ContentUnchecked": "Valid at the wire level although the content breaks a limit: MUTATE ops are checked by "
                        "applying them, which gives the REJECT its op_index, not by the decoder.",
    "Version3": "Decode as a version 3 connection does: a version 4 frame that version 3 refuses (section 8.2).",
    "PresenceRule": "Breaks a rule of the presence layouts (sections 11.24-11.28): a watch other than 0 or 1, "
                    "a member_id 0, PRESENCE members not strictly ascending, a member_id named twice in one "
                    "PRESENCE_DIFF, an unknown change kind. Always malformed_frame.",
    "WindowRule": "Breaks a rule of the window layouts (sections 11.29-11.31): an unknown section window kind, "
                  "or WINDOW_STATE counts that are not one per section of its snapshot. Always malformed_frame.",
    "WindowLimit": "Valid at the wire level although a server refuses it: a decoder does not check max_window_rows "
                   "nor a section named twice; a server answers such a WINDOW with REJECT window_too_large or "
                   "duplicate_section (section 11.29).",
    "PresenceLimit": "Valid at the wire level although it is over a presence limit (section 12): a decoder does not "
                     "check max_presence_bytes or presence_view; a server answers a SET_PRESENCE state over "
                     "max_presence_bytes with REJECT payload_too_large (section 11.26).",
}


class Suite:
    def __init__(self):
        self.tests = []

    def add(self, comment, flags, raw, result, message=None, err=None, identifier=None):
        t = {"tcId": len(self.tests) + 1, "comment": comment, "flags": flags, "hex": raw.hex(), "result": result}
        if message is not None:
            t["message"] = message
        if err is not None:
            t["error"] = err
        if "ContentRule" in flags:
            # Section 6: the identifier a REJECT carries for this rule (null: the rule has none).
            t["identifier"] = None if identifier is None else jb(B(identifier))
        self.tests.append(t)

    def valid(self, comment, flags, built):
        body, js = built
        self.add(comment, ["Valid"] + flags, frame(body), "valid", message=js)

    def invalid(self, comment, flags, raw, err, identifier=None):
        self.add(comment, flags, raw, "invalid", err=err, identifier=identifier)

    def invalid_body(self, comment, flags, body, err, identifier=None):
        self.invalid(comment, flags, frame(body), err, identifier)


DEFAULT_LIMITS = {
    "max_frame_bytes": 16 * 1024 * 1024,
    "max_identifier_bytes": 256,
    "max_payload_bytes": 64 * 1024,
    "max_items_per_room": 1_000_000,
    "max_sections_per_room": 100_000,
    "max_rooms_per_connection": 64,
    "max_snapshot_bytes": 16 * 1024 * 1024 - 64 * 1024,
    "history_count": 16_384,
}

LIMIT_KEYS = {name: k + 1 for k, name in enumerate(DEFAULT_LIMITS)}
# Version 2 adds key 9 (section 12); DEFAULT_LIMITS stays the version 1 set that a version 1 WELCOME
# announces.
LIMIT_KEYS["max_outline_depth"] = 9
OUTLINE_DEPTH_DEFAULT = 64
# Version 4 adds keys 10 and 11 (section 12).
LIMIT_KEYS["max_presence_bytes"] = 10
LIMIT_KEYS["presence_view"] = 11
PRESENCE_BYTES_DEFAULT = 1024
PRESENCE_VIEW_DEFAULT = 100
# Windows, also version 4, add key 12 (section 12).
LIMIT_KEYS["max_window_rows"] = 12
MAX_WINDOW_ROWS_DEFAULT = 1000

EPOCH = 0x1F2E3D4C5B6A7988  # a 64-bit epoch, as servers draw them at random


def message_vectors():
    s = Suite()
    dl = [(LIMIT_KEYS[k], v) for k, v in DEFAULT_LIMITS.items()]

    # --- one valid frame per message type -----------------------------------------------------
    s.valid("HELLO, one version, no credentials", [], hello([1], "snapcat/1.0"))
    s.valid("HELLO, several versions and credentials", [], hello([2, 1], "app", b"token-123"))
    s.valid("HELLO, empty client name", ["EdgeCase"], hello([1], ""))
    s.valid("WELCOME with every default limit", [], welcome(1, 42, "snapsyncd/1.0", dl))
    s.valid("WELCOME with no limits (receiver keeps its defaults)", ["EdgeCase"], welcome(1, 0, "s", []))
    s.valid("WELCOME with an unknown limit key (receivers ignore it)", ["EdgeCase"],
            welcome(1, 7, "s", [(1, 1 << 20), (99, 5)]))
    s.valid("ERROR handshake_required", [], error(4, "expected HELLO, got JOIN"))
    s.valid("ERROR with an unknown code (receivers treat it as a generic ERROR)", ["EdgeCase"], error(999, "?"))
    s.valid("ERROR with an empty message", ["EdgeCase"], error(9, ""))
    s.valid("PING nonce 0", ["EdgeCase"], ping(0))
    s.valid("PING nonce 127 (largest 1-byte varint)", ["EdgeCase"], ping(127))
    s.valid("PING nonce 128 (smallest 2-byte varint)", ["EdgeCase"], ping(128))
    s.valid("PING nonce 2^63 (10-byte varint)", ["EdgeCase"], ping(1 << 63))
    s.valid("PONG nonce 2^64-1 (largest varint)", ["EdgeCase"], pong((1 << 64) - 1))
    s.valid("PONG nonce 300", [], pong(300))
    s.valid("JOIN, fresh", [], join(1, "lobby"))
    s.valid("JOIN with a resume position", [], join(2, "lobby", (EPOCH, 17)))
    s.valid("JOIN with a non-ASCII UTF-8 room name", ["EdgeCase"], join(3, "채팅방-é", None))
    s.valid("JOIN with an empty room name (valid frame; the server rejects invalid_room_name)", ["EdgeCase"],
            join(4, ""))
    s.valid("LEAVE", [], leave(5, "lobby"))
    s.valid("MUTATE, empty batch (valid; the server ACKs without a new version)", ["EdgeCase"],
            mutate(6, "lobby", None, b"", []))
    s.valid("MUTATE with expected_version and a write_id", [],
            mutate(7, "lobby", 12, b"w-0001", [append_items(None, el("m1", "hello"))]))
    s.valid("MUTATE with a binary 32-byte write_id (the maximum)", ["EdgeCase"],
            mutate(8, "lobby", 0, bytes(range(32)), [delete_items("m1")]))
    s.valid("MUTATE with expected_version 0", ["EdgeCase"], mutate(9, "r", 0, b"", [delete_all_items()]))
    s.valid("REPLACE with an empty snapshot", ["EdgeCase"], replace(10, "lobby", None, b"", []))
    s.valid("REPLACE with sections and items", [],
            replace(11, "lobby", 3, b"rw",
                    [(el("inbox", "Inbox"), [el("a", "A"), el("b")]), (el("archive"), [])]))
    s.valid("STATS", [], stats(12))
    s.valid("SNAPSHOT, initial, empty room", ["EdgeCase"], snapshot(1, "lobby", EPOCH, 0, "initial", []))
    s.valid("SNAPSHOT, initial, two sections", [],
            snapshot(1, "lobby", EPOCH, 5, "initial",
                     [(el("s1", "Section 1"), [el("i1", "one"), el("i2", "two")]), (el("s2"), [el("i3")])]))
    s.valid("SNAPSHOT, resync, with binary identifiers and an empty section", ["EdgeCase"],
            snapshot(2, "lobby", 1, 900, "resync",
                     [(el(b"\x00\x01", b"\xff"), []), (el(b""), [el(b"\x00", b"\n")])]))
    s.valid("CATCHUP of three versions", [], catchup(2, "lobby", EPOCH, 17, 20))
    s.valid("CATCHUP of zero versions (the client is current)", ["EdgeCase"], catchup(2, "lobby", EPOCH, 20, 20))
    s.valid("DIFF with one op", [], diff("lobby", EPOCH, 21, [append_items(None, el("m2", "hi"))]))
    s.valid("DIFF with an empty batch (valid frame; servers do not send one)", ["EdgeCase"],
            diff("lobby", EPOCH, 22, []))
    s.valid("ACK", [], ack(7, EPOCH, 13))
    s.valid("REJECT duplicate_item with op_index and identifier", [],
            reject(8, 21, 0, "m1", "item m1 already exists"))
    s.valid("REJECT version_mismatch without op_index or identifier", [],
            reject(9, 40, None, None, "expected version 12, but room lobby is at version 14"))
    s.valid("REJECT with a binary identifier", ["EdgeCase"], reject(10, 23, 3, b"\x00\xff", "no such item"))
    s.valid("REJECT with an empty identifier", ["EdgeCase"], reject(10, 22, 0, b"", "section \"\" does not exist"))
    s.valid("STATS_REPLY", [], stats_reply(12, [("rooms", 3), ("connections", 10), ("frames_out", 123456)]))
    s.valid("STATS_REPLY with no stats", ["EdgeCase"], stats_reply(12, []))

    # --- every op kind, each alone in a DIFF, and all in one MUTATE ---------------------------
    every = [
        append_sections(el("s1", "S1"), el("s2")),
        insert_sections(pl("before", "s1"), el("s0")),
        insert_sections(pl("after", "s2"), el("s3", "S3")),
        delete_sections("s3"),
        move_section("s0", pl("after", "s2")),
        update_sections(el("s1", "S1'")),
        append_items("s1", el("a", "A"), el("b", "B")),
        append_items(None, el("z")),
        insert_items(pl("before", "a"), el("a0")),
        insert_items(pl("after", "b"), el("c", "C")),
        delete_items("a0"),
        move_item("c", pl("before", "a")),
        move_item("z", pl("after", "b")),
        move_item_to_section("z", "s2"),
        update_items("reload", el("a", "A2")),
        update_items("reconfigure", el("b", "B2"), el("c", "C2")),
        delete_all_items(),
    ]
    for k, op in enumerate(every):
        detail = op["op"]
        if "placement" in op:
            detail += " " + op["placement"]["side"]
        if op["op"] == "append_items":
            detail += " to a named section" if op["section"] is not None else " to the last section"
        if op["op"] == "update_items":
            detail += " " + op["kind"]
        s.valid("DIFF: " + detail, ["EveryOp"], diff("lobby", EPOCH, 100 + k, [op]))
    s.valid("MUTATE carrying every op kind in one batch", ["EveryOp"], mutate(20, "lobby", None, b"all", every))
    s.valid("DIFF: ops with empty lists (valid frame)", ["EveryOp", "EdgeCase"],
            diff("lobby", EPOCH, 200, [append_sections(), delete_items(), update_items("reload")]))
    s.valid("DIFF: empty identifiers and payloads", ["EdgeCase"],
            diff("lobby", EPOCH, 201, [append_sections(el("")), append_items("", el("", "")),
                                       move_item_to_section("", "")]))
    s.valid("DIFF: identifiers that need the hex form in JSON", ["EdgeCase"],
            diff("lobby", EPOCH, 202, [append_items(None, el(b"\x01\x02", b"\x00"), el(b"\xc3\x28", b"\x7f"),
                                                    el("tab\there", "\x1b[0m"))]))
    s.valid("DIFF: a 200-byte payload (2-byte length varint)", ["EdgeCase"],
            diff("lobby", EPOCH, 203, [update_items("reload", el("a", "x" * 200))]))

    # --- framing ------------------------------------------------------------------------------
    s.invalid("length prefix 0", ["FrameLength"], bytes.fromhex("00000000"), "malformed_frame")
    s.invalid("length prefix 0 followed by bytes", ["FrameLength"], bytes.fromhex("0000000004"), "malformed_frame")
    over = DEFAULT_LIMITS["max_frame_bytes"] + 1
    s.invalid("length prefix max_frame_bytes + 1, no body buffered", ["FrameLength"], over.to_bytes(4, "big"),
              "frame_too_large")
    s.invalid("length prefix 0xFFFFFFFF", ["FrameLength"], bytes.fromhex("ffffffff0400"), "frame_too_large")
    s.invalid("3 bytes of a length prefix", ["Truncated"], bytes.fromhex("000000"), "malformed_frame")
    s.invalid("length prefix only", ["Truncated"], bytes.fromhex("00000002"), "malformed_frame")
    whole = frame(ping(300)[0])
    s.invalid("PING missing its last byte", ["Truncated"], whole[:-1], "malformed_frame")
    whole = frame(diff("lobby", EPOCH, 21, [append_items(None, el("m2", "hi"))])[0])
    s.invalid("DIFF cut in the middle of an op", ["Truncated"], whole[:len(whole) - 4], "malformed_frame")

    # --- type byte ----------------------------------------------------------------------------
    for t in (0x00, 0x06, 0x18, 0x27, 0xFF):
        s.invalid_body("unknown message type 0x%02x" % t, ["UnknownType"], bytes([t]) + b"\x00", "unknown_message_type")
    s.invalid_body("unknown message type 0x7f with no fields", ["UnknownType"], b"\x7f", "unknown_message_type")

    # --- varints ------------------------------------------------------------------------------
    s.invalid_body("PING nonce 0 encoded as 80 00 (overlong)", ["BadVarint"], bytes.fromhex("048000"), "malformed_frame")
    s.invalid_body("PING nonce 1 encoded as 81 80 00 (non-minimal)", ["BadVarint"], bytes.fromhex("04818000"),
                   "malformed_frame")
    s.invalid_body("PING nonce 2^63 padded to 11 bytes (longer than 10)", ["BadVarint"],
                   bytes.fromhex("04") + bytes.fromhex("80" * 9 + "81" + "00"), "malformed_frame")
    s.invalid_body("PING nonce of 11 continuation bytes", ["BadVarint"], bytes.fromhex("04" + "ff" * 10 + "01"),
                   "malformed_frame")
    s.invalid_body("PING nonce 2^64 (overflow: 10th byte 0x02)", ["BadVarint"],
                   bytes.fromhex("04" + "80" * 9 + "02"), "malformed_frame")
    s.invalid_body("PING nonce with a 10th byte of 0x7f (overflow)", ["BadVarint"],
                   bytes.fromhex("04" + "ff" * 9 + "7f"), "malformed_frame")
    s.invalid_body("PING nonce whose varint runs past the body", ["BadVarint", "FieldOverrun"], bytes.fromhex("0480"),
                   "malformed_frame")
    s.invalid_body("JOIN with a non-minimal room length (05 encoded as 85 00)", ["BadVarint"],
                   bytes.fromhex("1001") + bytes.fromhex("8500") + b"lobby" + b"\x00", "malformed_frame")
    s.invalid_body("DIFF with a non-minimal op count", ["BadVarint"],
                   diff("r", 1, 1, [])[0][:-1] + bytes.fromhex("8080808000"), "malformed_frame")

    # --- opt flags and enums ------------------------------------------------------------------
    s.invalid_body("JOIN resume flag 0x02", ["BadFlag"], join(1, "lobby")[0][:-1] + b"\x02\x01\x01", "malformed_frame")
    s.invalid_body("MUTATE expected_version flag 0xff", ["BadFlag"],
                   bytes.fromhex("1201") + text("r") + b"\xff\x00\x00", "malformed_frame")
    s.invalid_body("REJECT identifier flag 0x02", ["BadFlag"],
                   bytes.fromhex("24011500") + b"\x02\x01a" + text("m"), "malformed_frame")
    s.invalid_body("DIFF append_items section flag 0x80", ["BadFlag"],
                   u8(0x22) + text("r") + varint(1) + varint(1) + varint(1) + b"\x10\x80\x00", "malformed_frame")
    s.invalid_body("DIFF with unknown opcode 0x00", ["BadEnum"],
                   u8(0x22) + text("r") + varint(1) + varint(1) + varint(1) + b"\x00", "malformed_frame")
    s.invalid_body("DIFF with unknown opcode 0x06", ["BadEnum"],
                   u8(0x22) + text("r") + varint(1) + varint(1) + varint(1) + b"\x06\x00", "malformed_frame")
    s.invalid_body("DIFF with unknown opcode 0x17", ["BadEnum"],
                   u8(0x22) + text("r") + varint(1) + varint(1) + varint(1) + b"\x17", "malformed_frame")
    s.invalid_body("MUTATE with unknown opcode 0xff after a valid op", ["BadEnum"],
                   mutate(1, "r", None, b"", [delete_all_items()])[0][:-2] + b"\x02\x13\xff", "malformed_frame")
    s.invalid_body("DIFF insert_items with placement side 0x02", ["BadEnum"],
                   u8(0x22) + text("r") + varint(1) + varint(1) + varint(1) + b"\x11\x02\x01a\x00", "malformed_frame")
    s.invalid_body("DIFF update_items with kind 0x02", ["BadEnum"],
                   u8(0x22) + text("r") + varint(1) + varint(1) + varint(1) + b"\x16\x02\x00", "malformed_frame")
    snap_body = snapshot(1, "r", 1, 1, "initial", [])[0]
    s.invalid_body("SNAPSHOT with reason 2", ["BadEnum"],
                   snap_body[:6] + b"\x02" + snap_body[7:], "malformed_frame")

    # --- trailing bytes and overruns ----------------------------------------------------------
    s.invalid_body("PING with a trailing byte", ["TrailingBytes"], ping(1)[0] + b"\x00", "malformed_frame")
    s.invalid_body("STATS with trailing bytes", ["TrailingBytes"], stats(1)[0] + b"\x01\x02", "malformed_frame")
    s.invalid_body("DIFF with a byte after the last op", ["TrailingBytes"],
                   diff("r", 1, 1, [delete_all_items()])[0] + b"\x13", "malformed_frame")
    s.invalid_body("LEAVE whose room length runs past the body", ["FieldOverrun"],
                   bytes.fromhex("1101") + b"\x09lobby", "malformed_frame")
    s.invalid_body("DIFF whose op count exceeds the ops present", ["FieldOverrun"],
                   u8(0x22) + text("r") + varint(1) + varint(1) + varint(3) + b"\x13\x13", "malformed_frame")
    s.invalid_body("DIFF with a 2^32 element count", ["FieldOverrun"],
                   u8(0x22) + text("r") + varint(1) + varint(1) + varint(1) + b"\x01" + varint(1 << 32),
                   "malformed_frame")
    s.invalid_body("SNAPSHOT with a digest cut short", ["FieldOverrun"],
                   snap_body[:7] + b"\x00" * 20, "malformed_frame")
    s.invalid_body("ACK missing its version", ["FieldOverrun"], bytes.fromhex("230101"), "malformed_frame")
    s.invalid_body("HELLO with nothing after the type byte", ["FieldOverrun"], b"\x01", "malformed_frame")

    # --- layout rules -------------------------------------------------------------------------
    s.invalid_body("HELLO with magic \"SNAQ\"", ["LayoutRule"], b"\x01SNAQ" + hello([1], "x")[0][5:], "bad_magic")
    s.invalid_body("HELLO with lower-case magic", ["LayoutRule"], b"\x01snap" + hello([1], "x")[0][5:], "bad_magic")
    s.invalid_body("HELLO with an empty versions list", ["LayoutRule"],
                   b"\x01SNAP" + lst([], varint) + text("x") + bstr(b""), "malformed_frame")
    s.invalid_body("MUTATE with a 33-byte write_id", ["LayoutRule"],
                   bytes.fromhex("1201") + text("r") + b"\x00" + bstr(b"w" * 33) + b"\x00", "malformed_frame")
    s.invalid_body("REPLACE with a 33-byte write_id", ["LayoutRule"],
                   bytes.fromhex("1301") + text("r") + b"\x00" + bstr(b"w" * 33) + b"\x00", "malformed_frame")

    # --- UTF-8 --------------------------------------------------------------------------------
    s.invalid_body("JOIN room name with a lone continuation byte", ["InvalidUtf8"],
                   bytes.fromhex("1001") + bstr(b"lob\x80y") + b"\x00", "malformed_frame")
    s.invalid_body("ERROR message with an overlong encoding of '/'", ["InvalidUtf8"],
                   bytes.fromhex("0301") + bstr(b"\xc0\xaf"), "malformed_frame")
    s.invalid_body("DIFF room name cut inside a 3-byte sequence", ["InvalidUtf8"],
                   u8(0x22) + bstr("채".encode()[:2]) + varint(1) + varint(1) + varint(0), "malformed_frame")

    # --- content rules in whole frames ---------------------------------------------------------
    s.invalid_body("SNAPSHOT with an item id in two sections", ["ContentRule"],
                   snapshot(1, "r", 1, 1, "initial", [(el("s1"), [el("x")]), (el("s2"), [el("x")])])[0],
                   "duplicate_item", "x")
    s.invalid_body("SNAPSHOT with a repeated section id", ["ContentRule"],
                   snapshot(1, "r", 1, 1, "initial", [(el("s"), []), (el("s"), [])])[0], "duplicate_section", "s")
    s.invalid_body("REPLACE with a repeated item id", ["ContentRule"],
                   replace(3, "r", None, b"", [(el("s"), [el("x"), el("x")])])[0], "duplicate_item", "x")
    s.invalid_body("DIFF with a 257-byte identifier", ["ContentRule"],
                   diff("r", 1, 1, [delete_items("i" * 257)])[0], "identifier_too_long", "i" * 257)
    s.valid("DIFF with a 256-byte identifier (max_identifier_bytes)", ["EdgeCase"],
            diff("r", 1, 1, [delete_items("i" * 256)]))

    # --- the worked examples of PROTOCOL.md ----------------------------------------------------
    for name, (built, _) in doc_examples().items():
        if (name not in LIFECYCLE_EXAMPLES and name not in OUTLINE_EXAMPLES and name not in CHAIN_EXAMPLES
                and name not in PRESENCE_EXAMPLES and name not in WINDOW_EXAMPLES
                and name != "snapshot-outline"):
            s.valid("PROTOCOL.md example " + name, ["Example"], built)

    # --- authentication (section 8.4): AUTH, LEFT and their codes. Last in the file, so that the
    # tcIds above (and the fuzz seeds made from them) stay where they were.
    s.valid("HELLO with a token (the JWT of Protocol/AUTH.md) as credentials", [], hello([1], "snapcat", TOKEN))
    s.valid("AUTH with a token", [], auth(13, TOKEN))
    s.valid("AUTH with empty credentials (valid frame; a server that authenticates refuses it)", ["EdgeCase"],
            auth(0, b""))
    s.valid("AUTH with binary credentials (valid frame; not a token)", ["EdgeCase"], auth(2**63, b"\x00\xff\n"))
    s.valid("LEFT forbidden", [], left("board:2", 48, "token of alice grants no read on room board:2"))
    s.valid("LEFT with an unknown code (receivers still drop the membership)", ["EdgeCase"], left("r", 999, "?"))
    s.valid("LEFT with an empty message and a non-ASCII room", ["EdgeCase"], left("채팅방-é", 48, ""))
    s.valid("ERROR unauthorized", [], error(11, "bad signature for key \"example\""))
    s.valid("ERROR token_expired", [], error(13, "token of alice expired at 2100-01-01T00:00:00Z"))
    s.valid("REJECT forbidden, without op_index or identifier", [],
            reject(14, 48, None, None, "token of alice grants no write on room board:2"))
    whole = frame(auth(13, TOKEN)[0])
    s.invalid("AUTH cut inside its credentials", ["Truncated"], whole[:len(whole) // 2], "malformed_frame")
    whole = frame(left("board:2", 48, "gone")[0])
    s.invalid("LEFT missing its last byte", ["Truncated"], whole[:-1], "malformed_frame")
    s.invalid_body("AUTH with nothing after the type byte", ["FieldOverrun"], b"\x15", "malformed_frame")
    s.invalid_body("AUTH missing its credentials", ["FieldOverrun"], b"\x15\x01", "malformed_frame")
    s.invalid_body("AUTH whose credentials length runs past the body", ["FieldOverrun"],
                   b"\x15\x01" + varint(10) + b"abc", "malformed_frame")
    s.invalid_body("AUTH with a byte after its credentials", ["TrailingBytes"], auth(1, b"t")[0] + b"\x00",
                   "malformed_frame")
    s.invalid_body("AUTH with a non-minimal request_id", ["BadVarint"], b"\x15\x81\x00" + bstr(b"t"),
                   "malformed_frame")
    s.invalid_body("LEFT missing its message", ["FieldOverrun"], u8(0x26) + text("r") + varint(48),
                   "malformed_frame")
    s.invalid_body("LEFT with a byte after its message", ["TrailingBytes"], left("r", 48, "m")[0] + b"\x00",
                   "malformed_frame")
    s.invalid_body("LEFT code 2^64 (overflow)", ["BadVarint"],
                   u8(0x26) + text("r") + bytes.fromhex("80" * 9 + "02") + text(""), "malformed_frame")
    s.invalid_body("LEFT room name with a lone continuation byte", ["InvalidUtf8"],
                   u8(0x26) + bstr(b"board\x80") + varint(48) + text("m"), "malformed_frame")
    s.invalid_body("LEFT message with a truncated 2-byte sequence", ["InvalidUtf8"],
                   u8(0x26) + text("r") + varint(48) + bstr(b"no \xc3"), "malformed_frame")

    # --- rooms that end (sections 11.18-11.20): DROP, SET_TTL, LEFT room_deleted / room_expired.
    # Appended after the authentication vectors for the same reason.
    s.valid("DROP", [], drop(11, "todo"))
    s.valid("DROP with a 128-byte room name", ["EdgeCase"], drop(2**64 - 1, "r" * 128))
    s.valid("DROP with an empty room name (valid frame; the server answers invalid_room_name)", ["EdgeCase"],
            drop(0, ""))
    s.valid("SET_TTL of one day", [], set_ttl(12, "todo", 86400))
    s.valid("SET_TTL 0 (never expires)", ["EdgeCase"], set_ttl(1, "r", 0))
    s.valid("SET_TTL of 2^64 - 1 seconds", ["EdgeCase"], set_ttl(1, "r", 2**64 - 1))
    s.valid("LEFT room_deleted", [], left("todo", 49, "room todo was deleted"))
    s.valid("LEFT room_expired", [], left("todo", 50, ""))
    s.valid("ACK of a DROP of a room that did not exist", ["EdgeCase"], ack(11, 0, 0))
    s.valid("REJECT forbidden answering a DROP", [], reject(11, 48, None, None, "token of alice grants no admin on room todo"))
    whole = frame(drop(11, "todo")[0])
    s.invalid("DROP missing its last byte", ["Truncated"], whole[:-1], "malformed_frame")
    whole = frame(set_ttl(12, "todo", 86400)[0])
    s.invalid("SET_TTL cut inside its seconds", ["Truncated"], whole[:-2], "malformed_frame")
    s.invalid_body("DROP with nothing after the type byte", ["FieldOverrun"], b"\x16", "malformed_frame")
    s.invalid_body("DROP missing its room", ["FieldOverrun"], b"\x16\x01", "malformed_frame")
    s.invalid_body("DROP with a byte after its room", ["TrailingBytes"], drop(1, "r")[0] + b"\x00",
                   "malformed_frame")
    s.invalid_body("DROP room name with a lone continuation byte", ["InvalidUtf8"],
                   u8(0x16) + varint(1) + bstr(b"todo\x80"), "malformed_frame")
    s.invalid_body("SET_TTL missing its seconds", ["FieldOverrun"], u8(0x17) + varint(1) + text("r"),
                   "malformed_frame")
    s.invalid_body("SET_TTL with a non-minimal seconds", ["BadVarint"],
                   u8(0x17) + varint(1) + text("r") + b"\x80\x00", "malformed_frame")
    s.invalid_body("SET_TTL seconds 2^64 (overflow)", ["BadVarint"],
                   u8(0x17) + varint(1) + text("r") + bytes.fromhex("80" * 9 + "02"), "malformed_frame")
    s.invalid_body("SET_TTL with a byte after its seconds", ["TrailingBytes"], set_ttl(1, "r", 5)[0] + b"\x00",
                   "malformed_frame")
    for name in LIFECYCLE_EXAMPLES:
        s.valid("PROTOCOL.md example " + name, ["Example"], doc_examples()[name][0])
    return s.tests


# Examples added with DROP and SET_TTL: their vectors come after the older ones (see above).
LIFECYCLE_EXAMPLES = ["DROP", "LEFT-room_deleted", "SET_TTL"]
# Version 2 examples: vectors of outline.json, not messages.json (snapshot-outline is a bare field,
# pinned by the SNAPSHOT-outline frame that carries it).
OUTLINE_EXAMPLES = ["HELLO-v2", "WELCOME-v2", "SNAPSHOT-outline", "DIFF-outline", "REPLACE_SECTION"]
# Version 3 examples: vectors of chain.json.
CHAIN_EXAMPLES = ["HELLO-v3", "JOIN-resume-v3", "SNAPSHOT-v3", "DIFF-v3", "VERIFY", "DIGEST", "CATCHUP-v3",
                  "CATCHUP-folded", "DIFF-folded"]
# Version 4 examples: vectors of presence.json.
PRESENCE_EXAMPLES = ["HELLO-v4", "WELCOME-v4", "PRESENCE_WATCH", "PRESENCE", "PRESENCE_LIST", "PRESENCE-page",
                     "SET_PRESENCE", "PRESENCE_DIFF"]


# Small limits, so that boundaries can be shown in small frames.
SMALL_LIMITS = {
    "max_frame_bytes": 128,
    "max_identifier_bytes": 8,
    "max_payload_bytes": 16,
    "max_items_per_room": 4,
    "max_sections_per_room": 2,
    "max_rooms_per_connection": 64,
    "max_snapshot_bytes": 40,
    "history_count": 1024,
}


def pad_frame(build, target):
    """A frame whose body is exactly `target` bytes, by growing a payload (built by build(n))."""
    for n in range(0, target + 1):
        body, js = build(n)
        if len(body) == target:
            return body, js
    raise AssertionError(target)


def limit_vectors():
    s = Suite()
    L = SMALL_LIMITS
    fmax = L["max_frame_bytes"]
    # Frame length at 0, 1, max, max+1. A MUTATE payload is not checked by the decoder, so it
    # can fill the frame up to any size.
    s.invalid("frame body length 0", ["FrameLength"], bytes.fromhex("00000000"), "malformed_frame")
    s.invalid("frame body length 1 holding only an unknown type byte", ["UnknownType"], frame(b"\x00"),
              "unknown_message_type")
    s.invalid("frame body length 1 holding only PING's type byte", ["FieldOverrun"], frame(b"\x04"), "malformed_frame")
    fill = lambda n: mutate(1, "r", None, b"", [update_items("reload", el("a", "p" * n))])
    s.valid("frame body length max_frame_bytes - 1", ["EdgeCase", "ContentUnchecked"], pad_frame(fill, fmax - 1))
    s.valid("frame body length max_frame_bytes", ["EdgeCase", "ContentUnchecked"], pad_frame(fill, fmax))
    body, _ = pad_frame(fill, fmax + 1)
    s.invalid("frame body length max_frame_bytes + 1 (whole frame present)", ["FrameLength"], frame(body),
              "frame_too_large")
    s.invalid("frame body length max_frame_bytes + 1 (prefix only)", ["FrameLength"], (fmax + 1).to_bytes(4, "big"),
              "frame_too_large")

    # Identifier length in a DIFF at 0, 1, max, max+1; in an anchor; in a MUTATE (unchecked).
    imax = L["max_identifier_bytes"]
    for n in (0, 1, imax):
        s.valid("DIFF identifier of %d bytes" % n, ["EdgeCase"], diff("r", 1, 1, [append_sections(el("s" * n))]))
    s.invalid_body("DIFF identifier of max + 1 bytes", ["ContentRule"],
                   diff("r", 1, 1, [append_sections(el("s" * (imax + 1)))])[0], "identifier_too_long", "s" * (imax + 1))
    s.invalid_body("DIFF anchor of max + 1 bytes", ["ContentRule"],
                   diff("r", 1, 1, [move_section("s", pl("after", "a" * (imax + 1)))])[0], "identifier_too_long",
                   "a" * (imax + 1))
    s.invalid_body("DIFF deleted id of max + 1 bytes", ["ContentRule"],
                   diff("r", 1, 1, [delete_items("i" * (imax + 1))])[0], "identifier_too_long", "i" * (imax + 1))
    s.valid("MUTATE identifier of max + 1 bytes (the server rejects it when applying)", ["ContentUnchecked"],
            mutate(1, "r", None, b"", [append_sections(el("s" * (imax + 1)))]))

    # Payload size in a DIFF at 0, 1, max, max+1.
    pmax = L["max_payload_bytes"]
    for n in (0, 1, pmax):
        s.valid("DIFF payload of %d bytes" % n, ["EdgeCase"], diff("r", 1, 1, [update_items("reload", el("i", "p" * n))]))
    s.invalid_body("DIFF payload of max + 1 bytes", ["ContentRule"],
                   diff("r", 1, 1, [update_items("reload", el("i", "p" * (pmax + 1)))])[0], "payload_too_large", "i")
    s.valid("MUTATE payload of max + 1 bytes (the server rejects it when applying)", ["ContentUnchecked"],
            mutate(1, "r", None, b"", [update_items("reload", el("i", "p" * (pmax + 1)))]))

    # Snapshot limits: identifiers, payloads, items, sections, bytes.
    def snap_items(n):
        return [(el("s"), [el(str(k)) for k in range(n)])]
    for n in (0, 1, L["max_items_per_room"]):
        s.valid("SNAPSHOT with %d items" % n, ["EdgeCase"], snapshot(1, "r", 1, 1, "initial", snap_items(n)))
    s.invalid_body("SNAPSHOT with max_items_per_room + 1 items", ["ContentRule"],
                   snapshot(1, "r", 1, 1, "initial", snap_items(L["max_items_per_room"] + 1))[0], "too_many_items", None)
    def snap_sections(n):
        return [(el(str(k)), []) for k in range(n)]
    for n in (0, 1, L["max_sections_per_room"]):
        s.valid("SNAPSHOT with %d sections" % n, ["EdgeCase"], snapshot(1, "r", 1, 1, "initial", snap_sections(n)))
    s.invalid_body("SNAPSHOT with max_sections_per_room + 1 sections", ["ContentRule"],
                   snapshot(1, "r", 1, 1, "initial", snap_sections(L["max_sections_per_room"] + 1))[0],
                   "too_many_sections", None)
    s.invalid_body("REPLACE with max_sections_per_room + 1 sections", ["ContentRule"],
                   replace(1, "r", None, b"", snap_sections(L["max_sections_per_room"] + 1))[0], "too_many_sections", None)
    s.invalid_body("SNAPSHOT with an identifier of max + 1 bytes", ["ContentRule"],
                   snapshot(1, "r", 1, 1, "initial", [(el("s" * (imax + 1)), [])])[0], "identifier_too_long",
                   "s" * (imax + 1))
    s.invalid_body("REPLACE with a payload of max + 1 bytes", ["ContentRule"],
                   replace(1, "r", None, b"", [(el("s"), [el("i", "p" * (pmax + 1))])])[0], "payload_too_large", "i")

    # Two rules at once (section 4's order): size first, then document order, element by element.
    s.invalid_body("REPLACE [d{x, x}, d]: the duplicate item comes before the duplicate section", ["ContentRule", "MultiRule"],
                   replace(1, "r", None, b"", [(el("d"), [el("x"), el("x")]), (el("d"), [])])[0], "duplicate_item", "x")
    s.invalid_body("SNAPSHOT [a{x}, b{x}, c]: the duplicate item comes before the third section (over the limit)",
                   ["ContentRule", "MultiRule"],
                   snapshot(1, "r", 1, 1, "initial", [(el("a"), [el("x")]), (el("b"), [el("x")]), (el("c"), [])])[0],
                   "duplicate_item", "x")
    s.invalid_body("SNAPSHOT whose fifth item (over the limit) has an identifier over the limit: the element's own rule first",
                   ["ContentRule", "MultiRule"],
                   snapshot(1, "r", 1, 1, "initial", [(el("s"), [el(str(k)) for k in range(4)] + [el("5" * (imax + 1))])])[0],
                   "identifier_too_long", "5" * (imax + 1))
    s.invalid_body("SNAPSHOT whose third section (over the limit) repeats the first: duplicate before the count",
                   ["ContentRule", "MultiRule"],
                   snapshot(1, "r", 1, 1, "initial", [(el("a"), []), (el("b"), []), (el("a"), [])])[0],
                   "duplicate_section", "a")

    smax = L["max_snapshot_bytes"]
    # Two sections (the limit), each with one item; payloads sized so that the encoding is
    # exactly n bytes.
    def snap_bytes(n):
        base = enc_snapshot([(el("a"), [el("1")]), (el("b"), [el("2")])])
        extra = n - len(base)
        assert 0 <= extra <= 2 * pmax
        p1, p2 = extra // 2, extra - extra // 2
        return [(el("a", "x" * p1), [el("1")]), (el("b", "y" * p2), [el("2")])]
    for n in (smax - 1, smax):
        snap = snap_bytes(n)
        assert len(enc_snapshot(snap)) == n
        s.valid("SNAPSHOT whose encoding is %d bytes (max_snapshot_bytes %d)" % (n, smax), ["EdgeCase"],
                snapshot(1, "r", 1, 1, "initial", snap))
    snap = snap_bytes(smax + 1)
    assert len(enc_snapshot(snap)) == smax + 1
    s.invalid_body("SNAPSHOT whose encoding is max_snapshot_bytes + 1", ["ContentRule"],
                   snapshot(1, "r", 1, 1, "initial", snap)[0], "snapshot_too_large")
    s.invalid_body("REPLACE whose snapshot encoding is max_snapshot_bytes + 1", ["ContentRule"],
                   replace(1, "r", None, b"", snap)[0], "snapshot_too_large", None)
    big = [(el("a", "x" * pmax), [el("1"), el("1")]), (el("b", "y" * pmax), [])]
    assert len(enc_snapshot(big)) > smax
    s.invalid_body("REPLACE over max_snapshot_bytes that also repeats an item: the size comes first",
                   ["ContentRule", "MultiRule"], replace(1, "r", None, b"", big)[0], "snapshot_too_large", None)
    for t in s.tests:
        assert len(bytes.fromhex(t["hex"])) - 4 <= fmax or "frame_too_large" == t.get("error"), t["comment"]
    return s.tests


OUTLINE_LIMITS = dict(DEFAULT_LIMITS, max_outline_depth=4)


def outline_vectors():
    """Version 2 frames (section 8.2): the new ops, REPLACE_SECTION, snapshot fields with `levels`
    (section 4) and their malformed and content cases; `Version1` tests are decoded as version 1."""
    s = Suite()
    deep = OUTLINE_LIMITS["max_outline_depth"]
    forest = [(el("s1", "S1"), [at(0, el("a")), at(1, el("a1")), at(2, el("a11")), at(1, el("a2")), at(0, el("b"))]),
              (el("s2"), [at(0, el("c")), at(0, el("d"))])]

    def diff_body(*raw_ops):
        return u8(0x22) + text("r") + varint(1) + varint(1) + varint(len(raw_ops)) + b"".join(raw_ops)

    def snap_body(snap_bytes):
        return snapshot(1, "r", 1, 1, "initial", [])[0][:-1] + snap_bytes

    def items_raw(*ids):
        return lst([el(i) for i in ids], enc_el)

    # --- valid version 2 frames ---------------------------------------------------------------
    s.valid("HELLO offering versions 2 and 1", [], hello([2, 1], "snapcat"))
    s.valid("WELCOME version 2 with max_outline_depth (key 9)", [],
            welcome(2, 1, "snapsyncd/1.0", [(1, 1 << 24), (9, OUTLINE_DEPTH_DEFAULT)]))
    s.valid("DIFF: append_children", ["EveryOp"], diff("r", EPOCH, 1, [append_children("a", el("x", "X"), el("y"))]))
    s.valid("DIFF: move_item_to_parent", ["EveryOp"], diff("r", EPOCH, 2, [move_item_to_parent("b", "a1")]))
    s.valid("DIFF: append_children with no elements and empty identifiers", ["EveryOp", "EdgeCase"],
            diff("r", EPOCH, 3, [append_children(""), move_item_to_parent("", "")]))
    s.valid("MUTATE mixing version 1 and version 2 ops", ["EveryOp"],
            mutate(4, "r", 3, b"w", [append_items("s1", el("n")), append_children("n", el("n1")),
                                     move_item_to_parent("b", "n1"), delete_items("a")]))
    s.valid("SNAPSHOT of an outline (levels part after the items)", [],
            snapshot(1, "r", EPOCH, 9, "initial", forest))
    s.valid("SNAPSHOT of a flat room: no levels part (the version 1 bytes)", ["EdgeCase"],
            snapshot(1, "r", EPOCH, 9, "initial", [(el("s"), [el("a"), el("b")])]))
    s.valid("SNAPSHOT whose deepest item is at max_outline_depth - 1", ["EdgeCase"],
            snapshot(1, "r", EPOCH, 9, "initial", [(el("s"), [at(k, el("i%d" % k)) for k in range(deep)])]))
    s.valid("SNAPSHOT whose first section is flat and second an outline", ["EdgeCase"],
            snapshot(1, "r", EPOCH, 9, "initial", [(el("f"), [el("x")]), (el("o"), [at(0, el("p")), at(1, el("q"))])]))
    s.valid("REPLACE with an outline", [], replace(5, "r", None, b"", forest))
    s.valid("REPLACE_SECTION with an outline", [],
            replace_section(6, "r", 7, b"ws", "s1", [at(0, el("a", "A")), at(1, el("b")), at(0, el("c"))]))
    s.valid("REPLACE_SECTION with flat items (no levels part)", ["EdgeCase"],
            replace_section(7, "r", None, b"", "s1", [el("a"), el("b")]))
    s.valid("REPLACE_SECTION emptying a section", ["EdgeCase"], replace_section(8, "r", None, b"", "s1", []))
    s.valid("REPLACE_SECTION with a binary section identifier and a 32-byte write_id", ["EdgeCase"],
            replace_section(9, "r", 0, bytes(range(32)), b"\x00\xff", [at(0, el("a")), at(1, el("b")), at(2, el("c"))]))
    for code, name, ident in ((51, "parent_not_found", "p"), (52, "move_into_own_subtree", "a"),
                              (53, "outline_too_deep", "x")):
        s.valid("REJECT " + name, [], reject(10, code, 0, ident, name.replace("_", " ") + " " + ident))
    s.valid("REJECT outline_unsupported answering a version 1 JOIN", [],
            reject(11, 54, None, None, "room r is an outline; version 1 cannot join it"))
    s.valid("LEFT outline_unsupported", [], left("r", 54, "room r became an outline"))

    # --- malformed levels (section 4) -----------------------------------------------------------
    two = lst([el("s")], lambda e: enc_el(e) + items_raw("a", "b"))
    s.invalid_body("SNAPSHOT levels: one varint for two items", ["Levels", "FieldOverrun"],
                   snap_body(two + b"\x00"), "malformed_frame")
    s.invalid_body("SNAPSHOT levels: three varints for two items", ["Levels", "TrailingBytes"],
                   snap_body(two + b"\x00\x01\x00"), "malformed_frame")
    s.invalid_body("SNAPSHOT levels: the first item of the section at level 1", ["Levels"],
                   snap_body(two + b"\x01\x02"), "malformed_frame")
    s.invalid_body("SNAPSHOT levels: a jump of two levels", ["Levels"],
                   snap_body(lst([el("s")], lambda e: enc_el(e) + items_raw("a", "b", "c")) + b"\x00\x02\x01"),
                   "malformed_frame")
    s.invalid_body("SNAPSHOT levels: all 0 (a flat snapshot has no levels part)", ["Levels"],
                   snap_body(two + b"\x00\x00"), "malformed_frame")
    s.invalid_body("SNAPSHOT levels: the first item of the second section at level 1", ["Levels"],
                   snap_body(lst([(el("s"), ["a", "b"]), (el("t"), ["c"])],
                                 lambda x: enc_el(x[0]) + items_raw(*x[1])) + b"\x00\x01\x01"), "malformed_frame")
    s.invalid_body("SNAPSHOT levels: a non-minimal varint", ["Levels", "BadVarint"],
                   snap_body(two + b"\x00\x81\x00"), "malformed_frame")
    s.invalid_body("SNAPSHOT levels: a byte after a snapshot with no items", ["Levels", "TrailingBytes"],
                   snap_body(lst([el("s")], lambda e: enc_el(e) + items_raw()) + b"\x00"), "malformed_frame")
    s.invalid_body("SNAPSHOT levels: an overflowing varint", ["Levels", "BadVarint"],
                   snap_body(two + b"\x00" + bytes.fromhex("80" * 9 + "02")), "malformed_frame")
    s.invalid_body("REPLACE levels: the last item's varint missing", ["Levels", "FieldOverrun"],
                   replace(1, "r", None, b"", [(el("s"), [at(0, el("a")), at(1, el("b")), at(1, el("c"))])])[0][:-1],
                   "malformed_frame")
    s.invalid_body("REPLACE_SECTION levels: the first item at level 1", ["Levels"],
                   replace_section(1, "r", None, b"", "s", [])[0][:-1] + items_raw("a", "b") + b"\x01\x01",
                   "malformed_frame")
    s.invalid_body("REPLACE_SECTION levels: all 0", ["Levels"],
                   replace_section(1, "r", None, b"", "s", [])[0][:-1] + items_raw("a") + b"\x00", "malformed_frame")
    s.invalid_body("REPLACE_SECTION levels malformed and an item repeated: malformed_frame comes first",
                   ["Levels", "MultiRule"],
                   replace_section(1, "r", None, b"", "s", [])[0][:-1] + items_raw("a", "a") + b"\x00\x02",
                   "malformed_frame")

    # --- other malformed version 2 frames -------------------------------------------------------
    s.invalid_body("DIFF append_children missing its elements", ["FieldOverrun"],
                   diff_body(u8(0x17) + bstr(b"p")), "malformed_frame")
    s.invalid_body("DIFF move_item_to_parent missing its parent", ["FieldOverrun"],
                   diff_body(u8(0x18) + bstr(b"x")), "malformed_frame")
    s.invalid_body("DIFF with unknown opcode 0x19", ["BadEnum"], diff_body(b"\x19"), "malformed_frame")
    s.invalid_body("REPLACE_SECTION with a 33-byte write_id", ["LayoutRule"],
                   u8(0x18) + varint(1) + text("r") + b"\x00" + bstr(b"w" * 33) + bstr(b"s") + b"\x00", "malformed_frame")
    s.invalid_body("REPLACE_SECTION missing its items", ["FieldOverrun"],
                   u8(0x18) + varint(1) + text("r") + b"\x00" + bstr(b"") + bstr(b"s"), "malformed_frame")
    whole = frame(replace_section(1, "r", None, b"", "s", [at(0, el("a")), at(1, el("b"))])[0])
    s.invalid("REPLACE_SECTION missing its last byte", ["Truncated"], whole[:-1], "malformed_frame")
    s.invalid_body("unknown message type 0x19", ["UnknownType"], b"\x19\x00", "unknown_message_type")

    # --- content rules ----------------------------------------------------------------------------
    too_deep = [(el("s"), [at(k, el("i%d" % k)) for k in range(deep + 1)])]
    s.invalid_body("SNAPSHOT with an item at level max_outline_depth", ["ContentRule"],
                   snapshot(1, "r", 1, 1, "initial", too_deep)[0], "outline_too_deep", "i%d" % deep)
    s.invalid_body("REPLACE with an item at level max_outline_depth", ["ContentRule"],
                   replace(1, "r", None, b"", too_deep)[0], "outline_too_deep", "i%d" % deep)
    s.invalid_body("REPLACE_SECTION with an item at level max_outline_depth", ["ContentRule"],
                   replace_section(1, "r", None, b"", "s", too_deep[0][1])[0], "outline_too_deep", "i%d" % deep)
    s.invalid_body("REPLACE too deep and with a repeated item: the item rules come before the depth",
                   ["ContentRule", "MultiRule"],
                   replace(1, "r", None, b"", [(el("s"), too_deep[0][1] + [at(0, el("i0"))])])[0], "duplicate_item", "i0")
    s.invalid_body("REPLACE_SECTION with a repeated item", ["ContentRule"],
                   replace_section(1, "r", None, b"", "s", [at(0, el("a")), at(1, el("a"))])[0], "duplicate_item", "a")
    s.invalid_body("REPLACE_SECTION with a 257-byte identifier", ["ContentRule"],
                   replace_section(1, "r", None, b"", "s", [el("i" * 257)])[0], "identifier_too_long", "i" * 257)
    s.invalid_body("DIFF append_children whose parent is a 257-byte identifier", ["ContentRule"],
                   diff("r", 1, 1, [append_children("p" * 257, el("x"))])[0], "identifier_too_long", "p" * 257)
    s.invalid_body("DIFF move_item_to_parent whose parent is a 257-byte identifier", ["ContentRule"],
                   diff("r", 1, 1, [move_item_to_parent("x", "p" * 257)])[0], "identifier_too_long", "p" * 257)

    # --- the worked examples ----------------------------------------------------------------------
    for name in OUTLINE_EXAMPLES:
        s.valid("PROTOCOL.md example " + name, ["Example"], doc_examples()[name][0])

    # --- what version 1 refuses (section 8.2) -----------------------------------------------------
    s.invalid_body("version 1: DIFF with append_children", ["Version1", "BadEnum"],
                   diff("r", 1, 1, [append_children("a", el("x"))])[0], "malformed_frame")
    s.invalid_body("version 1: DIFF with move_item_to_parent", ["Version1", "BadEnum"],
                   diff("r", 1, 1, [move_item_to_parent("b", "a")])[0], "malformed_frame")
    s.invalid_body("version 1: REPLACE_SECTION", ["Version1", "UnknownType"],
                   replace_section(1, "r", None, b"", "s", [el("a")])[0], "unknown_message_type")
    s.invalid_body("version 1: SNAPSHOT of an outline (its levels are trailing bytes)", ["Version1", "TrailingBytes"],
                   snapshot(1, "r", EPOCH, 9, "initial", forest)[0], "malformed_frame")
    s.invalid_body("version 1: REPLACE with an outline", ["Version1", "TrailingBytes"],
                   replace(5, "r", None, b"", forest)[0], "malformed_frame")
    return s.tests


OUTLINE_BATCH_LIMITS = dict(SMALL_LIMITS, max_items_per_room=10, max_snapshot_bytes=128, max_outline_depth=3)



def batch_case(tests, comment, flags, start, ops, error=None, op_index=None, identifier=None, check_end=None):
    """Appends one MUTATE batch vector to `tests`: accepted with the model's end snapshot and
    digest (after `check_end(end)`), or rejected with the named error."""
    t = {"tcId": len(tests) + 1, "comment": comment, "flags": flags, "start": snapshot_json(start),
         "hex": frame(mutate(1, "r", None, b"", ops)[0]).hex()}
    if error is None:
        model = Model(start)
        for op in ops:
            model.apply(op)
        end = model.snap()
        if check_end is not None:
            check_end(end)
        t.update({"result": "accepted", "end": snapshot_json(end), "endDigest": digest(end).hex()})
    else:
        t.update({"result": "rejected", "error": error, "opIndex": op_index,
                  "identifier": None if identifier is None else jb(B(identifier))})
    tests.append(t)

def outline_batch_vectors():
    """Batches on outlines (section 5): the forest meaning of every op, and the REJECTs of outlines
    with their order (section 6). Written from the document's rules, not computed."""
    L = OUTLINE_BATCH_LIMITS
    # s: a{a1{a11}, a2}, b   t: c{c1}
    room = [(el("s"), [at(0, el("a")), at(1, el("a1")), at(2, el("a11")), at(1, el("a2")), at(0, el("b"))]),
            (el("t"), [at(0, el("c")), at(1, el("c1"))])]
    tests = []

    def case(comment, flags, start, ops, error=None, op_index=None, identifier=None, expect=None):
        def check(end):
            if expect is not None:
                # The rule as the document states it, written out: the model must agree.
                got = [[(i["id"].decode(), i["level"]) for i in items] for _, items in end]
                assert got == expect, (comment, got)
            # An accepted batch stays within the limits at its end (each op's growth is not re-checked).
            assert sum(len(items) for _, items in end) <= L["max_items_per_room"], comment
            assert len(enc_snapshot(end)) <= L["max_snapshot_bytes"], comment
            assert all(level_of(i) < L["max_outline_depth"] for _, items in end for i in items), comment
        batch_case(tests, comment, flags, start, ops, error, op_index, identifier, check)

    base_t = [("c", 0), ("c1", 1)]
    case("append_items adds roots after the section's last subtree", ["Forest"], room, [append_items("s", el("n"))],
         expect=[[("a", 0), ("a1", 1), ("a11", 2), ("a2", 1), ("b", 0), ("n", 0)], base_t])
    case("append_children adds the last children of the parent, after its whole subtree", ["Forest"], room,
         [append_children("a", el("n"), el("m"))],
         expect=[[("a", 0), ("a1", 1), ("a11", 2), ("a2", 1), ("n", 1), ("m", 1), ("b", 0)], base_t])
    case("insert_items before a child: a sibling at the child's level", ["Forest"], room,
         [insert_items(pl("before", "a2"), el("n"))],
         expect=[[("a", 0), ("a1", 1), ("a11", 2), ("n", 1), ("a2", 1), ("b", 0)], base_t])
    case("insert_items after an item: after its whole subtree", ["Forest"], room,
         [insert_items(pl("after", "a1"), el("n"))],
         expect=[[("a", 0), ("a1", 1), ("a11", 2), ("n", 1), ("a2", 1), ("b", 0)], base_t])
    case("insert_items after a root with children: a root after the subtree", ["Forest"], room,
         [insert_items(pl("after", "a"), el("n"))],
         expect=[[("a", 0), ("a1", 1), ("a11", 2), ("a2", 1), ("n", 0), ("b", 0)], base_t])
    case("delete_items removes the subtree", ["Forest"], room, [delete_items("a1")],
         expect=[[("a", 0), ("a2", 1), ("b", 0)], base_t])
    case("delete_items of a descendant, then of its ancestor: both exist in turn", ["Forest"], room,
         [delete_items("a11", "a")], expect=[[("b", 0)], base_t])
    case("delete_items of an ancestor, then of its descendant: the descendant went with it", ["Forest"], room,
         [delete_items("a", "a11")], "item_not_found", 0, "a11")
    case("move_item before an anchor: the subtree becomes the anchor's sibling", ["Forest"], room,
         [move_item("a1", pl("before", "b"))],
         expect=[[("a", 0), ("a2", 1), ("a1", 0), ("a11", 1), ("b", 0)], base_t])
    case("move_item after an anchor with children, into another section", ["Forest"], room,
         [move_item("b", pl("after", "c"))],
         expect=[[("a", 0), ("a1", 1), ("a11", 2), ("a2", 1)], [("c", 0), ("c1", 1), ("b", 0)]])
    case("move_item of a root with its subtree down to a child's level", ["Forest"], room,
         [move_item("c", pl("after", "a2"))],
         expect=[[("a", 0), ("a1", 1), ("a11", 2), ("a2", 1), ("c", 1), ("c1", 2), ("b", 0)], []])
    case("move_item_to_section makes the item, with its subtree, the last root", ["Forest"], room,
         [move_item_to_section("a1", "t")],
         expect=[[("a", 0), ("a2", 1), ("b", 0)], [("c", 0), ("c1", 1), ("a1", 0), ("a11", 1)]])
    case("move_item_to_parent into another section", ["Forest"], room, [move_item_to_parent("a1", "c")],
         expect=[[("a", 0), ("a2", 1), ("b", 0)], [("c", 0), ("c1", 1), ("a1", 1), ("a11", 2)]])
    case("move_item_to_parent to a sibling: the last child of it", ["Forest"], room, [move_item_to_parent("b", "a2")],
         expect=[[("a", 0), ("a1", 1), ("a11", 2), ("a2", 1), ("b", 2)], base_t])
    case("move_item_to_parent to its own parent: it becomes the last child", ["Forest"], room,
         [move_item_to_parent("a1", "a")],
         expect=[[("a", 0), ("a2", 1), ("a1", 1), ("a11", 2), ("b", 0)], base_t])
    case("update_items keeps the hierarchy", ["Forest"], room, [update_items("reload", el("a1", "new"))],
         expect=[[("a", 0), ("a1", 1), ("a11", 2), ("a2", 1), ("b", 0)], base_t])
    case("move_section and delete_sections carry whole forests", ["Forest"], room,
         [move_section("t", pl("before", "s")), delete_sections("s")], expect=[base_t])
    case("moving every child out makes the room flat again (no levels part)", ["Forest"],
         [(el("s"), [at(0, el("a")), at(1, el("b"))])], [move_item("b", pl("after", "a"))],
         expect=[[("a", 0), ("b", 0)]])
    # The REJECTs of outlines, and their order (section 6).
    case("append_children to a missing parent", [], room, [append_children("nope", el("n"))],
         "parent_not_found", 0, "nope")
    case("move_item_to_parent of a missing item to a missing parent: the item first", ["MultiRule"], room,
         [move_item_to_parent("nope", "gone")], "item_not_found", 0, "nope")
    case("move_item_to_parent to a missing parent", [], room, [move_item_to_parent("b", "gone")],
         "parent_not_found", 0, "gone")
    case("move_item_to_parent under itself", [], room, [move_item_to_parent("a", "a")],
         "move_into_own_subtree", 0, "a")
    case("move_item_to_parent under its own descendant", [], room, [move_item_to_parent("a", "a11")],
         "move_into_own_subtree", 0, "a")
    case("move_item next to its own descendant", [], room, [move_item("a", pl("after", "a1"))],
         "move_into_own_subtree", 0, "a")
    case("move_item relative to itself: anchor_is_self before move_into_own_subtree", ["MultiRule"], room,
         [move_item("a", pl("before", "a"))], "anchor_is_self", 0, "a")
    case("append_children under an item at the deepest level", [], room, [append_children("a11", el("n"))],
         "outline_too_deep", 0, "n")
    case("append_children: a duplicate element before the depth", ["MultiRule"], room,
         [append_children("a11", el("b"))], "duplicate_item", 0, "b")
    # Every element shares the level, so the depth fails at the first element whose own checks
    # pass, before a later element repeats it (section 6, step 3).
    case("append_children repeating an element under an item at the deepest level: the depth, at the first",
         ["MultiRule"], room, [append_children("a11", el("n"), el("n"))], "outline_too_deep", 0, "n")
    case("move_item_to_parent whose subtree would go too deep", [], room, [move_item_to_parent("a1", "a2")],
         "outline_too_deep", 0, "a1")
    case("move_item whose subtree would go too deep", [], room, [move_item("c", pl("before", "a11"))],
         "outline_too_deep", 0, "c")
    case("move_item into its own subtree and too deep: move_into_own_subtree first", ["MultiRule"], room,
         [move_item("a", pl("before", "a11"))], "move_into_own_subtree", 0, "a")
    case("append_children on a room at max_items_per_room", [],
         [(el("s"), [at(0, el(str(k))) for k in range(9)] + [at(1, el("9"))])], [append_children("9", el("n"))],
         "too_many_items", 0, None)
    case("a later op fails: the whole batch is refused with the earlier ones", [], room,
         [append_children("b", el("n")), move_item_to_parent("b", "n")], "move_into_own_subtree", 1, "b")
    for t in tests:
        assert len(bytes.fromhex(t["hex"])) - 4 <= L["max_frame_bytes"], t["comment"]
    return {
        "algorithm": "SnapSync batch application",
        "protocolVersion": 2,
        "generatorVersion": GENERATOR_VERSION,
        "numberOfTests": len(tests),
        "header": [
            "As batches.json, on outlines (protocol version 2): each test applies the ops of the MUTATE frame",
            "`hex` to the snapshot `start` (JSON form, section 14, with `children`) as one batch under `limits`.",
            "result \"accepted\": the result is `end`, whose digest is `endDigest`. result \"rejected\": the",
            "batch is refused with `error`, `opIndex` and `identifier`, and the snapshot is unchanged.",
        ],
        "limits": L,
        "notes": {
            "Forest": "The meaning of an op on an outline (section 5): subtrees placed, moved and deleted whole.",
            "MultiRule": "The batch breaks two or more rules; `error` is the first in the order of section 6.",
        },
        "tests": tests,
    }


def batch_vectors():
    """Batches applied under small limits (sections 5, 6 and 12): which rule answers when one batch
    breaks several, the op index, the identifier (or none), and the result of those that apply.
    The expected answers are written from the document's rules, not computed."""
    L = SMALL_LIMITS
    imax, pmax = L["max_identifier_bytes"], L["max_payload_bytes"]
    room = [(el("s", "S"), [el("x"), el("y", "Y")]), (el("t"), [])]   # 2 sections (max), 2 items
    full = [(el("s"), [el("a"), el("b"), el("c"), el("d")])]             # 4 items (max)
    # Over a max_snapshot_bytes lowered since it was written (41 bytes > 40): only growth is refused.
    over = [(el("s", "p" * pmax), [el("a", "q" * pmax), el("b")])]
    assert len(enc_snapshot(over)) > L["max_snapshot_bytes"]
    tests = []

    def case(comment, flags, start, ops, error=None, op_index=None, identifier=None):
        batch_case(tests, comment, flags, start, ops, error, op_index, identifier)

    case("[append_sections d, append_items d {x, x}, append_sections d]: the earlier op's rule wins",
         ["MultiRule"], [], [append_sections(el("d")), append_items("d", el("x"), el("x")), append_sections(el("d"))],
         "duplicate_item", 1, "x")
    case("append_items with a duplicate, then an over-long identifier: the earlier element's rule wins",
         ["MultiRule"], room, [append_items("t", el("x"), el("l" * (imax + 1)))], "duplicate_item", 0, "x")
    case("an element that is a duplicate with an over-large payload: payload before uniqueness",
         ["MultiRule"], room, [append_items("t", el("x", "p" * (pmax + 1)))], "payload_too_large", 0, "x")
    case("an element that is over-long and a duplicate: identifier length first",
         ["MultiRule", "OverLimit"], [(el("s" * (imax + 1)), [])], [append_sections(el("s" * (imax + 1)))],
         "identifier_too_long", 0, "s" * (imax + 1))
    case("a duplicate on a room at max_items_per_room: uniqueness before the count",
         ["MultiRule"], full, [append_items("s", el("a"))], "duplicate_item", 0, "a")
    case("a new item on a room at max_items_per_room: too_many_items carries no identifier",
         [], full, [append_items("s", el("e"))], "too_many_items", 0, None)
    case("a new section on a room at max_sections_per_room: too_many_sections carries no identifier",
         [], room, [insert_sections(pl("before", "s"), el("n"))], "too_many_sections", 0, None)
    case("one op over max_items_per_room and max_snapshot_bytes: the element's count first",
         ["MultiRule"], full, [append_items("s", el("e", "p" * pmax))], "too_many_items", 0, None)
    case("insert_items before a missing anchor with a duplicate element: the anchor first",
         ["MultiRule"], room, [insert_items(pl("before", "nope"), el("x"))], "anchor_item_not_found", 0, "nope")
    case("append_items to a missing section with an over-long element: the target first",
         ["MultiRule"], room, [append_items("nope", el("l" * (imax + 1)))], "section_not_found", 0, "nope")
    case("move_item of a missing item to a missing anchor: the target first",
         ["MultiRule"], room, [move_item("nope", pl("after", "gone"))], "item_not_found", 0, "nope")
    case("move_item relative to itself: anchor_is_self",
         [], room, [move_item("x", pl("after", "x"))], "anchor_is_self", 0, "x")
    case("delete_items naming x twice: refused at the second copy",
         [], room, [delete_items("x", "x")], "item_not_found", 0, "x")
    case("update_items [missing, over-large]: each element's target and payload before the next element",
         ["MultiRule"], room, [update_items("reload", el("nope"), el("x", "p" * (pmax + 1)))], "item_not_found", 0, "nope")
    case("update_items [over-large, missing]: the first element's payload is refused first",
         ["MultiRule"], room, [update_items("reload", el("x", "p" * (pmax + 1)), el("nope"))], "payload_too_large", 0, "x")
    case("update_sections [over-large, missing]: the same for sections",
         ["MultiRule"], room, [update_sections(el("s", "p" * (pmax + 1)), el("nope"))], "payload_too_large", 0, "s")
    case("a room over a lowered max_snapshot_bytes: an op that shrinks it is accepted though still over",
         ["OverLimit"], over, [delete_items("b")])
    case("a room over a lowered max_snapshot_bytes: an op that grows it is refused, per op (a later op "
         "that would shrink it does not help)", ["OverLimit"], over, [update_items("reload", el("b", "z")), delete_items("a")],
         "snapshot_too_large", 0, None)
    over2 = [(el("s", "p" * pmax), [el("a", "q" * pmax), el("b", "rrr")])]
    case("a room over a lowered max_snapshot_bytes: shrinking, then growing but still smaller than "
         "before the batch, is refused at the op that grows", ["OverLimit"], over2,
         [update_items("reload", el("a", "q" * (pmax - 3))), update_items("reload", el("b", "rrrrr")), update_sections(el("s"))],
         "snapshot_too_large", 1, None)
    case("a batch that fills every limit exactly", [], [],
         [append_sections(el("s"), el("t")), append_items("s", el("a"), el("b"), el("c")), append_items(None, el("d"))])
    for t in tests:
        assert len(bytes.fromhex(t["hex"])) - 4 <= L["max_frame_bytes"], t["comment"]
    return {
        "algorithm": "SnapSync batch application",
        "protocolVersion": 1,
        "generatorVersion": GENERATOR_VERSION,
        "numberOfTests": len(tests),
        "header": [
            "Each test applies the ops of the MUTATE frame `hex` to the snapshot `start` (JSON form, section 14;",
            "it may break `limits`, as a room written under higher limits would), as one batch under `limits`",
            "(sections 5, 6 and 12). result \"accepted\": the result is `end`, whose digest is `endDigest`.",
            "result \"rejected\": the batch is refused with `error` (a section 6 name), `opIndex` and",
            "`identifier` (JSON form, null when the REJECT carries none), and the snapshot is unchanged.",
        ],
        "limits": L,
        "notes": {
            "MultiRule": "The batch breaks two or more rules; `error` is the first in the order of section 6.",
            "OverLimit": "`start` breaks a limit, as a room written under higher limits would; for "
                         "max_snapshot_bytes, only an op that grows the encoding is refused.",
        },
        "tests": tests,
    }


def replay_set():
    start = [(el("inbox", "Inbox"), [el("m1", "first"), el("m2", "second"), el("m3")]),
             (el("archive", "Archive"), [el("old", "old news")])]
    batches = [
        [append_items("inbox", el("m4", "fourth"))],
        [insert_items(pl("before", "m1"), el("m0", "zeroth")), delete_items("m3")],
        [update_items("reconfigure", el("m2", "second, edited")), update_sections(el("inbox", "Inbox (4)"))],
        [append_sections(el("later")), move_item_to_section("m4", "later")],
        [move_item("old", pl("after", "m0")), move_section("later", pl("before", "inbox"))],
        [insert_sections(pl("after", "inbox"), el(b"\x00bin", b"\xff\xfe")),
         append_items(None, el(b"\x01", b"\x00\x01"))],
        [delete_sections("archive"), update_items("reload", el("m1", "first!"))],
        [move_item("m2", pl("before", "m0")), insert_items(pl("after", "m4"), el("m5"))],
    ]
    model = Model(start)
    frames = []
    epoch = EPOCH
    for k, ops in enumerate(batches):
        for op in ops:
            model.apply(op)
        body, js = diff("lobby", epoch, k + 1, ops)
        frames.append({"version": k + 1, "hex": frame(body).hex(), "message": js})
    end = model.snap()
    # The same start, then delete_all_items: the empty snapshot's digest is worth pinning too.
    return {
        "algorithm": "SnapSync DIFF replay",
        "protocolVersion": 1,
        "generatorVersion": GENERATOR_VERSION,
        "header": [
            "Apply each DIFF's ops, in order, to `start`; the result MUST equal `end` and its canonical",
            "encoding (section 4) MUST be `end.hex`, whose SHA-256 is `end.digest`. Versions run 1..n in one",
            "epoch, so a replica resuming from `start` at version 0 ends at version n.",
        ],
        "room": "lobby",
        "epoch": epoch,
        "start": {"version": 0, "hex": enc_snapshot(start).hex(), "digest": digest(start).hex(),
                  "snapshot": snapshot_json(start)},
        "diffs": frames,
        "end": {"version": len(batches), "hex": enc_snapshot(end).hex(), "digest": digest(end).hex(),
                "snapshot": snapshot_json(end)},
        "empty": {"hex": enc_snapshot([]).hex(), "digest": digest([]).hex()},
    }


# ---------------------------------------------------------------------------------------------
# Annotated hex for PROTOCOL.md. A second walk over each layout, from the JSON form, that labels
# every field; `annotated` asserts that its bytes equal the encoder's, so the document's examples
# cannot drift from the vectors (each example is also a test in messages.json).

LAYOUTS = {
    "HELLO": (0x01, [("magic", "magic"), ("versions", "versions"), ("client_name", "string"), ("credentials", "bytes")]),
    "WELCOME": (0x02, [("version", "varint"), ("session_id", "varint"), ("server_name", "string"), ("limits", "limits")]),
    "ERROR": (0x03, [("code", "code"), ("message", "string")]),
    "PING": (0x04, [("nonce", "varint")]),
    "PONG": (0x05, [("nonce", "varint")]),
    "JOIN": (0x10, [("request_id", "varint"), ("room", "string"), ("resume", "position")]),
    "LEAVE": (0x11, [("request_id", "varint"), ("room", "string")]),
    "MUTATE": (0x12, [("request_id", "varint"), ("room", "string"), ("expected_version", "opt_varint"),
                      ("write_id", "bytes"), ("ops", "ops")]),
    "REPLACE": (0x13, [("request_id", "varint"), ("room", "string"), ("expected_version", "opt_varint"),
                       ("write_id", "bytes"), ("snapshot", "snapshot")]),
    "STATS": (0x14, [("request_id", "varint")]),
    "AUTH": (0x15, [("request_id", "varint"), ("credentials", "bytes")]),
    "SNAPSHOT": (0x20, [("request_id", "varint"), ("room", "string"), ("epoch", "varint"), ("version", "varint"),
                        ("reason", "reason"), ("digest", "digest"), ("chain", "chain"), ("snapshot", "snapshot")]),
    "CATCHUP": (0x21, [("request_id", "varint"), ("room", "string"), ("epoch", "varint"),
                       ("from_version", "varint"), ("to_version", "varint"), ("folded", "folded")]),
    "DIFF": (0x22, [("room", "string"), ("epoch", "varint"), ("version", "varint"), ("ops", "ops"), ("chain", "chain")]),
    "ACK": (0x23, [("request_id", "varint"), ("epoch", "varint"), ("version", "varint")]),
    "REJECT": (0x24, [("request_id", "varint"), ("code", "code"), ("op_index", "opt_varint"),
                      ("identifier", "opt_bytes"), ("message", "string")]),
    "STATS_REPLY": (0x25, [("request_id", "varint"), ("stats", "stats")]),
    "LEFT": (0x26, [("room", "string"), ("code", "code"), ("message", "string")]),
    "DROP": (0x16, [("request_id", "varint"), ("room", "string")]),
    "SET_TTL": (0x17, [("request_id", "varint"), ("room", "string"), ("seconds", "varint")]),
    "REPLACE_SECTION": (0x18, [("request_id", "varint"), ("room", "string"), ("expected_version", "opt_varint"),
                               ("write_id", "bytes"), ("section", "bytes"), ("items", "section_items")]),
    "VERIFY": (0x19, [("request_id", "varint"), ("room", "string")]),
    "DIGEST": (0x27, [("request_id", "varint"), ("room", "string"), ("epoch", "varint"), ("version", "varint"),
                      ("digest", "digest"), ("chain", "chain")]),
    "PRESENCE_WATCH": (0x1A, [("request_id", "varint"), ("room", "string"), ("watch", "watch")]),
    "PRESENCE_LIST": (0x1B, [("request_id", "varint"), ("room", "string"), ("after", "varint"), ("limit", "varint")]),
    "SET_PRESENCE": (0x1C, [("request_id", "varint"), ("room", "string"), ("state", "bytes")]),
    "PRESENCE": (0x28, [("request_id", "varint"), ("room", "string"), ("count", "varint"), ("members", "members"),
                        ("next", "varint")]),
    "PRESENCE_DIFF": (0x29, [("room", "string"), ("count", "varint"), ("changes", "changes")]),
    "WINDOW": (0x1D, [("request_id", "varint"), ("room", "string"), ("window", "window")]),
    "WINDOW_STATE": (0x2A, [("request_id", "varint"), ("room", "string"), ("epoch", "varint"), ("version", "varint"),
                            ("chain", "chain"), ("window", "window"), ("counts", "counts"), ("snapshot", "snapshot")]),
    "WINDOW_DIFF": (0x2B, [("request_id", "varint"), ("room", "string"), ("epoch", "varint"), ("version", "varint"),
                           ("window", "opt_window"), ("counts", "section_counts"), ("ops", "ops")]),
}
LIMIT_NAMES = {v: k for k, v in LIMIT_KEYS.items()}
ERROR_NAMES = {1: "malformed_frame", 2: "frame_too_large", 3: "unknown_message_type", 4: "handshake_required",
               5: "unsupported_version", 6: "bad_magic", 7: "too_many_connections", 8: "slow_consumer",
               9: "timeout", 10: "shutting_down", 11: "unauthorized", 12: "input_budget_exceeded", 13: "token_expired", 20: "duplicate_section",
               21: "duplicate_item", 22: "section_not_found", 23: "item_not_found",
               24: "anchor_section_not_found", 25: "anchor_item_not_found", 26: "no_sections",
               27: "anchor_is_self", 28: "identifier_too_long", 29: "payload_too_large", 30: "too_many_items",
               31: "too_many_sections", 32: "snapshot_too_large", 40: "version_mismatch", 41: "too_many_rooms",
               42: "too_many_rooms_for_connection", 43: "not_joined", 44: "invalid_room_name",
               45: "storage_failure", 46: "write_id_conflict", 47: "server_full", 48: "forbidden",
               49: "room_deleted", 50: "room_expired", 51: "parent_not_found", 52: "move_into_own_subtree",
               53: "outline_too_deep", 54: "outline_unsupported", 55: "busy",
               56: "quota_exceeded", 57: "window_too_large"}


def unjb(v):
    return bytes.fromhex(v["hex"]) if isinstance(v, dict) else v.encode("utf-8")


def show(b):
    return json.dumps(jb(b), ensure_ascii=False)


class Annotator:
    def __init__(self):
        self.rows = []

    def add(self, data, label, depth=0):
        self.rows.append((bytes(data), "  " * depth + label))

    def varint(self, label, n, depth=0, note=""):
        self.add(varint(n), "%s: %d%s" % (label, n, note), depth)

    def bytes_(self, label, b, depth=0):
        shown = show(b)
        if len(shown) > 60:     # a token: its length and its start, the bytes are all in the hex
            shown = "%d bytes, %s...\"" % (len(b), shown[:32])
        self.add(varint(len(b)) + b, "%s: %s" % (label, shown) if b else "%s: empty" % label, depth)

    def element(self, label, e, depth):
        self.bytes_(label + " id", unjb(e["id"]), depth)
        self.bytes_(label + " payload", unjb(e["payload"]), depth)

    def elements(self, es, depth, what="element"):
        self.varint("%ss" % what, len(es), depth, " (count)")
        for k, e in enumerate(es):
            self.element("%s %d" % (what, k), e, depth + 1)

    def placement(self, p, depth):
        self.add(u8(SIDES[p["side"]]), "placement side: %s" % p["side"], depth)
        self.bytes_("placement anchor", unjb(p["anchor"]), depth)

    def op(self, k, op, depth):
        name = op["op"]
        self.add(u8(OPCODES[name]), "op %d: %s" % (k, name), depth)
        d = depth + 1
        if name in ("append_sections", "update_sections"):
            self.elements(op["elements"], d)
        elif name in ("insert_sections", "insert_items"):
            self.placement(op["placement"], d)
            self.elements(op["elements"], d)
        elif name in ("delete_sections", "delete_items"):
            self.varint("ids", len(op["ids"]), d, " (count)")
            for i in op["ids"]:
                self.bytes_("id", unjb(i), d + 1)
        elif name in ("move_section", "move_item"):
            self.bytes_("id", unjb(op["id"]), d)
            self.placement(op["placement"], d)
        elif name == "append_items":
            if op["section"] is None:
                self.add(b"\x00", "section: absent (the last section)", d)
            else:
                self.add(b"\x01", "section: present", d)
                self.bytes_("section", unjb(op["section"]), d)
            self.elements(op["elements"], d)
        elif name == "move_item_to_section":
            self.bytes_("id", unjb(op["id"]), d)
            self.bytes_("section", unjb(op["section"]), d)
        elif name == "update_items":
            self.add(u8(KINDS[op["kind"]]), "kind: %s" % op["kind"], d)
            self.elements(op["elements"], d)
        elif name == "append_children":
            self.bytes_("parent", unjb(op["parent"]), d)
            self.elements(op["elements"], d)
        elif name == "move_item_to_parent":
            self.bytes_("id", unjb(op["id"]), d)
            self.bytes_("parent", unjb(op["parent"]), d)

    def levels(self, flat, depth):
        """The `levels` part, when some item is below the roots: one row per item."""
        if any(level for _, level in flat):
            for k, (item, level) in enumerate(flat):
                self.add(varint(level), "%s item %d (%s): level %d" % ("levels:" if k == 0 else "       ", k,
                                                                      show(unjb(item["id"])), level), depth)

    def snapshot(self, snap, depth):
        self.varint("snapshot: sections", len(snap), depth, " (count)")
        flat = []
        for k, s in enumerate(snap):
            self.element("section %d" % k, s, depth + 1)
            items = flatten_json(s["items"])
            self.elements([i for i, _ in items], depth + 2, "item")
            flat += items
        self.levels(flat, depth)

    def section_items(self, items, depth):
        flat = flatten_json(items)
        self.elements([i for i, _ in flat], depth, "item")
        self.levels(flat, depth)

    def field(self, name, kind, v):
        if kind == "magic":
            self.add(MAGIC, 'magic: "SNAP"')
        elif kind == "varint":
            self.varint(name, v)
        elif kind == "code":
            self.varint(name, v, note=" (%s)" % ERROR_NAMES.get(v, "unknown"))
        elif kind == "versions":
            self.varint("versions", len(v), note=" (count)")
            for n in v:
                self.varint("version", n, 1)
        elif kind == "string":
            b = v.encode("utf-8")
            self.add(varint(len(b)) + b, "%s: %s" % (name, json.dumps(v, ensure_ascii=False)))
        elif kind == "bytes":
            self.bytes_(name, unjb(v))
        elif kind == "limits":
            self.varint("limits", len(v), note=" (count)")
            for lim in v:
                self.varint("key", lim["key"], 1, " (%s)" % LIMIT_NAMES.get(lim["key"], "unknown"))
                self.varint("value", lim["value"], 1)
        elif kind == "stats":
            self.varint("stats", len(v), note=" (count)")
            for st in v:
                b = st["name"].encode("utf-8")
                self.add(varint(len(b)) + b, "name: %s" % json.dumps(st["name"]), 1)
                self.varint("value", st["value"], 1)
        elif kind == "position":
            if v is None:
                self.add(b"\x00", "resume: absent")
            else:
                self.add(b"\x01", "resume: present")
                self.varint("epoch", v["epoch"], 1)
                self.varint("version", v["version"], 1)
                if "chain" in v:
                    self.add(unjb(v["chain"]), "  chain (section 9)")
        elif kind == "opt_varint":
            if v is None:
                self.add(b"\x00", "%s: absent" % name)
            else:
                self.add(b"\x01" + varint(v), "%s: present, %d" % (name, v))
        elif kind == "opt_bytes":
            if v is None:
                self.add(b"\x00", "%s: absent" % name)
            else:
                self.add(b"\x01", "%s: present" % name)
                self.bytes_(name, unjb(v))
        elif kind == "reason":
            self.add(u8(REASONS[v]), "reason: %s" % v)
        elif kind == "digest":
            self.add(unjb(v), "digest (SHA-256 of the snapshot field)")
        elif kind == "chain":
            self.add(unjb(v), "chain (section 9)")
        elif kind == "folded":
            if v is None:
                self.add(b"\x00", "folded: absent (replay form)")
            else:
                self.add(b"\x01", "folded: present")
                self.add(unjb(v), "digest at to_version (as SNAPSHOT's)", 1)
        elif kind == "ops":
            self.varint("ops", len(v), note=" (count)")
            for k, op in enumerate(v):
                self.op(k, op, 1)
        elif kind == "snapshot":
            self.snapshot(v, 0)
        elif kind == "section_items":
            self.section_items(v, 0)
        elif kind == "watch":
            self.add(u8(v), "watch: %d (%s)" % (v, {0: "stop", 1: "start"}.get(v, "?")))
        elif kind == "members":
            self.varint("members", len(v), note=" (count)")
            for k, m in enumerate(v):
                self.member("member %d" % k, m, 1)
        elif kind == "changes":
            self.varint("changes", len(v), note=" (count)")
            for k, c in enumerate(v):
                self.change(k, c, 1)
        elif kind == "window":
            self.section_windows(v, 0)
        elif kind == "opt_window":
            if v is None:
                self.add(b"\x00", "window: absent (unchanged)")
            else:
                self.add(b"\x01", "window: present")
                self.section_windows(v, 1)
        elif kind == "counts":
            self.varint("counts", len(v), note=" (count)")
            for k, n in enumerate(v):
                self.varint("section %d" % k, n, 1)
        elif kind == "section_counts":
            self.varint("counts", len(v), note=" (count)")
            for c in v:
                self.bytes_("section", unjb(c["section"]), 1)
                self.varint("items", c["items"], 1)
        else:
            raise AssertionError(kind)

    def section_windows(self, ws, depth):
        self.varint("window", len(ws), depth, " (count)")
        for k, w in enumerate(ws):
            self.bytes_("section window %d section" % k, unjb(w["section"]), depth + 1)
            kind = window_kind(w)
            self.add(u8(WINDOW_KINDS[kind]), "kind: %s" % kind, depth + 2)
            if kind == "around":
                self.bytes_("anchor", unjb(w["around"]), depth + 2)
                self.varint("before", w["before"], depth + 2)
                self.varint("after", w["after"], depth + 2)
            else:
                self.varint("count", w[kind], depth + 2)

    def member(self, label, m, depth):
        self.varint(label + " member_id", m["member_id"], depth)
        b = m["principal"].encode("utf-8")
        self.add(varint(len(b)) + b, "%s principal: %s" % (label, json.dumps(m["principal"], ensure_ascii=False)),
                 depth)
        self.varint(label + " joined_at", m["joined_at"], depth)
        self.bytes_(label + " state", unjb(m["state"]), depth)

    def change(self, k, c, depth):
        self.add(u8(PRESENCE_KINDS[c["kind"]]), "change %d: %s" % (k, c["kind"]), depth)
        if c["kind"] in ("joined", "shown"):
            self.member("member", c["member"], depth + 1)
            return
        self.varint("member_id", c["member_id"], depth + 1)
        if c["kind"] == "left":
            self.add(u8(c["reason"]), "reason: %d (%s)" % (c["reason"], LEFT_REASONS.get(c["reason"], "unknown")),
                     depth + 1)
        elif c["kind"] == "state":
            self.bytes_("state", unjb(c["state"]), depth + 1)


def flatten_json(items, level=0):
    """Nested JSON items -> [(item, level)] in depth-first order (section 4's order)."""
    out = []
    for item in items:
        out.append((item, level))
        out += flatten_json(item.get("children", []), level + 1)
    return out


def annotated(built, direction=None):
    """Annotated hex of a frame (or, with direction "field", of a bare snapshot field); asserts it
    equals the encoder's bytes."""
    body, js = built
    a = Annotator()
    if direction == "field":
        a.snapshot(js, 0)
        assert b"".join(r[0] for r in a.rows) == body, "snapshot field"
        rows, direction = a.rows, None
    else:
        code, fields = LAYOUTS[js["type"]]
        a.add(u8(code), "type: %s" % js["type"])
        for name, kind in fields:
            if kind in ("chain", "folded") and name not in js:
                continue    # versions 1 and 2: no chain field, no folded field
            a.field(name, kind, js[name])
        assert b"".join(r[0] for r in a.rows) == body, js["type"]
        rows = [(len(body).to_bytes(4, "big"), "length: %d" % len(body))] + a.rows
    lines = []
    if direction:
        lines.append(direction)
    for data, label in rows:
        hexes = [" ".join("%02x" % c for c in data[k:k + 12]) for k in range(0, len(data), 12)]
        for k, h in enumerate(hexes):
            lines.append("%-36s %s" % (h, label if k == 0 else ""))
    return "\n".join(line.rstrip() for line in lines)


def chain_vectors():
    """Version 3 frames (section 8.2): SNAPSHOT and DIFF with their `chain`, VERIFY and DIGEST, and
    how they break; `Version2` tests are decoded as version 2."""
    s = Suite()
    chain = bytes(range(0x40, 0x60))        # 32 bytes that read as text: the JSON form's string
    binary = bytes(range(0xE0, 0x100))      # 32 bytes that do not: its {"hex": ...} form
    for name in CHAIN_EXAMPLES:
        s.valid("PROTOCOL.md example " + name, ["Example"], doc_examples()[name][0])
    s.valid("WELCOME version 3 (the limits of version 2)", [],
            welcome(3, 1, "snapsyncd/1.0", [(1, 1 << 24), (9, OUTLINE_DEPTH_DEFAULT)]))
    s.valid("DIFF with a chain of binary bytes", [], diff("r", EPOCH, 2, [delete_items("a")], chain=binary))
    s.valid("DIFF with the zero chain (unknown to the server, section 9)", ["EdgeCase"],
            diff("r", EPOCH, 3, [delete_items("a")], chain=bytes(32)))
    s.valid("SNAPSHOT of an empty room at version 0 with its chain", ["EdgeCase"],
            snapshot(1, "r", EPOCH, 0, "initial", [], chain=chain_start(EPOCH)))
    s.valid("SNAPSHOT of an outline with its chain (chain before the snapshot field)", [],
            snapshot(2, "groceries", WALK_EPOCH, 7, "resync", GROCERIES, chain=chain))
    s.valid("JOIN without resume: no chain either", ["EdgeCase"], join(1, "r"))
    s.valid("JOIN resuming with the zero chain (the client does not know it)", ["EdgeCase"],
            join(2, "r", (EPOCH, 7), chain=bytes(32)))
    s.valid("VERIFY of an empty room name", ["EdgeCase"], verify(0, ""))
    s.valid("REJECT busy answering a VERIFY", [],
            reject(4, 55, None, None, "room r (2000000 bytes) had its digest computed 0.2 seconds ago; retry later"))
    s.valid("REJECT quota_exceeded answering the first write of a room", [],
            reject(5, 56, None, None, "room r cannot be created: this server holds 1000000 rooms (--max-stored-rooms)"))
    s.valid("DIGEST of an empty room at version 0", ["EdgeCase"],
            digest_reply(3, "r", EPOCH, 0, digest([]), chain_start(EPOCH)))
    s.valid("DIGEST with binary digest and chain", [], digest_reply((1 << 64) - 1, "r", (1 << 64) - 1, (1 << 64) - 1, binary, binary))

    # CATCHUP's `folded` field (section 11.12): the replay form (absent) and the folded form.
    s.valid("CATCHUP of zero versions, replay form (the client is current)", ["EdgeCase"],
            catchup(2, "r", EPOCH, 20, 20, v3=True))
    s.valid("CATCHUP folded, whose digest reads as text (a JSON string)", [],
            catchup(3, "r", EPOCH, 17, 20, v3=True, folded=chain))
    s.valid("CATCHUP folded with binary digest and maximal varints", ["EdgeCase"],
            catchup((1 << 64) - 1, "r", (1 << 64) - 1, (1 << 64) - 3, (1 << 64) - 1, v3=True, folded=binary))
    catchup_replay_v3 = catchup(2, "r", EPOCH, 17, 20, v3=True)[0]
    catchup_folded_v3 = catchup(3, "r", EPOCH, 17, 20, v3=True, folded=binary)[0]
    s.invalid_body("CATCHUP without its folded flag", ["FieldOverrun"], catchup(2, "r", EPOCH, 17, 20)[0],
                   "malformed_frame")
    s.invalid_body("CATCHUP with folded flag 0x02", ["BadFlag"], catchup_replay_v3[:-1] + b"\x02", "malformed_frame")
    for cut in (1, 31, 32):
        s.invalid_body("CATCHUP folded whose digest lacks its last %d bytes" % cut, ["FieldOverrun"],
                       catchup_folded_v3[:-cut], "malformed_frame")
    s.invalid_body("CATCHUP replay form with a byte after its flag", ["TrailingBytes"], catchup_replay_v3 + b"\x00",
                   "malformed_frame")
    s.invalid_body("CATCHUP folded with a byte after its digest", ["TrailingBytes"], catchup_folded_v3 + b"\x00",
                   "malformed_frame")
    s.invalid_body("A version 3 CATCHUP (replay form) read as version 2: its flag is a trailing byte",
                   ["Version2", "TrailingBytes"], catchup_replay_v3, "malformed_frame")
    s.invalid_body("A version 3 CATCHUP (folded form) read as version 2: 33 trailing bytes",
                   ["Version2", "TrailingBytes"], catchup_folded_v3, "malformed_frame")

    diff_v3 = diff("r", EPOCH, 2, [delete_items("a")], chain=chain)[0]
    snap_v3 = snapshot(1, "r", EPOCH, 1, "initial", [], chain=chain)[0]
    digest_v3 = digest_reply(3, "r", EPOCH, 0, digest([]), chain)[0]
    join_v3 = join(2, "r", (EPOCH, 7), chain=binary)[0]
    s.invalid_body("JOIN whose resume chain lacks its last byte", ["FieldOverrun"], join_v3[:-1], "malformed_frame")
    s.invalid_body("JOIN resuming without its chain", ["FieldOverrun"], join(2, "r", (EPOCH, 7))[0], "malformed_frame")
    s.invalid_body("A version 3 JOIN read as version 2: its chain is 32 trailing bytes", ["Version2", "TrailingBytes"],
                   join_v3, "malformed_frame")
    for cut in (1, 31, 32):
        s.invalid_body("DIFF whose chain lacks its last %d bytes" % cut, ["FieldOverrun"], diff_v3[:-cut], "malformed_frame")
        s.invalid_body("DIGEST whose chain lacks its last %d bytes" % cut, ["FieldOverrun"], digest_v3[:-cut],
                       "malformed_frame")
    s.invalid_body("SNAPSHOT whose chain and snapshot are cut after 20 bytes of chain", ["FieldOverrun"],
                   snap_v3[:-(32 - 20) - 1], "malformed_frame")
    s.invalid_body("DIFF with a byte after its chain", ["TrailingBytes"], diff_v3 + b"\x00", "malformed_frame")
    s.invalid_body("DIGEST with a byte after its chain", ["TrailingBytes"], digest_v3 + b"\x00", "malformed_frame")
    s.invalid_body("VERIFY with a byte after its room", ["TrailingBytes"], verify(1, "r")[0] + b"\x00",
                   "malformed_frame")
    s.invalid_body("VERIFY whose room runs past the body", ["FieldOverrun"], u8(0x19) + varint(1) + varint(5) + b"r",
                   "malformed_frame")
    # What a version 2 connection makes of version 3 frames.
    s.invalid_body("VERIFY on a version 2 connection", ["Version2", "UnknownType"], verify(1, "r")[0],
                   "unknown_message_type")
    s.invalid_body("DIGEST on a version 2 connection", ["Version2", "UnknownType"], digest_v3, "unknown_message_type")
    s.invalid_body("A version 3 DIFF read as version 2: its chain is 32 trailing bytes", ["Version2", "TrailingBytes"],
                   diff_v3, "malformed_frame")
    return s.tests


PRESENCE_LIMITS = dict(DEFAULT_LIMITS, max_outline_depth=OUTLINE_DEPTH_DEFAULT,
                       max_presence_bytes=PRESENCE_BYTES_DEFAULT, presence_view=PRESENCE_VIEW_DEFAULT)


def cut_and_padded(s, frames):
    """Each (name, body) of `frames` one byte short in a stream, with a byte after its last field,
    and missing its last byte under a length that says so: all malformed."""
    for name, body in frames:
        s.invalid("%s cut one byte short (stream: need more bytes)" % name, ["Truncated"], frame(body)[:-1],
                  "malformed_frame")
        s.invalid_body("%s with a byte after its last field" % name, ["TrailingBytes"], body + b"\x00",
                       "malformed_frame")
        s.invalid_body("%s missing its last byte (the length says so)" % name, ["FieldOverrun"], body[:-1],
                       "malformed_frame")


def presence_vectors():
    """Version 4 frames (section 8.2): the presence messages and how they break; `Version3` tests
    are decoded as version 3."""
    s = Suite()
    top = (1 << 64) - 1
    binary = bytes([0x00, 0x01, 0xFF, 0xFE])
    alice = member(1, "alice", 1767225600000, '{"status":"away"}')
    bob = member(2, "bob", 1767225600001)
    odd = member(top, "채팅-é", top, binary)
    for name in PRESENCE_EXAMPLES:
        s.valid("PROTOCOL.md example " + name, ["Example"], doc_examples()[name][0])

    # --- valid frames ------------------------------------------------------------------------
    s.valid("PRESENCE_WATCH stop (watch 0)", [], presence_watch(3, "todo", 0))
    s.valid("PRESENCE_WATCH with maximal request_id", ["EdgeCase"], presence_watch(top, "r", 1))
    s.valid("PRESENCE_LIST of the first page, the server's page size (after 0, limit 0)", ["EdgeCase"],
            presence_list(1, "r", 0, 0))
    s.valid("PRESENCE_LIST with maximal after and limit (10-byte varints)", ["EdgeCase"],
            presence_list(2, "r", top, top))
    s.valid("PRESENCE_LIST after 127, limit 128 (the 1- and 2-byte varint boundary)", ["EdgeCase"],
            presence_list(3, "r", 127, 128))
    s.valid("SET_PRESENCE with an empty state (clears it)", ["EdgeCase"], set_presence(4, "r", b""))
    s.valid("SET_PRESENCE with a binary state (JSON form: hex)", [], set_presence(5, "r", binary))
    s.valid("SET_PRESENCE with a state of max_presence_bytes", ["EdgeCase"],
            set_presence(6, "r", b"x" * PRESENCE_BYTES_DEFAULT))
    s.valid("SET_PRESENCE with a state of max_presence_bytes + 1 (the server answers payload_too_large)",
            ["PresenceLimit"], set_presence(7, "r", b"x" * (PRESENCE_BYTES_DEFAULT + 1)))
    s.valid("PRESENCE of an empty room (count 0, no members, next 0)", ["EdgeCase"], presence(1, "r", 0, [], 0))
    s.valid("PRESENCE page after the last member (count 3, no members)", ["EdgeCase"], presence(2, "r", 3, [], 0))
    s.valid("PRESENCE with more to list (next = the last id listed)", [],
            presence(3, "r", 3, [alice, bob], 2))
    s.valid("PRESENCE with an empty principal and an empty state", ["EdgeCase"],
            presence(4, "r", 1, [member(5, "", 0)], 0))
    s.valid("PRESENCE with maximal member_id and joined_at, a non-ASCII principal and a binary state",
            ["EdgeCase"], presence(5, "r", top, [alice, odd], 0))
    s.valid("PRESENCE listing more members than presence_view (a decoder does not check it)", ["PresenceLimit"],
            presence(6, "r", PRESENCE_VIEW_DEFAULT + 1,
                     [member(k, "m", 0) for k in range(1, PRESENCE_VIEW_DEFAULT + 2)], 0))
    s.valid("PRESENCE_DIFF with no changes (the count alone changed)", ["EdgeCase"], presence_diff("r", 0, []))
    s.valid("PRESENCE_DIFF joined", [], presence_diff("r", 1, [joined(alice)]))
    for reason, name in LEFT_REASONS.items():
        s.valid("PRESENCE_DIFF left, reason %d (%s)" % (reason, name), [], presence_diff("r", 0, [departed(1, reason)]))
    s.valid("PRESENCE_DIFF left with an unknown reason 5 (not an error: read as disconnected)", ["EdgeCase"],
            presence_diff("r", 0, [departed(1, 5)]))
    s.valid("PRESENCE_DIFF left with reason 255", ["EdgeCase"], presence_diff("r", 0, [departed(1, 255)]))
    s.valid("PRESENCE_DIFF state", [], presence_diff("r", 1, [state_set(1, '{"status":"here"}')]))
    s.valid("PRESENCE_DIFF state cleared (empty)", ["EdgeCase"], presence_diff("r", 1, [state_set(1, b"")]))
    s.valid("PRESENCE_DIFF state, binary", [], presence_diff("r", 1, [state_set(top, binary)]))
    s.valid("PRESENCE_DIFF shown", [], presence_diff("r", 101, [shown(bob)]))
    s.valid("PRESENCE_DIFF hidden", [], presence_diff("r", 101, [hidden(top)]))
    s.valid("PRESENCE_DIFF with every kind, ids in no order", [],
            presence_diff("r", 1 << 40, [hidden(100), joined(bob), state_set(3, "s"), departed(1, 0), shown(odd)]))
    s.valid("ACK answering SET_PRESENCE or PRESENCE_WATCH 0 (epoch 0, version 0)", ["EdgeCase"], ack(17, 0, 0))
    s.valid("REJECT payload_too_large answering SET_PRESENCE", [],
            reject(7, 29, None, None, "presence state of 1025 bytes is over max_presence_bytes 1024"))
    s.valid("REJECT not_joined answering PRESENCE_WATCH", [], reject(8, 43, None, None, "not a member of room r"))
    s.valid("WELCOME version 4 announcing only the presence limits", ["EdgeCase"],
            welcome(4, 1, "s", [(10, 0), (11, 1)]))

    # --- the presence rules ------------------------------------------------------------------
    watch_1 = presence_watch(1, "r", 1)[0]
    for value in (2, 255):
        s.invalid_body("PRESENCE_WATCH with watch %d" % value, ["PresenceRule"], watch_1[:-1] + u8(value),
                       "malformed_frame")
    zero = member(0, "z", 0)
    s.invalid_body("PRESENCE with a member_id 0", ["PresenceRule"], presence(1, "r", 1, [zero], 0)[0],
                   "malformed_frame")
    s.invalid_body("PRESENCE with a member_id 0 after another", ["PresenceRule"],
                   presence(1, "r", 2, [alice, zero], 0)[0], "malformed_frame")
    s.invalid_body("PRESENCE with members descending", ["PresenceRule"], presence(1, "r", 2, [bob, alice], 0)[0],
                   "malformed_frame")
    s.invalid_body("PRESENCE with a member listed twice", ["PresenceRule"],
                   presence(1, "r", 2, [alice, alice], 0)[0], "malformed_frame")
    s.invalid_body("PRESENCE with a member listed twice, different entries", ["PresenceRule"],
                   presence(1, "r", 3, [alice, bob, member(2, "eve", 5)], 0)[0], "malformed_frame")
    for change in (joined(zero), departed(0, 0), state_set(0, "s"), shown(zero), hidden(0)):
        s.invalid_body("PRESENCE_DIFF %s of member_id 0" % change["kind"], ["PresenceRule"],
                       presence_diff("r", 1, [change])[0], "malformed_frame")
    for first, second in ((joined(alice), state_set(1, "s")), (departed(2, 1), joined(bob)),
                          (hidden(1), shown(alice)), (state_set(2, "a"), state_set(2, "b")),
                          (departed(1, 0), departed(1, 0))):
        s.invalid_body("PRESENCE_DIFF naming member %d twice (%s, then %s)" % (
            (first.get("member") or first)["member_id"], first["kind"], second["kind"]), ["PresenceRule"],
            presence_diff("r", 1, [first, hidden(7), second])[0], "malformed_frame")
    for kind in (5, 0x80, 0xFF):
        s.invalid_body("PRESENCE_DIFF with unknown change kind %d" % kind, ["PresenceRule", "BadEnum"],
                       u8(0x29) + text("r") + varint(1) + varint(1) + u8(kind) + varint(1), "malformed_frame")
    s.invalid_body("PRESENCE_DIFF with unknown kind 5 after a valid change", ["PresenceRule", "BadEnum"],
                   u8(0x29) + text("r") + varint(1) + varint(2) + enc_change(hidden(2)) + u8(5) + varint(3),
                   "malformed_frame")

    # --- truncated, overrunning, trailing ----------------------------------------------------
    diff_all = presence_diff("r", 3, [joined(alice), departed(9, 1), state_set(2, "s"), shown(bob), hidden(4)])[0]
    page = presence(3, "r", 3, [alice, bob], 2)[0]
    frames = [("PRESENCE_WATCH", watch_1), ("PRESENCE_LIST", presence_list(1, "r", 5, 10)[0]),
              ("SET_PRESENCE", set_presence(1, "r", "state")[0]), ("PRESENCE", page), ("PRESENCE_DIFF", diff_all)]
    cut_and_padded(s, frames)
    s.invalid("PRESENCE cut after its length prefix", ["Truncated"], frame(page)[:4], "malformed_frame")
    s.invalid("PRESENCE_DIFF cut in the middle of a member", ["Truncated"], frame(diff_all)[:12], "malformed_frame")
    s.invalid_body("PRESENCE_WATCH without its watch byte", ["FieldOverrun"], u8(0x1A) + varint(1) + text("r"),
                   "malformed_frame")
    s.invalid_body("PRESENCE_LIST without its limit", ["FieldOverrun"], u8(0x1B) + varint(1) + text("r") + varint(0),
                   "malformed_frame")
    s.invalid_body("SET_PRESENCE whose state runs past the body", ["FieldOverrun"],
                   u8(0x1C) + varint(1) + text("r") + varint(5) + b"abc", "malformed_frame")
    s.invalid_body("PRESENCE counting 2 members, holding 1", ["FieldOverrun"],
                   u8(0x28) + varint(1) + text("r") + varint(2) + varint(2) + enc_member(alice) + varint(0),
                   "malformed_frame")
    s.invalid_body("PRESENCE with a member count of 2^32 and no members", ["FieldOverrun"],
                   u8(0x28) + varint(1) + text("r") + varint(0) + varint(1 << 32) + varint(0), "malformed_frame")
    s.invalid_body("PRESENCE whose member state runs past the body", ["FieldOverrun"],
                   u8(0x28) + varint(1) + text("r") + varint(1) + varint(1) + varint(1) + text("a") + varint(0)
                   + varint(9) + b"ab", "malformed_frame")
    s.invalid_body("PRESENCE_DIFF counting 3 changes, holding 2", ["FieldOverrun"],
                   u8(0x29) + text("r") + varint(1) + varint(3) + enc_change(hidden(1)) + enc_change(hidden(2)),
                   "malformed_frame")
    s.invalid_body("PRESENCE_DIFF left without its reason", ["FieldOverrun"],
                   u8(0x29) + text("r") + varint(0) + varint(1) + u8(1) + varint(1), "malformed_frame")
    s.invalid_body("PRESENCE_DIFF hidden without its member_id", ["FieldOverrun"],
                   u8(0x29) + text("r") + varint(0) + varint(1) + u8(4), "malformed_frame")
    s.invalid_body("PRESENCE_DIFF joined whose member lacks its state", ["FieldOverrun"],
                   u8(0x29) + text("r") + varint(1) + varint(1) + u8(0) + varint(1) + text("a") + varint(0),
                   "malformed_frame")
    s.invalid_body("PRESENCE_LIST with an overlong varint after (0 in two bytes)", ["BadVarint"],
                   u8(0x1B) + varint(1) + text("r") + bytes.fromhex("8000") + varint(0), "malformed_frame")
    s.invalid_body("PRESENCE with count 2^64 (overflow)", ["BadVarint"],
                   u8(0x28) + varint(1) + text("r") + bytes.fromhex("80" * 9 + "02") + varint(0) + varint(0),
                   "malformed_frame")
    s.invalid_body("PRESENCE_DIFF member_id of 11 bytes", ["BadVarint"],
                   u8(0x29) + text("r") + varint(1) + varint(1) + u8(4) + bytes.fromhex("ff" * 10 + "01"),
                   "malformed_frame")
    s.invalid_body("PRESENCE with a principal that is not UTF-8", ["InvalidUtf8"],
                   u8(0x28) + varint(1) + text("r") + varint(1) + varint(1) + varint(1) + text(b"\xc3\x28")
                   + varint(0) + varint(0) + varint(0), "malformed_frame")
    s.invalid_body("SET_PRESENCE with a room that is not UTF-8", ["InvalidUtf8"],
                   u8(0x1C) + varint(1) + text(b"\xff") + varint(0), "malformed_frame")
    over = PRESENCE_LIMITS["max_frame_bytes"] + 1
    s.invalid("PRESENCE whose length prefix is max_frame_bytes + 1", ["FrameLength"], over.to_bytes(4, "big") + u8(0x28),
              "frame_too_large")

    # --- what a version 3 connection makes of them -------------------------------------------
    for name, body in frames:
        s.invalid_body("%s on a version 3 connection" % name, ["Version3", "UnknownType"], body,
                       "unknown_message_type")
    return s.tests


def presence_file():
    return vector_file("presence", presence_vectors(), PRESENCE_LIMITS, [
        "Protocol version 4: decode as a version 4 connection does, except the tests flagged Version3,",
        "which a version 3 connection decodes (section 8.2). Default limits, with the presence keys 10",
        "and 11 at their defaults. Each test is one frame, `hex` holding the 4-byte length prefix and",
        "the body; results as in messages.json. PRESENCE and PRESENCE_DIFF follow sections 11.27 and",
        "11.28: members ascend strictly, no member_id is 0, a PRESENCE_DIFF names a member at most once,",
        "and an unknown `left` reason is valid (a receiver reads it as disconnected).",
    ], version=4)


# ---------------------------------------------------------------------------------------------
# Windows (section 9, "Windows"; sections 11.29-11.31; version 4). A section window is a dict in
# JSON form with bytes values: {"section", "first": n}, {"section", "last": n} or
# {"section", "around": anchor, "before": n, "after": n}.

WINDOW_KINDS = {"first": 0, "last": 1, "around": 2}


def first(section, count): return {"section": B(section), "first": count}
def last(section, count): return {"section": B(section), "last": count}
def around(section, anchor, before, after): return {"section": B(section), "around": B(anchor), "before": before, "after": after}


def window_kind(w):
    return next(k for k in WINDOW_KINDS if k in w)


def enc_section_window(w):
    kind = window_kind(w)
    out = bstr(w["section"]) + u8(WINDOW_KINDS[kind])
    if kind == "around":
        return out + bstr(w["around"]) + varint(w["before"]) + varint(w["after"])
    return out + varint(w[kind])


def section_window_json(w):
    kind = window_kind(w)
    out = {"section": jb(w["section"])}
    if kind == "around":
        out.update(around=jb(w["around"]), before=w["before"], after=w["after"])
    else:
        out[kind] = w[kind]
    return out


def window_json(window):
    return None if window is None else [section_window_json(w) for w in window]


def window_request(request_id, room, window):
    return (u8(0x1D) + varint(request_id) + text(room) + lst(window, enc_section_window),
            {"type": "WINDOW", "request_id": request_id, "room": room, "window": window_json(window)})


def window_state(request_id, room, epoch, version, chain, window, counts, snap):
    body = (u8(0x2A) + varint(request_id) + text(room) + varint(epoch) + varint(version) + chain
            + lst(window, enc_section_window) + lst(counts, varint) + enc_snapshot(snap))
    return body, {"type": "WINDOW_STATE", "request_id": request_id, "room": room, "epoch": epoch,
                  "version": version, "chain": jb(chain), "window": window_json(window), "counts": list(counts),
                  "snapshot": snapshot_json(snap)}


def window_diff(request_id, room, epoch, version, window, counts, ops):
    """`counts` is a list of (section id, items)."""
    body = (u8(0x2B) + varint(request_id) + text(room) + varint(epoch) + varint(version)
            + opt(window, lambda w: lst(w, enc_section_window))
            + lst(counts, lambda c: bstr(B(c[0])) + varint(c[1])) + lst(ops, enc_op))
    return body, {"type": "WINDOW_DIFF", "request_id": request_id, "room": room, "epoch": epoch,
                  "version": version, "window": window_json(window),
                  "counts": [{"section": jb(B(c[0])), "items": c[1]} for c in counts],
                  "ops": [op_json(o) for o in ops]}


# The reference model of windows: rows, window rows, the window snapshot, counts, re-anchoring and
# a WINDOW_DIFF a server could send. A snapshot is a list of (section element, items with levels).


def norm(snap):
    """A snapshot with every item's level explicit, for comparing."""
    return [(dict(s), [dict(i, level=level_of(i)) for i in items]) for s, items in snap]


def section_items(snap, section):
    return next((items for s, items in snap if s["id"] == section), None)


def rows_of(items):
    """A section's rows (section 9): its roots, each with its subtree, in order: [(id, [items])]."""
    rows = []
    for i in items:
        if level_of(i) == 0:
            rows.append((i["id"], [i]))
        else:
            rows[-1][1].append(i)
    return rows


def window_row_range(rows, w):
    """[lo, hi) of the rows a section window shows (section 9); the anchor of `around` must be a row."""
    n = len(rows)
    kind = window_kind(w)
    if kind == "first":
        return 0, min(w["first"], n)
    if kind == "last":
        return max(0, n - w["last"]), n
    k = [r for r, _ in rows].index(w["around"])
    return max(0, k - w["before"]), min(n, k + 1 + w["after"])


def window_rows(snap, w):
    items = section_items(snap, w["section"])
    rows = rows_of(items or [])
    lo, hi = window_row_range(rows, w)
    return rows[lo:hi]


def window_snapshot(snap, window):
    """Every section, in order, with its payload; a section named in the window holds the subtrees
    of its window rows, any other none."""
    named = {w["section"]: w for w in window}
    out = []
    for s, items in snap:
        w = named.get(s["id"])
        out.append((dict(s), [] if w is None else [i for _, run in window_rows(snap, w) for i in run]))
    return norm(out)


def counts_of(snap):
    return [len(items) for _, items in snap]


def is_root_of(snap, section, item_id):
    items = section_items(snap, section)
    return items is not None and any(i["id"] == item_id and level_of(i) == 0 for i in items)


def reanchor(before_snap, window, after_snap):
    """The effective window after a version (section 9, "Re-anchoring"), and for each section window
    the branch taken: None (kept), "next", "previous" or "first"."""
    out, branches = [], []
    for w in window:
        if "around" not in w or is_root_of(after_snap, w["section"], w["around"]):
            out.append(w)
            branches.append(None)
            continue
        ids = [r for r, _ in window_rows(before_snap, w)]
        k = ids.index(w["around"])
        later = [r for r in ids[k + 1:] if is_root_of(after_snap, w["section"], r)]
        earlier = [r for r in ids[:k] if is_root_of(after_snap, w["section"], r)]
        if later:
            out.append(dict(w, around=later[0]))
            branches.append("next")
        elif earlier:
            out.append(dict(w, around=earlier[-1]))
            branches.append("previous")
        else:
            out.append(first(w["section"], w["before"] + 1 + w["after"]))
            branches.append("first")
    return out, branches


def section_count_changes(before_room, after_room):
    """WINDOW_DIFF `counts`: the sections of the room after whose count (all its items) differs from
    the count before, and every section new to it, in the room's order."""
    old = {s["id"]: len(items) for s, items in before_room}
    return [(s["id"], len(items)) for s, items in after_room if old.get(s["id"]) != len(items)]


def parent_and_previous(items, j):
    """The parent (None for a root) and previous sibling (None for a first child) of items[j]."""
    level, parent, prev = level_of(items[j]), None, None
    for x in reversed(items[:j]):
        if level_of(x) < level:
            parent = x["id"]
            break
        if level_of(x) == level and prev is None:
            prev = x["id"]
    return parent, prev


def snapshot_ops(old, new):
    """Ops that turn the window snapshot `old` into `new`, ordered as a REPLACE's (section 5):
    deletes (sections, then the topmost items that leave; an item kept under a deleted one is
    inserted again later), payload updates that do not grow, those that do, then section inserts
    and moves, then item inserts and moves in the new depth-first order."""
    m = Model(old)
    ops = []

    def do(op):
        ops.append(op)
        m.apply(op)

    new_sections = {s["id"]: s for s, _ in new}
    new_items = {i["id"]: i for _, items in new for i in items}
    gone = [s["id"] for s, _ in old if s["id"] not in new_sections]
    if gone:
        do(delete_sections(*gone))
    dropped = []
    for _, items in m.sections:
        under = None
        for i in items:
            if under is not None and i["level"] > under:
                continue
            under = None
            if i["id"] not in new_items:
                dropped.append(i["id"])
                under = i["level"]
    if dropped:
        do(delete_items(*dropped))
    updates = {"shrink": ([], []), "grow": ([], [])}
    for s, items in m.sections:
        if s["payload"] != new_sections[s["id"]]["payload"]:
            p = new_sections[s["id"]]["payload"]
            updates["grow" if len(p) > len(s["payload"]) else "shrink"][0].append(el(s["id"], p))
        for i in items:
            p = new_items[i["id"]]["payload"]
            if p != i["payload"]:
                updates["grow" if len(p) > len(i["payload"]) else "shrink"][1].append(el(i["id"], p))
    for phase in ("shrink", "grow"):
        secs, its = updates[phase]
        if secs:
            do(update_sections(*secs))
        if its:
            do(update_items("reload", *its))
    for k, (s, _) in enumerate(new):
        current = [x[0]["id"] for x in m.sections]
        if k < len(current) and current[k] == s["id"]:
            continue
        place = pl("before", current[0]) if k == 0 else pl("after", new[k - 1][0]["id"])
        if s["id"] in current:
            do(move_section(s["id"], place))
        elif k == 0 and not current:
            do(append_sections(el(s["id"], s["payload"])))
        else:
            do(insert_sections(place, el(s["id"], s["payload"])))
    for s, items in new:
        for j, i in enumerate(items):
            parent, prev = parent_and_previous(items, j)
            present = any(x["id"] == i["id"] for _, xs in m.sections for x in xs)
            if present:
                k, at_ = m.iloc(i["id"])
                if (m.sections[k][0]["id"] == s["id"]
                        and parent_and_previous(m.sections[k][1], at_) == (parent, prev)):
                    continue
            e = el(i["id"], i["payload"])
            if prev is not None:
                place = pl("after", prev)
            elif parent is not None:
                k, at_ = m.iloc(parent)
                xs = m.sections[k][1]
                place = pl("before", xs[at_ + 1]["id"]) if at_ + 1 < len(xs) and xs[at_ + 1]["level"] > xs[at_]["level"] else None
            else:
                xs = m.sections[m.sidx(s["id"])][1]
                place = pl("before", xs[0]["id"]) if xs else None
            if place is not None:
                do(move_item(i["id"], place) if present else insert_items(place, e))
            elif parent is not None:
                do(move_item_to_parent(i["id"], parent) if present else append_children(parent, e))
            else:
                do(move_item_to_section(i["id"], s["id"]) if present else append_items(s["id"], e))
    assert norm(m.snap()) == norm(new), (old, new, ops)
    return ops


def random_batch(rng, room, n, prefix, target=None):
    """n ops that apply to `room` one after another (each valid by construction), and their names;
    with a `target` item, one more op at the end that deletes it, moves it to another section or
    makes it a child (when it still exists)."""
    m = Model(room)
    ops, fresh = [], iter("%s%d" % (prefix, k) for k in range(1000))

    def items():
        return [i["id"] for _, xs in m.sections for i in xs]

    def subtree(id_):
        k, j = m.iloc(id_)
        return {i["id"] for i in m.sections[k][1][j:m.end(k, j)]}

    def depth(id_):
        k, j = m.iloc(id_)
        return m.sections[k][1][j]["level"]

    kinds = ["append_sections", "insert_sections", "delete_sections", "move_section", "update_sections",
             "append_items", "insert_items", "delete_items", "delete_all_items", "move_item", "move_item_to_section",
             "update_items", "append_children", "move_item_to_parent"]
    weights = [2, 2, 1, 2, 2, 4, 6, 6, 1, 8, 4, 4, 4, 6]
    while len(ops) < n:
        kind = rng.choices(kinds, weights)[0]
        sections = [s[0]["id"] for s in m.sections]
        its = items()
        op = None
        if kind == "append_sections":
            op = append_sections(el(next(fresh)))
        elif kind == "insert_sections" and sections:
            op = insert_sections(pl(rng.choice(["before", "after"]), rng.choice(sections)), el(next(fresh)))
        elif kind == "delete_sections" and len(sections) > 1 and rng.random() < 0.3:
            op = delete_sections(rng.choice(sections))
        elif kind == "move_section" and len(sections) > 1:
            a, b = rng.sample(sections, 2)
            op = move_section(a, pl(rng.choice(["before", "after"]), b))
        elif kind == "update_sections" and sections:
            op = update_sections(el(rng.choice(sections), next(fresh)))
        elif kind == "append_items" and sections:
            op = append_items(rng.choice(sections + [None]), el(next(fresh)))
        elif kind == "insert_items" and its:
            op = insert_items(pl(rng.choice(["before", "after"]), rng.choice(its)), el(next(fresh)))
        elif kind == "delete_items" and its:
            op = delete_items(rng.choice(its))
        elif kind == "delete_all_items" and rng.random() < 0.1:
            op = delete_all_items()
        elif kind == "move_item" and len(its) > 1:
            a = rng.choice(its)
            anchors = [b for b in its if b not in subtree(a)]
            if anchors:
                op = move_item(a, pl(rng.choice(["before", "after"]), rng.choice(anchors)))
        elif kind == "move_item_to_section" and its and sections:
            op = move_item_to_section(rng.choice(its), rng.choice(sections))
        elif kind == "update_items" and its:
            op = update_items(rng.choice(["reload", "reconfigure"]), el(rng.choice(its), next(fresh)))
        elif kind == "append_children" and its:
            parent = rng.choice(its)
            if depth(parent) < 3:
                op = append_children(parent, el(next(fresh)))
        elif kind == "move_item_to_parent" and len(its) > 1:
            a = rng.choice(its)
            parents = [b for b in its if b not in subtree(a) and depth(b) < 3]
            if parents:
                op = move_item_to_parent(a, rng.choice(parents))
        if op is not None:
            m.apply(op)
            ops.append(op)
    if target is not None and B(target) in items():
        target = B(target)
        others = [b for b in items() if b not in subtree(target) and depth(b) < 3]
        choice = rng.randrange(3)
        k, _ = m.iloc(target)
        elsewhere = [x[0]["id"] for j, x in enumerate(m.sections) if j != k]
        if choice == 1 and elsewhere:
            ops.append(move_item_to_section(target, rng.choice(elsewhere)))
        elif choice == 2 and others:
            ops.append(move_item_to_parent(target, rng.choice(others)))
        else:
            ops.append(delete_items(target))
    return ops, [o["op"] for o in ops]


def window_step(room, window, ops):
    """One room version seen by a windowed member: the room and its effective window before, the
    batch; returns everything a model vector states."""
    m = Model(room)
    for op in ops:
        m.apply(op)
    after = m.snap()
    new_window, branches = reanchor(room, window, after)
    ws_before, ws_after = window_snapshot(room, window), window_snapshot(after, new_window)
    changed_window = new_window != window
    count_changes = section_count_changes(room, after)
    due = ws_before != ws_after or bool(count_changes) or changed_window
    diff_ops = snapshot_ops(ws_before, ws_after) if due else []
    return {"after": after, "window": new_window, "branches": branches, "ws_before": ws_before,
            "ws_after": ws_after, "counts": count_changes, "due": due, "changed_window": changed_window,
            "ops": diff_ops}


def flat_room(*sections):
    """(section id, [item ids]) pairs -> a flat snapshot (outlines are built with `at`)."""
    return [(el(s), [el(i) if isinstance(i, str) else i for i in items]) for s, items in sections]


ROWS = ["r%d" % k for k in range(10)]
WINDOW_VERSION = 7


def window_model_vectors():
    """Model vectors (section 9, "Windows"): a room, a window, a batch applied to the room, and what
    a windowed member sees."""
    tests = []

    def case(description, room, window, ops):
        step = window_step(room, window, ops)
        diff_frame = None
        if step["due"]:
            built = window_diff(0, "r", EPOCH, WINDOW_VERSION + 1, step["window"] if step["changed_window"] else None,
                                step["counts"], step["ops"])
            diff_frame = {"hex": frame(built[0]).hex(), "message": built[1]}
        tests.append({
            "tcId": len(tests) + 1, "description": description,
            "room": snapshot_json(room), "window": window_json(window), "ops": [op_json(o) for o in ops],
            "roomAfter": snapshot_json(step["after"]),
            "before": {"snapshot": snapshot_json(step["ws_before"]), "counts": counts_of(room)},
            "after": {"snapshot": snapshot_json(step["ws_after"]), "counts": counts_of(step["after"]),
                      "window": window_json(step["window"])},
            "reanchoring": step["branches"],
            "frameDue": step["due"],
            "diff": diff_frame,
        })

    base = flat_room(("above", ["x0", "x1"]), ("s", ROWS), ("below", ["y0", "y1"]))
    windows = [("first 3", first("s", 3), (0, 3)), ("last 3", last("s", 3), (7, 10)),
               ("around r5 (2 before, 2 after)", around("s", "r5", 2, 2), (3, 8))]
    for wname, w, (lo, hi) in windows:
        # Inserts at, just before and just after each edge, inside, above and below.
        for p in sorted({0, lo - 1, lo, lo + 1, hi - 1, hi, hi + 1, 10} & set(range(0, 11))):
            if p == 10:
                op, where = append_items("s", el("new")), "appended at the end"
            elif p % 2 and p > 0:
                op, where = insert_items(pl("after", ROWS[p - 1]), el("new")), "after %s" % ROWS[p - 1]
            else:
                op, where = insert_items(pl("before", ROWS[p]), el("new")), "before %s" % ROWS[p]
            edge = ("inside" if lo < p < hi else "at the top edge" if p == lo else "at the bottom edge" if p == hi
                    else "above the window" if p < lo else "below the window")
            case("%s: insert a row %s (row %d, %s)" % (wname, where, p, edge), base, [w], [op])
        # Deletes inside, outside and at the edges.
        for p in sorted({0, lo - 1, lo, (lo + hi) // 2 - 1, hi - 1, hi, 9} & set(range(0, 10))):
            edge = ("inside" if lo <= p < hi else "above the window" if p < lo else "below the window")
            case("%s: delete row %s (%s)" % (wname, ROWS[p], edge), base, [w], [delete_items(ROWS[p])])
        # Moves across each edge, and into and out of the section.
        if lo > 0:
            case("%s: move the row above the window into it" % wname, base, [w],
                 [move_item(ROWS[lo - 1], pl("after", ROWS[lo + 1]))])
        if hi < 10:
            case("%s: move the first window row to below the window" % wname, base, [w],
                 [move_item(ROWS[lo], pl("after", ROWS[hi]))])
            case("%s: move the row below the window into it" % wname, base, [w],
                 [move_item(ROWS[hi], pl("before", ROWS[hi - 1]))])
        if lo > 0 and hi < 10:
            case("%s: move the row above the window to below it (across the whole window)" % wname, base, [w],
                 [move_item(ROWS[lo - 1], pl("after", ROWS[hi]))])
        case("%s: move the last row to the top" % wname, base, [w], [move_item("r9", pl("before", "r0"))])
        case("%s: move the first row to the bottom" % wname, base, [w], [move_item("r0", pl("after", "r9"))])
        case("%s: move a row inside the window (swap two rows)" % wname, base, [w],
             [move_item(ROWS[lo + 1], pl("before", ROWS[lo]))])
        case("%s: move a row of another section into this one (move_item_to_section, at the end)" % wname, base, [w],
             [move_item_to_section("x0", "s")])
        case("%s: move a row of another section before the window's second row" % wname, base, [w],
             [move_item("y1", pl("before", ROWS[lo + 1]))])
        case("%s: move a window row out to another section" % wname, base, [w],
             [move_item_to_section(ROWS[hi - 1], "below")])
        case("%s: move rows around outside the section only" % wname, base, [w], [move_item("x1", pl("before", "x0"))])
        # Payload updates inside and outside.
        case("%s: reconfigure a row inside the window" % wname, base, [w],
             [update_items("reconfigure", el(ROWS[lo], "changed"))])
        case("%s: reload a row outside the window (no frame: content and counts unchanged)" % wname, base, [w],
             [update_items("reload", el(ROWS[hi % 10 if hi < 10 else lo - 1], "changed"))])
        case("%s: update an item of another section (no frame)" % wname, base, [w],
             [update_items("reload", el("y0", "changed"))])
        # Sections.
        case("%s: update the payload of another section (every section's payload is shown)" % wname, base, [w],
             [update_sections(el("below", "Below"))])
        case("%s: delete another section" % wname, base, [w], [delete_sections("above")])
        case("%s: delete the window's section" % wname, base, [w], [delete_sections("s")])
        case("%s: move the window's section to the end" % wname, base, [w], [move_section("s", pl("after", "below"))])
        case("%s: insert a section before the window's" % wname, base, [w],
             [insert_sections(pl("before", "s"), el("new", "New"))])
        case("%s: append a section" % wname, base, [w], [append_sections(el("last"))])
        case("%s: delete_all_items (no sections left)" % wname, base, [w], [delete_all_items()])
        case("%s: delete_all_items, then the section again with two rows" % wname, base, [w],
             [delete_all_items(), append_sections(el("s")), append_items("s", el("r1"), el("r5"))])
        # Outlines.
        case("%s: append_children under a window row" % wname, base, [w],
             [append_children(ROWS[lo], el("c1"), el("c2"))])
        case("%s: append_children under a row outside the window (counts only)" % wname, base, [w],
             [append_children(ROWS[hi % 10 if hi < 10 else lo - 1], el("c1"))])
        case("%s: move_item_to_parent makes a window row a child of the row before it" % wname, base, [w],
             [move_item_to_parent(ROWS[lo + 1], ROWS[lo])])
        if hi < 10:
            case("%s: move_item_to_parent makes the row below the window a child of the last window row" % wname,
                 base, [w], [move_item_to_parent(ROWS[hi], ROWS[hi - 1])])
        if lo > 0:
            case("%s: move_item_to_parent makes the first window row a child of the row above the window" % wname,
                 base, [w], [move_item_to_parent(ROWS[lo], ROWS[lo - 1])])

    # Re-anchoring (around only): every branch.
    w = around("s", "r5", 2, 2)
    case("around r5: delete the anchor: the next row of the previous window (r6) becomes the anchor", base, [w],
         [delete_items("r5")])
    case("around r5: delete the anchor and r6: r7 becomes the anchor", base, [w], [delete_items("r5", "r6")])
    case("around r5: delete the anchor and every window row after it: the previous row (r4) becomes the anchor",
         base, [w], [delete_items("r5", "r6", "r7")])
    case("around r5: delete the anchor and the rows after it but r8 (below the window): r4, not r8", base, [w],
         [delete_items("r5", "r6", "r7")] + [update_items("reload", el("r8", "kept"))])
    case("around r5: delete every window row: the window becomes first 5", base, [w],
         [delete_items("r3", "r4", "r5", "r6", "r7")])
    case("around r5: move the anchor to another section: r6 becomes the anchor", base, [w],
         [move_item_to_section("r5", "below")])
    case("around r5: make the anchor a child of r4: r6 becomes the anchor", base, [w],
         [move_item_to_parent("r5", "r4")])
    case("around r5: make every window row from the anchor on a child of r4: r4 becomes the anchor", base, [w],
         [move_item_to_parent("r5", "r4"), move_item_to_parent("r6", "r4"), move_item_to_parent("r7", "r4")])
    case("around r5: move the anchor within the section (it stays the anchor)", base, [w],
         [move_item("r5", pl("after", "r9"))])
    case("around r5: move r6 away and the anchor to another section: r7", base, [w],
         [move_item_to_section("r6", "above"), move_item_to_section("r5", "above")])
    case("around r5: r6 moves below the window, then the anchor is deleted: r6 (moved, still a root of s)", base, [w],
         [move_item("r6", pl("after", "r9")), delete_items("r5")])
    case("around r5: delete the window's section: first 5 of a section that no longer exists", base, [w],
         [delete_sections("s")])
    case("around r5: delete_all_items: first 5", base, [w], [delete_all_items()])
    case("around r5 (0 before, 0 after): delete the anchor: first 1", base, [around("s", "r5", 0, 0)],
         [delete_items("r5")])
    case("around r0 (2 before, 1 after), at the top: delete r0 and r1: first 4", base, [around("s", "r0", 2, 1)],
         [delete_items("r0", "r1")])
    case("around r9 (1 before, 3 after), at the bottom: delete r9: r8", base, [around("s", "r9", 1, 3)],
         [delete_items("r9")])

    # Empty and short sections, a section that appears later, several section windows.
    short = flat_room(("s", ["a", "b"]), ("e", []))
    for w in (first("e", 3), last("e", 3), first("s", 5), last("s", 5), around("s", "a", 3, 3)):
        case("%s %s of a short or empty section: append a row to e" % (window_kind(w), w["section"].decode()),
             short, [w], [append_items("e", el("n"))])
        case("%s %s of a short or empty section: insert a row before a" % (window_kind(w), w["section"].decode()),
             short, [w], [insert_items(pl("before", "a"), el("n"))])
    case("first 3 of a section that does not exist yet: it is appended", short, [first("later", 3)],
         [append_sections(el("later", "Later"))])
    case("last 2 of a section that does not exist yet: it is inserted with rows", short, [last("later", 2)],
         [insert_sections(pl("before", "s"), el("later")), append_items("later", el("l1"), el("l2"), el("l3"))])
    case("first 3 of a section that does not exist: a write elsewhere (frame: counts of s)", short, [first("later", 3)],
         [append_items("s", el("c"))])
    case("no section window at all (sections and counts only): insert a row", base, [],
         [insert_items(pl("before", "r0"), el("n"))])
    case("no section window at all: reload an item (no frame)", base, [], [update_items("reload", el("r0", "p"))])
    two = [around("s", "r5", 1, 1), first("below", 1), last("above", 1)]
    case("three section windows: a batch touching each", base, two,
         [delete_items("r5"), insert_items(pl("before", "y0"), el("y")), append_items("above", el("x2"))])
    case("three section windows: a row moves from one window to another", base, two,
         [move_item("r4", pl("before", "y0"))])

    # Outlines: rows with subtrees.
    tree = [(el("s"), [at(0, el("a")), at(1, el("a1")), at(1, el("a2")), at(2, el("a21")), at(0, el("b")),
                       at(1, el("b1")), at(0, el("c")), at(0, el("d")), at(1, el("d1")), at(0, el("e"))]),
            (el("t"), [at(0, el("t0"))])]
    for w in (first("s", 2), last("s", 2), around("s", "c", 1, 1)):
        k = "%s" % window_kind(w)
        case("outline, %s: a child promoted to a row (move_item_to_section)" % k, tree, [w],
             [move_item_to_section("a21", "s")])
        case("outline, %s: a child promoted before the first row" % k, tree, [w], [move_item("b1", pl("before", "a"))])
        case("outline, %s: a row made a child of a row outside the window" % k, tree, [w],
             [move_item_to_parent("c", "t0")])
        case("outline, %s: delete a row with its subtree" % k, tree, [w], [delete_items("b")])
        case("outline, %s: delete a child inside a row" % k, tree, [w], [delete_items("a2")])
        case("outline, %s: append_children deep inside a row" % k, tree, [w], [append_children("a21", el("x"))])
        case("outline, %s: insert a sibling after a child (insert_items)" % k, tree, [w],
             [insert_items(pl("after", "d1"), el("d2"))])
        case("outline, %s: a subtree moves between rows" % k, tree, [w], [move_item_to_parent("a2", "d")])
    case("outline, around c: the anchor made a child of b: d", tree, [around("s", "c", 1, 1)],
         [move_item_to_parent("c", "b")])
    case("outline, around a (0 before, 1 after): the anchor made a child of e: b, the next row", tree, [around("s", "a", 0, 1)],
         [move_item_to_parent("a", "e")])
    case("outline, around b: the anchor and the row after it (c) made children: a", tree, [around("s", "b", 1, 1)],
         [move_item_to_parent("c", "a"), move_item_to_parent("b", "a")])
    # Seeded random batches of several ops on an outline, with windows of every kind: the
    # interplay a server translating op by op must get right (deterministic: a fixed seed).
    rng = random.Random(20261128)
    for k in range(24):
        room = [(el("s"), [at(0, el("r0")), at(1, el("r0a")), at(0, el("r1")), at(0, el("r2")), at(1, el("r2a")),
                           at(2, el("r2b")), at(0, el("r3")), at(0, el("r4")), at(0, el("r5")), at(1, el("r5a")),
                           at(0, el("r6")), at(0, el("r7"))]),
                (el("t", "T"), [at(0, el("t0")), at(0, el("t1"))]), (el("u"), [])]
        roots = [i["id"].decode() for i in room[0][1] if level_of(i) == 0]
        kind = ("first", "last", "around")[k % 3]
        if kind == "around":
            w = around("s", rng.choice(roots), rng.randint(0, 2), rng.randint(0, 2))
        else:
            w = {"first": first, "last": last}[kind]("s", rng.randint(1, 5))
        window = [w] + ([first("t", 1)] if k % 4 == 0 else [])
        ops, names = random_batch(rng, room, 1 + k % 3, "n%d_" % k, w.get("around"))
        case("seeded %d, %s: %s" % (k, kind, ", ".join(names)), room, window, ops)
    return tests


# The room of the window examples (sections 11.29-11.31): feed, a section pinned (one item) and
# a section posts of 1,000 posts, at version 1000; the client follows post500 with one post either
# side; then post500 is deleted.
FEED_POSTS = ["post%d" % k for k in range(1000)]
FEED = [(el("pinned", "Pinned"), [el("welcome")]), (el("posts"), [el(p) for p in FEED_POSTS])]
FEED_WINDOW = [around("posts", "post500", 1, 1)]
FEED_CHAIN = hashlib.sha256(b"feed").digest()   # the room's chain at version 1000 (an example value)


def feed_examples():
    ws = window_snapshot(FEED, FEED_WINDOW)
    step = window_step(FEED, FEED_WINDOW, [delete_items("post500")])
    return {
        "WINDOW": (window_request(18, "feed", FEED_WINDOW), "client -> server"),
        "WINDOW_STATE": (window_state(18, "feed", WALK_EPOCH, 1000, FEED_CHAIN, FEED_WINDOW, counts_of(FEED), ws),
                         "server -> client"),
        "WINDOW_DIFF": (window_diff(0, "feed", WALK_EPOCH, 1001, step["window"], step["counts"], step["ops"]),
                        "server -> client"),
    }


WINDOW_EXAMPLES = ["WINDOW", "WINDOW_STATE", "WINDOW_DIFF"]
WINDOW_LIMITS = dict(PRESENCE_LIMITS, max_window_rows=MAX_WINDOW_ROWS_DEFAULT)


def window_frame_vectors():
    """The window messages of version 4 and how they break; `Version3` tests are decoded as version 3."""
    s = Suite()
    top = (1 << 64) - 1
    chain = bytes(range(0x40, 0x60))
    binary = bytes([0x00, 0xFF])
    for name in WINDOW_EXAMPLES:
        s.valid("PROTOCOL.md example " + name, ["Example"], doc_examples()[name][0])
    every = [first("a", 10), last("b", 0), around("c", "x", 2, 3)]
    s.valid("WINDOW with one section window of each kind", [], window_request(1, "r", every))
    s.valid("WINDOW with no section window (sections and counts only)", ["EdgeCase"], window_request(2, "r", []))
    s.valid("WINDOW first 0 of an empty section id", ["EdgeCase"], window_request(3, "r", [first("", 0)]))
    s.valid("WINDOW with maximal counts (a decoder does not check max_window_rows)", ["EdgeCase", "WindowLimit"],
            window_request(4, "r", [first("a", top), around("b", "y", top, top)]))
    s.valid("WINDOW naming a section twice (a decoder does not check it; the server answers duplicate_section)",
            ["WindowLimit"], window_request(5, "r", [first("a", 1), last("a", 1)]))
    s.valid("WINDOW with binary identifiers (JSON form: hex)", [], window_request(6, "r", [around(binary, binary, 0, 0)]))
    flat = [(el("s", "S"), [el("a"), el("b")]), (el("t"), [])]
    s.valid("WINDOW_STATE of a flat room", [],
            window_state(1, "r", EPOCH, 9, chain, [first("s", 2)], [5, 0], flat))
    s.valid("WINDOW_STATE of a room with no sections", ["EdgeCase"], window_state(2, "r", EPOCH, 0, bytes(32), [], [], []))
    s.valid("WINDOW_STATE with an outline window (levels part)", [],
            window_state(3, "r", EPOCH, 9, chain, [last("s", 1)], [7],
                         [(el("s"), [at(0, el("a")), at(1, el("a1")), at(2, el("a11"))])]))
    s.valid("WINDOW_STATE with maximal version and counts", ["EdgeCase"],
            window_state(top, "r", top, top, chain, [around("s", "a", 1, 0)], [top], [(el("s"), [el("a")])]))
    s.valid("WINDOW_DIFF live (request_id 0), counts only", [],
            window_diff(0, "r", EPOCH, 10, None, [("s", 6)], []))
    s.valid("WINDOW_DIFF live with a new effective window and ops", [],
            window_diff(0, "r", EPOCH, 11, [around("s", "b", 2, 2)], [("s", 5)],
                        [delete_items("a"), insert_items(pl("after", "b"), el("c"))]))
    s.valid("WINDOW_DIFF answering a WINDOW (window present, nothing else changed)", ["EdgeCase"],
            window_diff(7, "r", EPOCH, 11, [first("s", 1)], [], []))
    s.valid("WINDOW_DIFF with an empty window (every section window dropped)", ["EdgeCase"],
            window_diff(8, "r", EPOCH, 11, [], [], [delete_all_items(), append_sections(el("s"), el("t"))]))
    s.valid("WINDOW_DIFF with every op kind", ["EveryOp"],
            window_diff(0, "r", EPOCH, 12, None, [("s", 3), (binary, 0)], [
                append_sections(el("n")), insert_sections(pl("after", "n"), el("m")), delete_sections("m"),
                move_section("n", pl("before", "s")), update_sections(el("n", "N")),
                append_items(None, el("i")), append_items("s", el("j")), insert_items(pl("before", "i"), el("k")),
                delete_items("k"), move_item("j", pl("after", "i")), move_item_to_section("j", "n"),
                update_items("reload", el("i", "I")), append_children("i", el("ic")), move_item_to_parent("j", "i"),
                delete_all_items()]))
    s.valid("REJECT window_too_large", [], reject(4, 57, None, None, "window of 1001 rows is over max_window_rows 1000"))
    s.valid("REJECT anchor_item_not_found answering WINDOW", [],
            reject(5, 25, None, "x", "x is not a row of section c"))
    s.valid("WELCOME version 4 with max_window_rows", ["EdgeCase"], welcome(4, 1, "s", [(12, 1000)]))

    # --- how they break ----------------------------------------------------------------------
    win = window_request(1, "r", every)[0]
    for kind in (3, 0x80, 0xFF):
        s.invalid_body("WINDOW with section window kind %d" % kind, ["WindowRule", "BadEnum"],
                       u8(0x1D) + varint(1) + text("r") + varint(1) + bstr(b"a") + u8(kind) + varint(1),
                       "malformed_frame")
    s.invalid_body("WINDOW_DIFF with section window kind 3 in its window", ["WindowRule", "BadEnum"],
                   u8(0x2B) + varint(0) + text("r") + varint(1) + varint(1) + u8(1) + varint(1) + bstr(b"a") + u8(3)
                   + varint(1) + varint(0) + varint(0), "malformed_frame")
    state_body = window_state(1, "r", EPOCH, 9, chain, [first("s", 2)], [5, 0], flat)[0]
    head = u8(0x2A) + varint(1) + text("r") + varint(EPOCH) + varint(9) + chain + lst([first("s", 2)], enc_section_window)
    s.invalid_body("WINDOW_STATE with one count for two sections", ["WindowRule"],
                   head + lst([5], varint) + enc_snapshot(flat), "malformed_frame")
    s.invalid_body("WINDOW_STATE with three counts for two sections", ["WindowRule"],
                   head + lst([5, 0, 1], varint) + enc_snapshot(flat), "malformed_frame")
    s.invalid_body("WINDOW_STATE with counts for an empty snapshot", ["WindowRule"],
                   head + lst([1], varint) + enc_snapshot([]), "malformed_frame")
    for flag in (2, 0xFF):
        s.invalid_body("WINDOW_DIFF with window presence flag 0x%02x" % flag, ["BadFlag"],
                       u8(0x2B) + varint(0) + text("r") + varint(1) + varint(1) + u8(flag) + varint(0) + varint(0),
                       "malformed_frame")
    s.invalid_body("WINDOW_STATE with a duplicate item in its snapshot", ["ContentRule"],
                   head + lst([2], varint) + enc_snapshot([(el("s"), [el("a"), el("a")])]), "duplicate_item", identifier="a")
    s.invalid_body("WINDOW_DIFF with an identifier over max_identifier_bytes", ["ContentRule"],
                   window_diff(0, "r", EPOCH, 2, None, [], [delete_items("x" * 257)])[0], "identifier_too_long",
                   identifier="x" * 257)
    diff_body = window_diff(0, "r", EPOCH, 11, [around("s", "b", 2, 2)], [("s", 5)], [delete_items("a")])[0]
    frames = [("WINDOW", win), ("WINDOW_STATE", state_body), ("WINDOW_DIFF", diff_body)]
    cut_and_padded(s, frames)
    s.invalid("WINDOW_STATE cut in its chain", ["Truncated"], frame(state_body)[:20], "malformed_frame")
    s.invalid_body("WINDOW around without its after", ["FieldOverrun"],
                   u8(0x1D) + varint(1) + text("r") + varint(1) + bstr(b"a") + u8(2) + bstr(b"x") + varint(1),
                   "malformed_frame")
    s.invalid_body("WINDOW counting 2 section windows, holding 1", ["FieldOverrun"],
                   u8(0x1D) + varint(1) + text("r") + varint(2) + enc_section_window(first("a", 1)), "malformed_frame")
    s.invalid_body("WINDOW_DIFF with a section count cut after its section", ["FieldOverrun"],
                   u8(0x2B) + varint(0) + text("r") + varint(1) + varint(1) + u8(0) + varint(1) + bstr(b"s"),
                   "malformed_frame")
    s.invalid_body("WINDOW with an overlong varint count (1 in two bytes)", ["BadVarint"],
                   u8(0x1D) + varint(1) + text("r") + varint(1) + bstr(b"a") + u8(0) + bytes.fromhex("8100"),
                   "malformed_frame")
    s.invalid_body("WINDOW with a room that is not UTF-8", ["InvalidUtf8"],
                   u8(0x1D) + varint(1) + text(b"\xff") + varint(0), "malformed_frame")

    # --- what a version 3 connection makes of them -------------------------------------------
    for name, body in frames:
        s.invalid_body("%s on a version 3 connection" % name, ["Version3", "UnknownType"], body,
                       "unknown_message_type")
    return s.tests


def windows_file():
    doc = vector_file("windows", window_frame_vectors(), WINDOW_LIMITS, [
        "Protocol version 4: decode as a version 4 connection does, except the tests flagged Version3,",
        "which a version 3 connection decodes (section 8.2). Default limits, with max_window_rows (key 12)",
        "at its default. Each test is one frame, `hex` holding the 4-byte length prefix and the body;",
        "results as in messages.json. WINDOW_STATE has one count per section of its snapshot.",
        "`models` (section 9, \"Windows\"): a room (`room`, JSON form) at version %d, the effective" % WINDOW_VERSION,
        "`window` of a windowed member, and `ops`, one batch applied to the room (version %d), giving" % (WINDOW_VERSION + 1),
        "`roomAfter`. `before` and `after`: the member's window snapshot and the room's counts (one per",
        "section, in order) before and after; `after.window`: the effective window after re-anchoring,",
        "and `reanchoring` says for each section window which branch it took: null (kept), \"next\",",
        "\"previous\" or \"first\". `frameDue`: whether a WINDOW_DIFF is sent for this version (the window",
        "snapshot, the counts or the effective window changed). `diff`: a WINDOW_DIFF a server could send",
        "(null when none is due): its `counts` and `window` are exactly defined; its ops are one choice",
        "among many, and applying them to `before.snapshot` gives `after.snapshot`.",
    ], version=4)
    doc["models"] = window_model_vectors()
    return doc


def chain_file():
    doc = vector_file("chain", chain_vectors(), DEFAULT_LIMITS, [
        "Protocol version 3: decode as a version 3 connection does, except the tests flagged Version2,",
        "which a version 2 connection decodes (section 8.2). Default limits. Each test is one frame, `hex`",
        "holding the 4-byte length prefix and the body; results as in messages.json.",
        "`chains` holds histories of the room's chain (section 9): from `start` = chain(epoch, 0), each",
        "`diffs` entry gives the DIFF frame of the next version as versions 1 and 2 encode it (length",
        "prefix included) and the chain after it, SHA-256(previous chain || frame).",
        "`foldedCatchups` (section 11.12): a replica's `start` (version, chain, state), the folded CATCHUP",
        "and its one DIFF (version 3 frames, `hex` and `message`), and `end`: the replica's state after",
        "applying the DIFF's ops to `start` under `limits`, and the chain it takes from the DIFF. `holds`:",
        "whether the digest of `end` is the CATCHUP's `folded` (false: the replica discards its state).",
        "`replay`, when present: the replay form of the same answer (CATCHUP, then one chained DIFF per",
        "version), which leads from `start` to the same `end` and chain.",
    ], version=3)
    history = []
    for version, ops in enumerate(TODO_HISTORY, start=1):
        history.append({"version": version, "hex": frame(diff("todo", WALK_EPOCH, version, ops)[0]).hex(),
                        "chain": todo_chains()[version].hex()})
    doc["chains"] = [{"comment": "the walkthrough's room todo (PROTOCOL.md section 15) and the version 3 examples",
                      "epoch": WALK_EPOCH, "start": todo_chains()[0].hex(), "diffs": history}]
    doc["foldedCatchups"] = folded_catchups()
    return doc


def state_json(version, snap, chain=None):
    """A replica's state: version, canonical encoding (section 4), its SHA-256, the JSON form and,
    when given, the chain the replica holds."""
    out = {"version": version, "hex": enc_snapshot(snap).hex(), "digest": digest(snap).hex(),
           "snapshot": snapshot_json(snap)}
    if chain is not None:
        out["chain"] = chain.hex()
    return out


def frame_json(built):
    body, js = built
    return {"hex": frame(body).hex(), "message": js}


def folded_catchups():
    """Section 11.12 end to end, version 3: a replica at `start` resumes (JOIN-resume-v3) and gets a
    folded CATCHUP and its one DIFF. It applies the DIFF's ops to its state, takes the DIFF's
    chain, and compares the digest of what it holds with the CATCHUP's `folded`: `holds` says
    whether they are equal. `end` is the replica's state after the DIFF, whichever. `replay`,
    where given, is the other form of the same answer: the CATCHUP and the DIFFs of every version,
    each chained to the one before from `start.chain`, ending at the same state and chain."""
    catchup_folded = doc_examples()["CATCHUP-folded"][0]
    diff_folded = doc_examples()["DIFF-folded"][0]
    # The server's choice (section 11.12): snapsyncd folds only when the folded answer is smaller.
    replay_frames = [frame(doc_examples()["CATCHUP-v3"][0][0])] + [
        frame(diff("todo", WALK_EPOCH, v, TODO_HISTORY[v - 1], chain=todo_chains()[v])[0]) for v in (5, 6, 7)]
    assert len(frame(catchup_folded[0])) + len(frame(diff_folded[0])) < sum(map(len, replay_frames))
    # A replica whose chain is the room's but whose state is not (an apply gone wrong: version 3's
    # delete of `tea` was lost): the resume passes the chain check, the DIFF applies, the digest
    # tells.
    damaged = [(el("today", "Today"), [el("milk", "Buy milk"), el("tea"), el("eggs", "Buy eggs")])]
    return [
        {"comment": "the room todo from version 4 to version 7 (PROTOCOL.md section 11.12's examples)",
         "room": "todo", "epoch": WALK_EPOCH,
         "start": state_json(4, TODO_V4, todo_chains()[4]),
         "catchup": frame_json(catchup_folded), "diff": frame_json(diff_folded),
         "holds": True,
         "end": state_json(7, applied(TODO_V4, TODO_FOLDED_4_7), todo_chains()[7]),
         "replay": [frame_json(doc_examples()["CATCHUP-v3"][0])] + [
             frame_json(diff("todo", WALK_EPOCH, v, TODO_HISTORY[v - 1], chain=todo_chains()[v])) for v in (5, 6, 7)]},
        {"comment": "the same answer to a replica at version 4 with the room's chain but not its state "
                    "(it still holds tea): the digest does not match, so the replica is discarded and "
                    "JOINs again without resume",
         "room": "todo", "epoch": WALK_EPOCH,
         "start": state_json(4, damaged, todo_chains()[4]),
         "catchup": frame_json(catchup_folded), "diff": frame_json(diff_folded),
         "holds": False,
         "end": state_json(7, applied(damaged, TODO_FOLDED_4_7), todo_chains()[7])},
    ]


# The messages shown in PROTOCOL.md: one example per message, and a whole session.
WALK_EPOCH = 0x1F2E3D4C5B6A7988
TODO_V3 = [(el("today", "Today"), [el("milk", "Buy milk")])]
# The DIFF of version 5 (PROTOCOL.md's DIFF-ops example): a section inserted, an item moved, a
# payload reconfigured.
TODO_V5_OPS = [insert_sections(pl("before", "today"), el("later")), move_item("eggs", pl("before", "milk")),
               update_items("reconfigure", el("milk", "Buy oat milk"))]
# The DIFFs that built TODO_V3 (versions 1 to 3), the walkthrough's DIFF of version 4, then three
# more versions: what a replica resuming from version 4 is caught up on (section 11.12).
TODO_HISTORY = [[append_sections(el("today", "Today"))],
                [append_items("today", el("milk", "Buy milk"), el("tea"))],
                [delete_items("tea")],
                [append_items("today", el("eggs", "Buy eggs"))],
                TODO_V5_OPS,
                [delete_items("eggs"), append_items("today", el("bread", "Buy bread"))],
                [move_item_to_section("milk", "later")]]
TODO_V4 = [(el("today", "Today"), [el("milk", "Buy milk"), el("eggs", "Buy eggs")])]
TODO_V7 = [(el("later"), [el("milk", "Buy oat milk")]), (el("today", "Today"), [el("bread", "Buy bread")])]
# The folded DIFF of a CATCHUP from version 4 to version 7 (section 11.12): one batch taking
# TODO_V4 to TODO_V7, ordered as a REPLACE's (section 5: deletes, updates, then inserts and moves).
# A delete, an update, two inserts and a move: the three versions' changes without the move of
# `eggs` (deleted since) and with `milk`'s two changes in two ops.
TODO_FOLDED_4_7 = [delete_items("eggs"), update_items("reconfigure", el("milk", "Buy oat milk")),
                   insert_sections(pl("before", "today"), el("later")), move_item_to_section("milk", "later"),
                   append_items("today", el("bread", "Buy bread"))]


def applied(snap, *batches):
    """`snap` with `batches` applied in the model (sections 5 and 7)."""
    model = Model(snap)
    for ops in batches:
        for op in ops:
            model.apply(op)
    return model.snap()


def todo_states():
    """The walkthrough room's state at each version 0 ... 7, from TODO_HISTORY."""
    states = [[]]
    for ops in TODO_HISTORY:
        states.append(applied(states[-1], ops))
    return states


# The constants agree with the history they are written from, and the folded batch with the
# versions it folds.
assert enc_snapshot(todo_states()[3]) == enc_snapshot(TODO_V3)
assert enc_snapshot(todo_states()[4]) == enc_snapshot(TODO_V4)
assert enc_snapshot(todo_states()[7]) == enc_snapshot(TODO_V7)
assert enc_snapshot(applied(TODO_V4, TODO_FOLDED_4_7)) == enc_snapshot(TODO_V7)


def todo_chains():
    """chain(WALK_EPOCH, v) for v = 0 ... 7 of the walkthrough's room."""
    chains = [chain_start(WALK_EPOCH)]
    for version, ops in enumerate(TODO_HISTORY, start=1):
        chains.append(chain_next(chains[-1], frame(diff("todo", WALK_EPOCH, version, ops)[0])))
    return chains


GROCERIES = [(el("groceries", "Groceries"), [at(0, el("fruit", "Fruit")), at(1, el("apple")), at(1, el("pear")),
                                            at(0, el("bread"))])]


# The presence of room todo in the version 4 examples: members 7 (this client, "demo") and 9
# (bob), joined at 2026-01-01T00:00:00Z and 1.5 s later, in milliseconds.
PRESENCE_DEMO = member(7, "demo", 1767225600000)
PRESENCE_BOB = member(9, "bob", 1767225601500, '{"editing":"milk"}')
PRESENCE_EDITING_EGGS = '{"editing":"eggs"}'


def doc_examples():
    """name -> (built message, direction). Every one is also a vector in messages.json."""
    limits = [(LIMIT_KEYS[k], v) for k, v in DEFAULT_LIMITS.items()]
    eggs = [append_items("today", el("eggs", "Buy eggs"))]
    return {
        "HELLO": (hello([1], "demo"), "client -> server"),
        "WELCOME": (welcome(1, 7, "snapsyncd/1.0", limits), "server -> client"),
        "ERROR": (error(4, "expected HELLO"), "server -> client"),
        "PING": (ping(42), "client -> server"),
        "PONG": (pong(42), "server -> client"),
        "JOIN": (join(1, "todo"), "client -> server"),
        "JOIN-resume": (join(5, "todo", (WALK_EPOCH, 4)), "client -> server"),
        "LEAVE": (leave(6, "todo"), "client -> server"),
        "MUTATE": (mutate(2, "todo", 3, b"w1", eggs), "client -> server"),
        "MUTATE-bad": (mutate(3, "todo", None, b"", [delete_items("bread")]), "client -> server"),
        "REPLACE": (replace(7, "todo", 4, b"", [(el("today", "Today"), [el("milk", "Buy milk"), el("tea")])]),
                    "client -> server"),
        "STATS": (stats(8), "client -> server"),
        "SNAPSHOT": (snapshot(1, "todo", WALK_EPOCH, 3, "initial", TODO_V3), "server -> client"),
        "CATCHUP": (catchup(5, "todo", WALK_EPOCH, 4, 5), "server -> client"),
        "DIFF": (diff("todo", WALK_EPOCH, 4, eggs), "server -> client"),
        "ACK": (ack(2, WALK_EPOCH, 4), "server -> client"),
        "REJECT": (reject(3, 23, 0, "bread", "item bread does not exist"), "server -> client"),
        "STATS_REPLY": (stats_reply(8, [("rooms", 1), ("connections", 2)]), "server -> client"),
        "DIFF-ops": (diff("todo", WALK_EPOCH, 5, TODO_V5_OPS), "server -> client"),
        "AUTH": (auth(9, TOKEN), "client -> server"),
        "LEFT": (left("board:2", 48, "token of alice grants no read on room board:2"), "server -> client"),
        "REJECT-forbidden": (reject(10, 48, None, None, "token of alice grants no write on room board:2"),
                             "server -> client"),
        "ERROR-token_expired": (error(13, "token of alice expired at 2100-01-01T00:00:00Z"), "server -> client"),
        "DROP": (drop(11, "todo"), "client -> server"),
        "LEFT-room_deleted": (left("todo", 49, "room todo was deleted"), "server -> client"),
        "SET_TTL": (set_ttl(12, "todo", 86400), "client -> server"),
        # Version 2 (outline.json):
        "HELLO-v2": (hello([2, 1], "demo"), "client -> server"),
        "WELCOME-v2": (welcome(2, 7, "snapsyncd/1.0", limits + [(9, OUTLINE_DEPTH_DEFAULT)]), "server -> client"),
        "snapshot-outline": ((enc_snapshot(GROCERIES), snapshot_json(GROCERIES)), "field"),
        "SNAPSHOT-outline": (snapshot(1, "groceries", WALK_EPOCH, 7, "initial", GROCERIES), "server -> client"),
        "DIFF-outline": (diff("groceries", WALK_EPOCH, 8, [append_children("fruit", el("cherry")),
                                                           move_item_to_parent("bread", "fruit")]),
                         "server -> client"),
        "REPLACE_SECTION": (replace_section(13, "groceries", 7, b"", "groceries",
                                            [at(0, el("fruit", "Fruit")), at(1, el("apple")), at(0, el("bread"))]),
                            "client -> server"),
        # Version 3 (chain.json): the room of the walkthrough, its chain from TODO_HISTORY.
        "HELLO-v3": (hello([3, 2, 1], "demo"), "client -> server"),
        "JOIN-resume-v3": (join(5, "todo", (WALK_EPOCH, 4), chain=todo_chains()[4]), "client -> server"),
        "SNAPSHOT-v3": (snapshot(1, "todo", WALK_EPOCH, 3, "initial", TODO_V3, chain=todo_chains()[3]),
                        "server -> client"),
        "DIFF-v3": (diff("todo", WALK_EPOCH, 4, eggs, chain=todo_chains()[4]), "server -> client"),
        "VERIFY": (verify(14, "todo"), "client -> server"),
        "DIGEST": (digest_reply(14, "todo", WALK_EPOCH, 4, digest(TODO_V4), todo_chains()[4]), "server -> client"),
        # The answers to JOIN-resume-v3 once the room is at version 7 (section 11.12): the replay
        # form (the DIFFs of versions 5, 6 and 7 follow), or the folded form and its one DIFF.
        "CATCHUP-v3": (catchup(5, "todo", WALK_EPOCH, 4, 7, v3=True), "server -> client"),
        "CATCHUP-folded": (catchup(5, "todo", WALK_EPOCH, 4, 7, v3=True, folded=digest(TODO_V7)), "server -> client"),
        "DIFF-folded": (diff("todo", WALK_EPOCH, 7, TODO_FOLDED_4_7, chain=todo_chains()[7]), "server -> client"),
        # Version 4 (presence.json): the client of the walkthrough (session 7, "demo") watches room
        # todo's presence, where bob (9) is editing; carol (12) joins, bob's connection closes,
        # and demo sets its own state.
        "HELLO-v4": (hello([4, 3, 2, 1], "demo"), "client -> server"),
        "WELCOME-v4": (welcome(4, 7, "snapsyncd/1.0", limits + [(9, OUTLINE_DEPTH_DEFAULT),
                                                               (10, PRESENCE_BYTES_DEFAULT),
                                                               (11, PRESENCE_VIEW_DEFAULT)]), "server -> client"),
        "PRESENCE_WATCH": (presence_watch(15, "todo", 1), "client -> server"),
        "PRESENCE": (presence(15, "todo", 2, [PRESENCE_DEMO, PRESENCE_BOB], 0), "server -> client"),
        "PRESENCE_LIST": (presence_list(16, "todo", 7, 1), "client -> server"),
        "PRESENCE-page": (presence(16, "todo", 2, [PRESENCE_BOB], 0), "server -> client"),
        "SET_PRESENCE": (set_presence(17, "todo", PRESENCE_EDITING_EGGS), "client -> server"),
        "PRESENCE_DIFF": (presence_diff("todo", 2, [state_set(7, PRESENCE_EDITING_EGGS), departed(9, 1),
                                                    joined(member(12, "carol", 1767225660250))]),
                          "server -> client"),
        # Windows (windows.json): room feed's 1,000 posts, followed around post500.
        **feed_examples(),
    }


WALKTHROUGH = ["HELLO", "WELCOME", "JOIN", "SNAPSHOT", "MUTATE", "DIFF", "ACK", "MUTATE-bad", "REJECT", "PING",
               "PONG"]


def render_protocol(text_in):
    """PROTOCOL.md with every generated block replaced: `<!-- BEGIN example NAME -->` ... `<!-- END -->`."""
    examples = doc_examples()
    out, k = [], 0
    lines = text_in.split("\n")
    while k < len(lines):
        line = lines[k]
        out.append(line)
        if line.startswith("<!-- BEGIN example ") or line == "<!-- BEGIN walkthrough -->":
            if line == "<!-- BEGIN walkthrough -->":
                block = "\n\n".join(annotated(examples[n][0], examples[n][1]) for n in WALKTHROUGH)
            else:
                name = line[len("<!-- BEGIN example "):-len(" -->")]
                block = annotated(*examples[name])
            out += ["```", block, "```"]
            while not lines[k].startswith("<!-- END"):
                k += 1
            out.append(lines[k])
        k += 1
    return "\n".join(out)


def render_auth(text_in):
    """AUTH.md with its example block (`<!-- BEGIN token example -->` ... `<!-- END -->`) regenerated."""
    head, sep, rest = text_in.partition("<!-- BEGIN token example -->\n")
    assert sep, "AUTH.md has no token example block"
    _, end, tail = rest.partition("<!-- END -->")
    assert end, "AUTH.md's token example block has no end"
    header_b64, claims_b64, signature_b64 = TOKEN.decode("ascii").split(".")
    block = "\n".join([
        "Key (JSON Web Key; a key file holds it in `{\"keys\": [...]}`):", "",
        "```json", json.dumps(EXAMPLE_KEY, ensure_ascii=False), "```", "",
        "Header, then its base64url:", "",
        "```", compact_json(EXAMPLE_HEADER).decode("utf-8"), header_b64, "```", "",
        "Claims, then their base64url:", "",
        "```", compact_json(EXAMPLE_CLAIMS).decode("utf-8"), claims_b64, "```", "",
        "Signature: HMAC-SHA-256 with the secret over `%s.%s`, in base64url:" % ("header", "claims"), "",
        "```", signature_b64, "```", "",
        "The token (%d bytes), as `credentials` carries it:" % len(TOKEN), "",
        "```", TOKEN.decode("ascii"), "```", ""])
    return head + sep + block + end + tail


def vector_file(name, tests, limits, header, version=1):
    used = sorted({f for t in tests for f in t["flags"]})
    return {
        "algorithm": "SnapSync wire protocol",
        "protocolVersion": version,
        "generatorVersion": GENERATOR_VERSION,
        "numberOfTests": len(tests),
        "header": header,
        "limits": limits,
        "accepting": "either",
        "notes": {f: NOTES[f] for f in used},
        "tests": tests,
    }


def outputs():
    common = [
        "Each test is one frame, `hex` holding the 4-byte length prefix and the body. Decode it with the",
        "`limits` above (a receiver accepting messages from both sides: `accepting` is \"either\").",
        "result \"valid\": decoding gives `message` (the JSON form of PROTOCOL.md section 14) and encoding",
        "`message` gives `hex` again. result \"invalid\": decoding fails with `error` (a snake_case name",
        "of section 6).",
    ]
    return {
        "messages.json": vector_file("messages", message_vectors(), DEFAULT_LIMITS, common + [
            "Every message type and op kind, framing, varints, flags, enums and trailing bytes, with the",
            "default limits.",
        ]),
        "limits.json": vector_file("limits", limit_vectors(), SMALL_LIMITS, common + [
            "Boundaries of every limit at 0, 1, max and max + 1, with small limits (NOT the defaults)",
            "so that the frames stay small.",
        ]),
        "replay.json": replay_set(),
        "batches.json": batch_vectors(),
        "outline.json": vector_file("outline", outline_vectors(), OUTLINE_LIMITS, common + [
            "Protocol version 2: decode as a version 2 connection does, except the tests flagged Version1,",
            "which a version 1 connection decodes (section 8.2). Default limits, but max_outline_depth 4.",
        ], version=2),
        "outline_batches.json": outline_batch_vectors(),
        "chain.json": chain_file(),
        "presence.json": presence_file(),
        "windows.json": windows_file(),
    }


def render(doc):
    if "models" not in doc:
        return json.dumps(doc, indent=1, ensure_ascii=False) + "\n"
    # windows.json: its model vectors hold whole rooms, so each of their fields is one line.
    head = json.dumps({k: v for k, v in doc.items() if k != "models"}, indent=1, ensure_ascii=False)
    models = ",\n".join("  {\n" + ",\n".join("   %s: %s" % (json.dumps(k), json.dumps(v, ensure_ascii=False))
                                              for k, v in m.items()) + "\n  }" for m in doc["models"])
    return head[:-2] + ',\n "models": [\n' + models + "\n ]\n}\n"


def main():
    check = "--check" in sys.argv[1:]
    stale = []
    files = {name: render(doc) for name, doc in outputs().items()}
    spec = os.path.join(HERE, os.pardir, "PROTOCOL.md")
    with open(spec, encoding="utf-8") as f:
        files[os.path.join(os.pardir, "PROTOCOL.md")] = render_protocol(f.read())
    with open(os.path.join(HERE, os.pardir, "AUTH.md"), encoding="utf-8") as f:
        files[os.path.join(os.pardir, "AUTH.md")] = render_auth(f.read())
    for name, text_out in files.items():
        path = os.path.join(HERE, name)
        if check:
            try:
                with open(path, encoding="utf-8") as f:
                    if f.read() != text_out:
                        stale.append(name)
            except FileNotFoundError:
                stale.append(name)
        else:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text_out)
    if check and stale:
        print("stale vector files (run Protocol/vectors/generate.py): " + ", ".join(stale), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
