#!/usr/bin/env python3
"""AUTH flood (docs/benchmarks.md, "AUTH flood"): one authenticated connection pipelines N AUTH
frames in one sendall while a bystander writes to a room in a closed loop; prints how long the
flood took to be answered and the bystander's write latencies meanwhile.

Usage: Benchmarks/scripts/auth-flood.py SNAPSYNCD held|fresh N
  held   every AUTH carries the token the connection holds
  fresh  AUTHs carry 200 distinct new tokens, in turn
"""
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import snapcat_wire as wire  # noqa: E402

binary, mode, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
work = tempfile.mkdtemp()
keys = os.path.join(work, "keys.json")
subprocess.run([binary, "keygen", "--alg", "ES256", "--kid", "k1", "--out", keys], check=True, capture_output=True)


def token(ttl="1h"):
    return subprocess.run([binary, "token", "--keys", keys, "--kid", "k1", "--sub", "alice", "--ttl", ttl,
                           "--room", "*=read,write"], check=True, capture_output=True, text=True).stdout.strip().encode()


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
        return wire.decode_frame(self.frames.pop(0), wire.SERVER_TO_CLIENT)

    def hello(self, credentials):
        self.send({"type": "HELLO", "magic": wire.MAGIC, "versions": [wire.PROTOCOL_VERSION], "client_name": b"flood",
                   "credentials": credentials})
        assert self.receive()["type"] == "WELCOME"


daemon = subprocess.Popen([binary, "--host", "127.0.0.1", "--port", "0", "--data-dir", os.path.join(work, "data"),
                           "--auth-keys", keys, "--fsync", "no"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
port = None
for line in daemon.stdout:
    if "listening on " in line:
        port = int(line.split("listening on ")[1].split()[0].rsplit(":", 1)[1])
        break
threading.Thread(target=lambda: [None for _ in daemon.stdout], daemon=True).start()

held = token()
tokens = [held] * count if mode == "held" else [token("%ds" % (3600 + i)) for i in range(200)] * (count // 200)
bystander, flood = Client(port), Client(port)
bystander.hello(held)
flood.hello(held)


def write(n):
    bystander.send({"type": "MUTATE", "request_id": n, "room": b"r", "expected_version": None, "write_id": b"",
                    "ops": [{"op": "append_sections", "elements": [{"id": b"s%d" % n, "payload": b""}]}]})
    answer = bystander.receive()
    assert answer["type"] == "ACK", answer


for n in range(1, 50):
    write(n)
frames = b"".join(wire.encode_frame({"type": "AUTH", "request_id": 1000 + k, "credentials": t}) for k, t in enumerate(tokens))
answered = threading.Event()
threading.Thread(target=lambda: ([flood.receive() for _ in tokens], answered.set()), daemon=True).start()
latencies = []
start = time.perf_counter()
threading.Thread(target=lambda: flood.sock.sendall(frames), daemon=True).start()
n = 100
while not answered.is_set():
    began = time.perf_counter()
    write(n)
    latencies.append((time.perf_counter() - began) * 1000)
    n += 1
elapsed = (time.perf_counter() - start) * 1000
latencies.sort()
print("%s: %d AUTHs (%d bytes) answered in %.0f ms; the bystander's %d writes meanwhile: p50 %.2f ms, max %.1f ms"
      % (mode, len(tokens), len(frames), elapsed, len(latencies), latencies[len(latencies) // 2], latencies[-1]))
daemon.terminate()
