#!/usr/bin/env python3
"""Request floods (docs/benchmarks.md, "Request floods"): one authenticated connection pipelines N
requests of one kind in one sendall while a bystander writes to a room in a closed loop; prints
how long the flood took to be answered and the bystander's write latencies meanwhile.

Usage: Benchmarks/scripts/request-flood.py SNAPSYNCD KIND N
  auth-held    AUTH with the token the connection holds
  auth-fresh   AUTH with 200 distinct new tokens, in turn
  ping         PING
  stats        STATS
  join-leave   JOIN and LEAVE of a room of 10 items, in turn
  verify       MUTATE and VERIFY of a room of 10,000 items (about 0.6 MB), in turn: every VERIFY
               is at a new version, so the daemon hashes the room for it
  mutate       MUTATE of the flood's own room (a client pipelining writes)
  member-mutate  the same, the flood having joined its room: each write's DIFF comes back to
               it before its ACK
"""
import multiprocessing
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import snapcat_wire as wire  # noqa: E402

binary, kind, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
work = tempfile.mkdtemp()
keys = os.path.join(work, "keys.json")
subprocess.run([binary, "keygen", "--alg", "ES256", "--kid", "k1", "--out", keys], check=True, capture_output=True)


def token(ttl="1h"):
    return subprocess.run([binary, "token", "--keys", keys, "--kid", "k1", "--sub", "alice", "--ttl", ttl,
                           "--room", "*=read,write,admin"], check=True, capture_output=True, text=True).stdout.strip().encode()


class Client:
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.splitter = wire.FrameSplitter(max_frame_bytes=1 << 24)
        self.frames = []

    def send(self, msg):
        self.sock.sendall(wire.encode_frame(msg))

    def receive(self):
        while not self.frames:
            data = self.sock.recv(1 << 16)
            if not data:
                raise SystemExit("the daemon closed the connection")
            self.splitter.feed(data)
            self.frames.extend(self.splitter.frames())
        return wire.decode_frame(self.frames.pop(0), wire.SERVER_TO_CLIENT, version=3)

    def hello(self, credentials):
        self.send({"type": "HELLO", "magic": wire.MAGIC, "versions": [3], "client_name": b"flood",
                   "credentials": credentials})
        assert self.receive()["type"] == "WELCOME"

    def request(self, msg, expect):
        self.send(msg)
        while True:
            answer = self.receive()
            if answer["type"] in ("ACK", "REJECT", "SNAPSHOT", "ERROR", "STATS_REPLY"):
                assert answer["type"] == expect, answer
                return answer


def mutate(request_id, room, ops):
    return {"type": "MUTATE", "request_id": request_id, "room": room, "expected_version": None, "write_id": b"", "ops": ops}


def items(section, first, n, payload=b""):
    return [{"op": "append_items", "section": section,
             "elements": [{"id": b"i%07d" % k, "payload": payload} for k in range(first, first + n)]}]




def bystander_loop(port, credentials, stop, results):
    """Writes to room "r" in a closed loop, in a process of its own (no lock shared with the
    flood's reader), until told to stop; sends back its latencies in ms."""
    client = Client(port)
    client.hello(credentials)
    latencies, n = [], 1
    while not stop.is_set():
        began = time.perf_counter()
        client.request(mutate(n, b"r", [{"op": "update_sections", "elements": [{"id": b"s", "payload": b"%d" % n}]}]
                              if n > 1 else [{"op": "append_sections", "elements": [{"id": b"s", "payload": b""}]}]),
                       "ACK")
        latencies.append((time.perf_counter() - began) * 1000)
        n += 1
    results.send(latencies[20:])


def count_answers(sock, expected):
    """Reads the flood's answers by their length prefixes only (decoding them in Python would
    be what is measured): every frame but a DIFF answers one request."""
    buffer, answers = b"", 0
    while answers < expected:
        data = sock.recv(1 << 20)
        if not data:
            raise SystemExit("the daemon closed the flood's connection after %d answers: %r" % (answers, buffer[-200:]))
        buffer += data
        offset = 0
        while len(buffer) - offset >= 5:
            length = int.from_bytes(buffer[offset:offset + 4], "big")
            if len(buffer) - offset < 4 + length:
                break
            if buffer[offset + 4] != 0x22:
                answers += 1
            offset += 4 + length
        buffer = buffer[offset:]


