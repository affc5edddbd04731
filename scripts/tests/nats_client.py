"""A tiny, synchronous NATS client (the text protocol, with headers) for the cluster tests.

Just enough for JetStream's request/reply API and publishes with headers: CONNECT, SUB, HPUB,
PING/PONG, and reading MSG/HMSG replies. One request at a time; not a general client.
https://docs.nats.io/reference/reference-protocols/nats-protocol
"""

import json
import socket
import time


class NATSError(Exception):
    pass


class Timeout(NATSError):
    pass


class Reply:
    """A reply: its headers (a dict, and the status line's code if any) and payload."""

    def __init__(self, status, headers, payload):
        self.status = status            # e.g. 503 (no responders), None for a plain reply
        self.headers = headers
        self.payload = payload

    def json(self):
        return json.loads(self.payload)


class Client:
    def __init__(self, host, port, timeout=5.0):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.buf = b""
        self.inbox = "_INBOX.snapsync-test.%d" % id(self)
        self.next_id = 0
        info = self._line()
        if not info.startswith(b"INFO "):
            raise NATSError("expected INFO, got %r" % info)
        connect = {"verbose": False, "pedantic": False, "headers": True, "no_responders": True,
                   "lang": "python-test", "version": "0", "protocol": 1}
        self._send(b"CONNECT " + json.dumps(connect).encode() + b"\r\n")
        self._send(b"SUB %s.* 1\r\n" % self.inbox.encode())
        self._send(b"PING\r\n")
        while True:
            line = self._line()
            if line == b"PONG":
                break
            if line.startswith(b"-ERR"):
                raise NATSError(line.decode())

    def close(self):
        self.sock.close()

    def _send(self, data):
        self.sock.sendall(data)

    def _fill(self):
        chunk = self.sock.recv(65536)
        if not chunk:
            raise NATSError("connection closed by the server")
        self.buf += chunk

    def _line(self):
        while b"\r\n" not in self.buf:
            self._fill()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _bytes(self, n):
        while len(self.buf) < n + 2:
            self._fill()
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def request(self, subject, payload=b"", headers=None, timeout=5.0):
        """Publishes with a fresh reply subject and returns the first reply, or raises Timeout."""
        self.next_id += 1
        reply = "%s.%d" % (self.inbox, self.next_id)
        if isinstance(payload, str):
            payload = payload.encode()
        if headers:
            head = b"NATS/1.0\r\n" + b"".join(b"%s: %s\r\n" % (k.encode(), str(v).encode())
                                              for k, v in headers.items()) + b"\r\n"
            self._send(b"HPUB %s %s %d %d\r\n" % (subject.encode(), reply.encode(), len(head),
                                                  len(head) + len(payload)) + head + payload + b"\r\n")
        else:
            self._send(b"PUB %s %s %d\r\n" % (subject.encode(), reply.encode(), len(payload))
                       + payload + b"\r\n")
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise Timeout("no reply to %s within %g s" % (subject, timeout))
            self.sock.settimeout(left)
            try:
                line = self._line()
            except socket.timeout:
                raise Timeout("no reply to %s within %g s" % (subject, timeout)) from None
            if line == b"PING":
                self._send(b"PONG\r\n")
                continue
            if line.startswith(b"-ERR"):
                raise NATSError(line.decode())
            if line.startswith(b"MSG "):
                parts = line.split()
                data = self._bytes(int(parts[-1]))
                if parts[1].decode() == reply:
                    return Reply(None, {}, data)
            elif line.startswith(b"HMSG "):
                parts = line.split()
                head_len, total = int(parts[-2]), int(parts[-1])
                data = self._bytes(total)
                if parts[1].decode() != reply:
                    continue
                head, body = data[:head_len], data[head_len:]
                lines = head.decode().split("\r\n")
                status = int(lines[0].split()[1]) if len(lines[0].split()) > 1 else None
                headers = dict(l.split(": ", 1) for l in lines[1:] if ": " in l)
                return Reply(status, headers, body)
            # INFO updates, +OK, PONG: nothing to do.

    def js_api(self, verb, body=None, timeout=5.0):
        """A JetStream API call ($JS.API.<verb>), its JSON answer; raises on an API error."""
        reply = self.request("$JS.API." + verb, json.dumps(body or {}), timeout=timeout)
        if reply.status is not None:
            raise NATSError("$JS.API.%s: status %d" % (verb, reply.status))
        answer = reply.json()
        if "error" in answer:
            raise NATSError("$JS.API.%s: %s" % (verb, answer["error"]))
        return answer
