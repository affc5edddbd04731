#!/usr/bin/env python3
"""Writes the fuzz seeds that come from Protocol/vectors/*.json into Tests/Fuzz/seeds/.

The seeds written by the store itself (log segments, checkpoints, snapshots of real rooms)
come from the Swift test SeedCorpusTests (SNAPSYNC_WRITE_FUZZ_SEEDS=1 swift test --filter SeedCorpus).

Usage: Tests/Fuzz/make-corpus.py          write the vector seeds (named vector-<sha1 prefix>)
       Tests/Fuzz/make-corpus.py --check  fail if the committed ones differ from what it would write

Wire seeds start with the control byte of the wire target (Sources/Entries/WireTarget.swift): bits 0-1
accepting side (0 client, 1 server, 2 either; 3 either in the current version's layouts: 3's chain, 4's presence), bit 2 the tight limits of limits.json, bits 3-7
the chunk size minus one.
"""
import hashlib
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
VECTORS = os.path.join(HERE, "..", "..", "Protocol", "vectors")
SEEDS = os.path.join(HERE, "seeds")

CLIENT, SERVER, EITHER, EITHER_V3, TIGHT = 0, 1, 2, 3, 4
CLIENT_TYPES = {0x01, 0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18}
SERVER_TYPES = {0x02, 0x03, 0x20, 0x21, 0x22, 0x23, 0x24, 0x25, 0x26}


def control(side, tight=False, chunk=1):
    return bytes([side | (TIGHT if tight else 0) | ((chunk - 1) << 3)])


def load(name):
    with open(os.path.join(VECTORS, name)) as f:
        return json.load(f)


def seeds():
    """(target, bytes) pairs."""
    out = []
    messages = load("messages.json")
    for i, test in enumerate(messages["tests"]):
        frame = bytes.fromhex(test["hex"])
        kind = frame[4] if len(frame) > 4 else None
        side = CLIENT if kind in CLIENT_TYPES else SERVER if kind in SERVER_TYPES else EITHER
        # Vary the chunk size, so that frames are cut at every kind of boundary.
        out.append(("wire", control(side, chunk=1 + (i * 7) % 32) + frame))
    for test in load("limits.json")["tests"]:
        out.append(("wire", control(EITHER, tight=True, chunk=4) + bytes.fromhex(test["hex"])))
    # Protocol version 2 (the wire target decodes as the current version): outlines, the new
    # ops, REPLACE_SECTION, and the malformed levels parts. Version1 tests read the same bytes.
    for i, test in enumerate(load("outline.json")["tests"]):
        if "Version1" in test["flags"]:
            continue
        frame = bytes.fromhex(test["hex"])
        kind = frame[4] if len(frame) > 4 else None
        side = CLIENT if kind in CLIENT_TYPES else SERVER if kind in SERVER_TYPES else EITHER
        out.append(("wire", control(side, chunk=1 + (i * 5) % 32) + frame))
    # Protocol version 3: the chain fields, VERIFY and DIGEST. Version2 tests are read otherwise.
    for i, test in enumerate(load("chain.json")["tests"]):
        if "Version2" in test["flags"]:
            continue
        out.append(("wire", control(EITHER_V3, chunk=1 + (i * 3) % 32) + bytes.fromhex(test["hex"])))
    # Protocol version 4: the presence messages. Version3 tests are read otherwise.
    for i, test in enumerate(load("presence.json")["tests"]):
        if "Version3" in test["flags"]:
            continue
        out.append(("wire", control(EITHER_V3, chunk=1 + (i * 11) % 32) + bytes.fromhex(test["hex"])))
    # Protocol version 4: the window messages, and the WINDOW_DIFF of each model vector.
    windows = load("windows.json")
    for i, test in enumerate(windows["tests"]):
        if "Version3" in test["flags"]:
            continue
        out.append(("wire", control(EITHER_V3, chunk=1 + (i * 7) % 32) + bytes.fromhex(test["hex"])))
    for i, model in enumerate(windows["models"]):
        if model.get("diff"):
            out.append(("wire", control(EITHER_V3, chunk=1 + (i * 13) % 32) + bytes.fromhex(model["diff"]["hex"])))
    replay = load("replay.json")
    # A client's view of a room: its SNAPSHOT-worthy start, then every DIFF in one stream.
    out.append(("wire", control(SERVER, chunk=32) + b"".join(bytes.fromhex(d["hex"]) for d in replay["diffs"])))
    for state in (replay["start"], replay["end"]):
        out.append(("snapshot", bytes.fromhex(state["hex"])))
    out.append(("snapshot", b"\x00"))
    return out


def name(data):
    return "vector-" + hashlib.sha1(data).hexdigest()[:16]


def main():
    check = sys.argv[1:] == ["--check"]
    wanted = {}
    for target, data in seeds():
        wanted.setdefault(target, {})[name(data)] = data
    stale = []
    for target, files in sorted(wanted.items()):
        directory = os.path.join(SEEDS, target)
        os.makedirs(directory, exist_ok=True)
        present = {f for f in os.listdir(directory) if f.startswith("vector-")}
        for f in sorted(present - set(files)):
            stale.append(os.path.join(target, f) + " (no longer generated)")
            if not check:
                os.remove(os.path.join(directory, f))
        for f, data in sorted(files.items()):
            path = os.path.join(directory, f)
            if f not in present:
                stale.append(os.path.join(target, f) + " (missing)")
                if not check:
                    with open(path, "wb") as out:
                        out.write(data)
    if check and stale:
        sys.exit("make-corpus.py: seeds are stale, run Tests/Fuzz/make-corpus.py:\n  " + "\n  ".join(stale))
    if not check:
        print(f"make-corpus.py: {sum(len(f) for f in wanted.values())} vector seeds in {SEEDS}")


if __name__ == "__main__":
    main()