daemon = subprocess.Popen([binary, "--host", "127.0.0.1", "--port", "0", "--data-dir", os.path.join(work, "data"),
                           "--auth-keys", keys, "--fsync", "no"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
try:
    port = None
    for line in daemon.stdout:
        if "listening on " in line:
            port = int(line.split("listening on ")[1].split()[0].rsplit(":", 1)[1])
            break
    threading.Thread(target=lambda: [None for _ in daemon.stdout], daemon=True).start()

    held = token()
    flood = Client(port)
    flood.hello(held)

    if kind == "auth-held":
        frames = [{"type": "AUTH", "request_id": 1000 + k, "credentials": held} for k in range(count)]
    elif kind == "auth-fresh":
        tokens = [token("%ds" % (3600 + i)) for i in range(200)]
        frames = [{"type": "AUTH", "request_id": 1000 + k, "credentials": tokens[k % 200]} for k in range(count)]
    elif kind == "ping":
        frames = [{"type": "PING", "nonce": k} for k in range(count)]
    elif kind == "stats":
        frames = [{"type": "STATS", "request_id": 1000 + k} for k in range(count)]
    elif kind == "join-leave":
        flood.request(mutate(1, b"small", [{"op": "append_sections", "elements": [{"id": b"s", "payload": b""}]}]
                             + items(b"s", 0, 10, b"x" * 32)), "ACK")
        frames = [{"type": "JOIN", "request_id": 1000 + k, "room": b"small", "resume": None} if k % 2 == 0 else
                  {"type": "LEAVE", "request_id": 1000 + k, "room": b"small"} for k in range(count)]
    elif kind == "verify":
        flood.request(mutate(1, b"big", [{"op": "append_sections", "elements": [{"id": b"s", "payload": b""}]}]), "ACK")
        for first in range(0, 10_000, 2_000):
            flood.request(mutate(2 + first, b"big", items(b"s", first, 2_000, b"x" * 40)), "ACK")
        flood.request({"type": "JOIN", "request_id": 99, "room": b"big", "resume": None}, "SNAPSHOT")
        frames = [mutate(1000 + k, b"big", [{"op": "update_items", "kind": "reload",
                                             "elements": [{"id": b"i%07d" % (k % 10_000), "payload": b"y%d" % k}]}])
                  if k % 2 == 0 else {"type": "VERIFY", "request_id": 1000 + k, "room": b"big"} for k in range(count)]
    elif kind == "mutate":
        flood.request(mutate(1, b"own", [{"op": "append_sections", "elements": [{"id": b"s", "payload": b""}]}]), "ACK")
        frames = [mutate(1000 + k, b"own", items(b"s", k, 1)) for k in range(count)]
    elif kind == "member-mutate":
        flood.request(mutate(1, b"own", [{"op": "append_sections", "elements": [{"id": b"s", "payload": b""}]}]), "ACK")
        flood.request({"type": "JOIN", "request_id": 2, "room": b"own", "resume": None}, "SNAPSHOT")
        frames = [mutate(1000 + k, b"own", items(b"s", k, 1)) for k in range(count)]
    else:
        raise SystemExit("unknown kind %r (see --help)" % kind)
    data = b"".join(wire.encode_frame(f) for f in frames)

    stop = multiprocessing.Event()
    receiving, sending = multiprocessing.Pipe(duplex=False)
    bystander = multiprocessing.Process(target=bystander_loop, args=(port, held, stop, sending))
    bystander.start()
    time.sleep(0.5)  # the bystander's baseline: its first writes are dropped, the rest kept
    start = time.perf_counter()
    threading.Thread(target=lambda: flood.sock.sendall(data), daemon=True).start()
    count_answers(flood.sock, len(frames))
    elapsed = (time.perf_counter() - start) * 1000
    stop.set()
    latencies = sorted(receiving.recv())
    bystander.join()
    # The daemon's own view, free of the clients' scheduling: its longest loop pass.
    stats = {(entry["name"].decode() if isinstance(entry["name"], bytes) else entry["name"]): entry["value"] for entry in
             flood.request({"type": "STATS", "request_id": 7}, "STATS_REPLY")["stats"]}
    print("%s: %d frames (%d bytes) answered in %.0f ms; the bystander's %d writes: p50 %.2f ms, p99 %.2f ms, "
          "max %.1f ms; the daemon's longest pass %.1f ms, input yields %d"
          % (kind, len(frames), len(data), elapsed, len(latencies), latencies[len(latencies) // 2],
             latencies[min(len(latencies) - 1, len(latencies) * 99 // 100)], latencies[-1],
             stats["loop_pass_max_us"] / 1000, stats.get("input_yields", 0)))
finally:
    daemon.terminate()
    daemon.wait()
