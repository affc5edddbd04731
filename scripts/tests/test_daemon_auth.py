"""End to end: snapcat against the real snapsyncd with authentication (PROTOCOL.md section 8.4,
Protocol/AUTH.md): --token in HELLO, 'auth' mid-session, LEFT, forbidden, unauthorized and
token_expired as snapcat shows them. Keys and tokens are made with the real binary
(`snapsyncd keygen`, `snapsyncd token`), and the example key and token of AUTH.md are checked
against the daemon too.

Needs the daemon's --auth-keys and --auth-leeway.
"""

import json
import os
import re
import subprocess
import tempfile
import unittest

from tests.support import REPO, Daemon, Interactive, daemon_path, run_snapcat, snapcat


def auth_md_example_key():
    """The JSON Web Key printed in Protocol/AUTH.md section 6."""
    with open(os.path.join(REPO, "Protocol", "AUTH.md"), encoding="utf-8") as f:
        text = f.read()
    block = text.split("<!-- BEGIN token example -->", 1)[1]
    return json.loads(re.search(r"```json\n(.*?)\n```", block, re.S).group(1))


class AuthTestCase(unittest.TestCase):
    LEEWAY = "30s"

    def setUp(self):
        self.dir = tempfile.TemporaryDirectory(prefix="snapcat-auth-")
        self.addCleanup(self.dir.cleanup)
        self.sessions = []
        self.start(self.keygen("keys.json"), "--auth-leeway", self.LEEWAY)

    def start(self, keys, *options):
        self.keys = keys
        self.daemon = Daemon("--auth-keys", keys, *options)
        self.addCleanup(self.daemon.stop)
        self.addCleanup(lambda: [s.kill() for s in self.sessions])

    def run_tool(self, *args):
        done = subprocess.run([daemon_path(), *args], capture_output=True, text=True, timeout=60)
        self.assertEqual(done.returncode, 0, "snapsyncd %s: %s" % (" ".join(args), done.stderr))
        return done.stdout

    def keygen(self, name, kid="k1"):
        path = os.path.join(self.dir.name, name)
        self.run_tool("keygen", "--alg", "HS256", "--kid", kid, "--out", path)
        return path

    def token(self, sub, *rooms, ttl="1h", keys=None, kid="k1"):
        args = ["token", "--keys", keys or self.keys, "--kid", kid, "--sub", sub, "--ttl", ttl]
        for room in rooms:
            args += ["--room", room]
        return self.run_tool(*args).strip()

    def snapcat(self, commands, *options):
        return run_snapcat(self.daemon.port, commands, *options)

    def interactive(self, token):
        s = Interactive(self.daemon.port, env={"SNAPSYNC_TOKEN": token})
        self.sessions.append(s)
        return s

    def explain(self, done):
        return "exit %d\nstdout:\n%s\nstderr:\n%s\ndaemon:\n%s" % (
            done.returncode, done.stdout, done.stderr, self.daemon.log())


class HelloTests(AuthTestCase):
    def assert_refused(self, token, reason):
        """HELLO refused: one ERROR unauthorized line, nothing else from the server, and the
        token in neither the output nor the daemon's log."""
        options = () if token is None else ("--token", token)
        done = self.snapcat("join board:1\nappend-sections board:1 main\n", *options)
        self.assertEqual(done.returncode, snapcat.EXIT_SERVER_ERROR, self.explain(done))
        lines = done.stdout.splitlines()
        self.assertEqual(len(lines), 1, self.explain(done))
        self.assertRegex(lines[0], r"^ERROR unauthorized \(11\): .*%s" % reason, self.explain(done))
        if token:
            self.assertNotIn(token, done.stdout + done.stderr + "\n".join(self.daemon.stderr_lines))

    def test_missing_malformed_and_badly_signed_tokens_are_refused(self):
        self.assert_refused(None, "no token")
        self.assert_refused("not-a-token", "malformed")
        other = self.keygen("other.json")          # same kid, another secret
        self.assert_refused(self.token("alice", "board:*=read", keys=other), "bad signature")
        self.assert_refused(self.token("alice", "board:*=read", kid="k2", keys=self.keygen("k2.json", "k2")),
                            "unknown key id")

    def test_rights_of_the_token_are_enforced(self):
        token = self.token("alice", "board:*=read,write", "todo=read")
        done = self.snapcat("join board:1\nappend-sections board:1 main\njoin todo\n"
                            "append-sections todo x\njoin other\nstats\n", "--token", token)
        self.assertEqual(done.returncode, 0, self.explain(done))
        out = done.stdout
        self.assertRegex(out, re.compile(r"^SNAPSHOT #1 board:1 ", re.M), self.explain(done))
        self.assertRegex(out, re.compile(r"^ACK #2 board:1 e=\d+ v=1$", re.M), self.explain(done))
        self.assertRegex(out, re.compile(r"^SNAPSHOT #3 todo ", re.M), self.explain(done))
        self.assertRegex(out, re.compile(r"^REJECT #4 todo forbidden \(48\): .*write.*todo", re.M),
                         self.explain(done))
        self.assertRegex(out, re.compile(r"^REJECT #5 other forbidden \(48\): .*read.*other", re.M),
                         self.explain(done))
        self.assertRegex(out, re.compile(r"^REJECT #6 forbidden \(48\): .*admin", re.M), self.explain(done))
        self.assertNotIn("DIFF todo", out)

    def test_stats_needs_admin_on_every_room(self):
        done = self.snapcat("stats\n", "--token", self.token("ops", "*=admin"))
        self.assertRegex(done.stdout, re.compile(r"^STATS_REPLY #1 .*connections=", re.M), self.explain(done))
        done = self.snapcat("stats\n", "--token", self.token("ops", "board:*=admin"))
        self.assertRegex(done.stdout, re.compile(r"^REJECT #1 forbidden \(48\): ", re.M), self.explain(done))


class ExampleKeyTests(unittest.TestCase):
    """The key of Protocol/AUTH.md section 6 is published: the daemon refuses to start with it.
    (Its token is checked against the daemon's verifier in SnapSyncAuthTests, and against
    Python's HMAC by Protocol/vectors/generate.py --check.)"""

    def test_the_daemon_refuses_the_published_example_key(self):
        with tempfile.TemporaryDirectory(prefix="snapcat-auth-") as directory:
            keys = os.path.join(directory, "example.json")
            with open(keys, "w") as f:
                json.dump({"keys": [auth_md_example_key()]}, f)
            with self.assertRaises(AssertionError) as refused:
                Daemon("--auth-keys", keys)
            self.assertIn('keys[0] (kid \\"example\\"): k: it is a published example key', str(refused.exception))


class LiveSessionTests(AuthTestCase):
    def test_auth_replaces_the_grants_and_leaves_rooms_no_longer_readable(self):
        a = self.interactive(self.token("alice", "board:*=read,write"))
        a.send("join board:1")
        a.expect(r"^SNAPSHOT #1 board:1 ")
        a.send("join board:2")
        a.expect(r"^SNAPSHOT #2 board:2 ")
        a.send("auth " + self.token("alice", "board:1=read,write"))
        left = a.expect(r"^LEFT board:2 forbidden \(48\): ")
        ack = a.expect(r"^ACK #3 e=0 v=0 \(AUTH accepted\)$")
        self.assertLess(a.seen.index(left), a.seen.index(ack), "LEFT comes before the ACK of AUTH")
        self.assertNotIn("LEFT board:1", "\n".join(a.seen))
        # Another writer changes board:2: nothing of it reaches a, which still follows board:1.
        b = self.interactive(self.token("bob", "board:*=read,write"))
        b.send("append-sections board:2 x")
        b.expect(r"^ACK #1 board:2 e=\d+ v=1$")
        a.send("append-sections board:1 y")
        a.expect(r"^DIFF board:1 e=\d+ v=1 append_sections \[y\]$")
        self.assertNotIn("DIFF board:2", "\n".join(a.seen))
        # The new grants hold for what follows.
        a.send("append-sections board:2 z")
        a.expect(r"^REJECT #5 board:2 forbidden \(48\): ")
        a.send("join board:2")
        a.expect(r"^REJECT #6 board:2 forbidden \(48\): ")
        self.assertEqual(a.close(), 0)
        self.assertEqual(b.close(), 0)

    def test_auth_for_another_subject_ends_the_session(self):
        a = self.interactive(self.token("alice", "board:*=read"))
        a.send("join board:1")
        a.expect(r"^SNAPSHOT #1 board:1 ")
        a.send("auth " + self.token("mallory", "board:*=read"))
        a.expect(r"^ERROR unauthorized \(11\): ")
        self.assertEqual(a.proc.wait(timeout=15), snapcat.EXIT_SERVER_ERROR)


class ExpiryTests(AuthTestCase):
    LEEWAY = "1s"

    def test_a_session_whose_token_expires_gets_token_expired(self):
        # The daemon's clock is real: the HELLO and the JOIN must come before the token expires.
        # A machine too loaded for that makes the daemon refuse the HELLO with token_expired; then
        # the test starts again with a token that lives twice as long. Slower, never wrong.
        ttl = 2
        while True:
            a = self.interactive(self.token("alice", "board:*=read", ttl="%ds" % ttl))
            a.send("join board:1")
            line = a.expect(r"^(SNAPSHOT #1 board:1 |ERROR )", timeout=120)
            if line.startswith("SNAPSHOT"):
                break
            self.assertRegex(line, r"^ERROR token_expired \(13\): ")
            self.assertLess(ttl, 512, "every token expired before its JOIN was answered")
            a.close(timeout=60)
            ttl *= 2
        a.expect(r"^ERROR token_expired \(13\): ", timeout=ttl + 120)
        self.assertEqual(a.proc.wait(timeout=60), snapcat.EXIT_SERVER_ERROR)


if __name__ == "__main__":
    unittest.main()
