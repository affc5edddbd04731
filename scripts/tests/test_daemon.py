"""End to end: snapcat in a pipe against the real snapsyncd on an ephemeral loopback port.

The daemon comes from $SNAPSYNCD (scripts/test sets it) or .build/debug/snapsyncd.
"""

import hashlib
import json
import re
import socket
import unittest

from tests.support import Daemon, Interactive, example_token, run_snapcat, sent_frames, snapcat, wire


class DaemonTestCase(unittest.TestCase):
    def setUp(self):
        self.daemon = Daemon()
        self.sessions = []

    def tearDown(self):
        for s in self.sessions:
            s.kill()
        self.daemon.stop()

    def snapcat(self, commands, *options, timeout=30, env=None):
        return run_snapcat(self.daemon.port, commands, *options, timeout=timeout, env=env)

    def interactive(self, *options):
        s = Interactive(self.daemon.port, *options)
        self.sessions.append(s)
        return s

    def explain(self, done):
        return "exit %d\nstdout:\n%s\nstderr:\n%s\ndaemon:\n%s" % (
            done.returncode, done.stdout, done.stderr, self.daemon.log())


class SessionTests(DaemonTestCase):
    def test_pipe_session_prints_every_reply(self):
        done = self.snapcat("join lobby\nappend-sections lobby main\n"
                            "append-items lobby to main a=hello b\nshow lobby\n")
        self.assertEqual(done.returncode, 0, self.explain(done))
        lines = done.stdout.splitlines()
        self.assertRegex(lines[0], r"^WELCOME v=4 session=\d+ server=")
        m = re.match(r"^SNAPSHOT #1 lobby e=(\d+) v=0 initial digest=([0-9a-f]{16}) 0 sections, 0 items$",
                     lines[1])
        self.assertTrue(m, self.explain(done))
        epoch = m.group(1)
        self.assertEqual(m.group(2), hashlib.sha256(b"\x00").hexdigest()[:16])
        self.assertEqual(lines[2:6], [
            "DIFF lobby e=%s v=1 append_sections [main]" % epoch,
            "ACK #2 lobby e=%s v=1" % epoch,
            'DIFF lobby e=%s v=2 append_items to main [a="hello", b]' % epoch,
            "ACK #3 lobby e=%s v=2" % epoch], self.explain(done))
        expected = wire.Snapshot([{"id": b"main", "payload": b"", "items": [
            {"id": b"a", "payload": b"hello"}, {"id": b"b", "payload": b""}]}])
        self.assertEqual(lines[6:], [
            "<lobby epoch=%s version=2; 1 sections, 2 items; sha256=%s>" % (epoch, expected.digest().hex()),
            "└─ section main", '   ├─ item a="hello"', "   └─ item b"], self.explain(done))

    def test_drop_ends_the_room_for_its_members_and_the_name_starts_over(self):
        a, b = self.interactive(), self.interactive()
        a.send("join doc")
        a.expect(r"^SNAPSHOT #1 doc .* initial")
        a.send("append-sections doc main")
        epoch = re.match(r"^ACK #2 doc e=(\d+) v=1$", a.expect(r"^ACK #2 ")).group(1)
        b.send("ttl doc 3600")
        b.expect(r"^ACK #1 doc e=%s v=1$" % epoch)
        b.send("drop doc")
        a.expect(r"^LEFT doc room_deleted \(49\): room doc was deleted$")
        b.expect(r"^ACK #2 doc e=%s v=1$" % epoch)
        a.send("join doc since %s:1" % epoch)
        line = a.expect(r"^SNAPSHOT #3 doc ")
        self.assertRegex(line, r" v=0 resync ")
        self.assertNotIn("e=%s " % epoch, line)

    def test_two_sessions_see_each_others_edits(self):
        a, b = self.interactive(), self.interactive()
        a.send("join lobby")
        a.expect(r"^SNAPSHOT #1 lobby .* initial")
        b.send("join lobby")
        b.expect(r"^SNAPSHOT #1 lobby .* v=0 initial")
        a.send("append-sections lobby main side")
        b.expect(r"^DIFF lobby e=\d+ v=1 append_sections \[main, side\]$")
        a.expect(r"^ACK #2 lobby e=\d+ v=1$")
        b.send("append-items lobby to side x='from b' y")
        a.expect(r'^DIFF lobby e=\d+ v=2 append_items to side \[x="from b", y\]$')
        b.expect(r"^ACK #2 lobby e=\d+ v=2$")
        a.send("move-item lobby y before x")
        b.expect(r"^DIFF lobby e=\d+ v=3 move_item y before x$")
        a.send("show lobby")
        b.send("show lobby")
        tree_a = [a.expect(r"^<lobby ")] + [a.expect("") for _ in range(4)]
        tree_b = [b.expect(r"^<lobby ")] + [b.expect("") for _ in range(4)]
        self.assertEqual(tree_a, tree_b)
        self.assertIn("version=3; 2 sections, 2 items;", tree_a[0])
        self.assertEqual(tree_a[1:], ["├─ section main", "└─ section side", "   ├─ item y",
                                      '   └─ item x="from b"'])
        self.assertEqual(a.close(), 0)
        self.assertEqual(b.close(), 0)

    def test_append_to_a_missing_section_is_rejected_with_the_identifier(self):
        done = self.snapcat("join lobby\nappend-sections lobby main\n"
                            "append-items lobby to missing x\nshow lobby\n")
        self.assertEqual(done.returncode, 0, self.explain(done))
        self.assertRegex(done.stdout, re.compile(
            r"^REJECT #3 lobby section_not_found \(22\) op=0 id=missing: .+$", re.M))
        self.assertNotIn("DIFF lobby e=", done.stdout.split("REJECT")[1])
        self.assertRegex(done.stdout, r"version=1; 1 sections, 0 items;")

    def test_a_batch_is_atomic(self):
        done = self.snapcat("join lobby\nbegin lobby\nappend-sections lobby main\n"
                            "append-items lobby to main a\ndelete-items lobby ghost\ncommit\n"
                            "show lobby\n")
        self.assertEqual(done.returncode, 0, self.explain(done))
        self.assertRegex(done.stdout, re.compile(
            r"^REJECT #2 lobby item_not_found \(23\) op=2 id=ghost: ", re.M), self.explain(done))
        self.assertNotIn("DIFF", done.stdout)
        self.assertRegex(done.stdout, r"version=0; 0 sections, 0 items;")
        done = self.snapcat("join lobby\nbegin lobby\nappend-sections lobby main\n"
                            "append-items lobby a b\nmove-item lobby b before a\ncommit\n")
        self.assertRegex(done.stdout, re.compile(
            r"^DIFF lobby e=\d+ v=1 append_sections \[main\]; append_items \[a, b\]; "
            r"move_item b before a$", re.M), self.explain(done))

    def test_replace_then_join_gets_the_same_snapshot_and_digest(self):
        doc = wire.snapshot_to_json([
            {"id": b"main", "payload": b"title", "items": [{"id": b"a", "payload": b"1"}]},
            {"id": b"\xff", "payload": b"", "items": [{"id": b"b", "payload": b"\x00"}]}])
        done = self.snapcat("replace room2 %s\n" % json.dumps(doc))
        self.assertRegex(done.stdout, re.compile(r"^ACK #1 room2 e=\d+ v=1$", re.M), self.explain(done))
        done = self.snapcat("join room2\n", "--json")
        frames = [json.loads(l) for l in done.stdout.splitlines()]
        snap_frame = [f for f in frames if f["type"] == "SNAPSHOT"][0]
        self.assertEqual(snap_frame["snapshot"], doc)
        native = wire.snapshot_from_json(doc)
        self.assertEqual(wire.message_from_json(snap_frame)["digest"],
                         hashlib.sha256(wire.encode_snapshot(native)).digest())

    def test_replace_breaking_a_rule_is_rejected_and_the_connection_stays(self):
        done = self.snapcat('replace room3 [{"id":"s","items":[{"id":"a"}]},{"id":"t","items":[{"id":"a"}]}]\n'
                            "ping\n")
        self.assertEqual(done.returncode, 0, self.explain(done))
        self.assertRegex(done.stdout, re.compile(r"^REJECT #1 room3 duplicate_item \(21\) id=a: ", re.M),
                         self.explain(done))
        self.assertIn("PONG nonce=2", done.stdout)

    def test_resume_from_the_local_replica(self):
        s = self.interactive()
        s.send("join lobby")
        s.expect(r"^SNAPSHOT #1 lobby")
        s.send("append-sections lobby main")
        s.expect(r"^ACK #2 lobby")
        s.send("leave lobby")
        s.expect(r"^ACK #3 lobby")
        other = self.snapcat("append-items lobby to main a\n")
        self.assertRegex(other.stdout, re.compile(r"^ACK #1 lobby e=\d+ v=2$", re.M), self.explain(other))
        s.send("join lobby resume")
        s.expect(r"^CATCHUP #4 lobby e=\d+ v=1\.\.2$")
        s.expect(r"^DIFF lobby e=\d+ v=2 append_items to main \[a\]$")
        s.send("show lobby")
        head = s.expect(r"^<lobby ")
        self.assertIn("version=2; 1 sections, 1 items;", head)
        self.assertNotIn("not in sync", head)
        self.assertEqual(s.close(), 0)

    def test_json_output_has_the_protocol_field_names(self):
        done = self.snapcat("join lobby\nappend-sections lobby main=0xff\nappend-items lobby to nope x\n"
                            "stats\nping\n", "--json")
        self.assertEqual(done.returncode, 0, self.explain(done))
        frames = [json.loads(l) for l in done.stdout.splitlines()]
        types = [f["type"] for f in frames]
        self.assertEqual(types, ["WELCOME", "SNAPSHOT", "DIFF", "ACK", "REJECT", "STATS_REPLY", "PONG"],
                         self.explain(done))
        welcome, snapshot, diff, ack, reject, stats, pong = frames
        self.assertEqual(set(welcome), {"type", "version", "session_id", "server_name", "limits"})
        self.assertEqual(welcome["version"], 4)
        self.assertEqual(set(snapshot), {"type", "request_id", "room", "epoch", "version", "reason",
                                         "digest", "chain", "snapshot"})
        self.assertEqual((snapshot["request_id"], snapshot["room"], snapshot["version"]), (1, "lobby", 0))
        self.assertEqual(set(diff), {"type", "room", "epoch", "version", "ops", "chain"})
        # The room's chain (PROTOCOL.md section 9), computed here independently: a new room's
        # chain(e, 0), then the hash of it and the DIFF as version 2 frames it.
        s, d = wire.message_from_json(snapshot), wire.message_from_json(diff)
        self.assertEqual(s["chain"], wire.chain_start(s["epoch"]))
        unchained = wire.encode_frame({k: v for k, v in d.items() if k != "chain"})
        self.assertEqual(d["chain"], wire.chain_next(s["chain"], unchained))
        self.assertEqual(wire.message_from_json(diff)["ops"], [
            {"op": "append_sections", "elements": [{"id": b"main", "payload": b"\xff"}]}])
        self.assertEqual(ack, {"type": "ACK", "request_id": 2, "epoch": snapshot["epoch"], "version": 1})
        self.assertEqual(set(reject), {"type", "request_id", "code", "op_index", "identifier", "message"})
        r = wire.message_from_json(reject)
        self.assertEqual((r["request_id"], r["code"], r["op_index"], r["identifier"]),
                         (3, wire.ERROR_NAMES["section_not_found"], 0, b"nope"))
        self.assertEqual(stats["request_id"], 4)
        self.assertIsInstance(stats["stats"], list)
        self.assertEqual(pong, {"type": "PONG", "nonce": 5})


class LivenessTests(unittest.TestCase):
    def test_snapcat_answers_the_servers_ping(self):
        # Quiet for several idle timeouts: the server PINGs, snapcat PONGs, the connection lives.
        # snapcat must answer within an idle timeout, which a loaded machine can miss (the daemon
        # then rightly closes it): the test starts again with timeouts four times as long. A
        # snapcat that does not answer is closed at every one.
        explains = []
        for idle_ms in (300, 1200, 4800):
            daemon = Daemon("--idle-timeout", "%dms" % idle_ms)
            try:
                done = run_snapcat(daemon.port, "sleep %g\nstats\n" % (5 * idle_ms / 1000), timeout=120)
                explain = "stdout:\n%s\nstderr:\n%s\ndaemon:\n%s" % (done.stdout, done.stderr, daemon.log())
            finally:
                daemon.stop()
            if done.returncode == 0:
                self.assertRegex(done.stdout, re.compile(r"^PING nonce=\d+$", re.M), explain)
                self.assertRegex(done.stdout, re.compile(r"^STATS_REPLY #1 ", re.M), explain)
                self.assertNotIn("ERROR", done.stdout)
                return
            explains.append(explain)
        self.fail("closed at every idle timeout:\n" + "\n".join(explains))


class ErrorTests(DaemonTestCase):
    def assert_error(self, commands, name, *options):
        done = self.snapcat(commands, *options)
        self.assertEqual(done.returncode, snapcat.EXIT_SERVER_ERROR, self.explain(done))
        self.assertRegex(done.stdout, re.compile(
            r"^ERROR %s \(%d\): " % (name, wire.ERROR_NAMES[name]), re.M), self.explain(done))
        return done

    def test_raw_garbage_gets_an_error(self):
        self.assert_error("raw 00000001ff\n", "unknown_message_type")
        self.assert_error("raw 00000003 04 8080\n", "malformed_frame")        # truncated varint
        self.assert_error("raw 00000000\n", "malformed_frame")                # L = 0
        self.assert_error("raw 00000003 04 0000\n", "malformed_frame")        # a byte left over
        self.assert_error("raw 7fffffff\n", "frame_too_large")

    def test_handshake_errors(self):
        self.assert_error("raw 0000000204 01\n", "handshake_required", "--no-hello")
        self.assert_error("raw 00000009 01 534e4151 01 01 00 00\n", "bad_magic",
                          "--no-hello")
        self.assert_error("raw 00000009 01 534e4150 01 09 00 00\n",
                          "unsupported_version", "--no-hello")
        hello = wire.encode_frame({"type": "HELLO", "magic": wire.MAGIC, "versions": [1],
                                   "client_name": b"again", "credentials": b""}).hex()
        self.assert_error("raw %s\n" % hello, "handshake_required")

    def test_daemon_shutdown_reaches_snapcat_as_an_error(self):
        s = self.interactive()
        s.send("join lobby")
        s.expect(r"^SNAPSHOT #1 lobby")
        self.daemon.stop()                      # SIGTERM: a clean shutdown
        s.expect(r"^ERROR shutting_down \(10\): ")
        self.assertEqual(s.proc.wait(timeout=15), snapcat.EXIT_SERVER_ERROR)

    def test_hex_dump_and_mistyped_commands_send_nothing(self):
        done = self.snapcat("frobnicate lobby\nappend-items lobby\nping\n", "--hex")
        self.assertEqual(done.returncode, snapcat.EXIT_USAGE, self.explain(done))
        self.assertIn("unknown command 'frobnicate'", done.stderr)
        self.assertIn("usage: append-items ROOM [to S] ITEM[=PAYLOAD]...", done.stderr)
        sent = [l for l in done.stdout.splitlines() if l.startswith("> ")]
        self.assertEqual(len(sent), 2, self.explain(done))            # HELLO and PING only
        self.assertEqual(sent[0].split()[2], "01")                  # HELLO
        self.assertTrue(sent[0].split()[3].startswith("534e4150"))
        self.assertEqual(sent[1], "> 00000002 04 01")
        self.assertIn("PONG nonce=1", done.stdout)
        received = [l for l in done.stdout.splitlines() if l.startswith("< ")]
        self.assertTrue(received[0].startswith("< ") and received[0].split()[2] == "02")


class TokenTests(DaemonTestCase):
    """--token, SNAPSYNC_TOKEN and 'auth' against a daemon without authentication, which ignores
    HELLO's credentials and acknowledges AUTH (PROTOCOL.md section 8.4). The same against a daemon
    that authenticates: test_daemon_auth.py."""

    def hello_credentials(self, *options, env=None):
        done = self.snapcat("ping\n", "--hex", *options, env=env)
        self.assertEqual(done.returncode, 0, self.explain(done))
        self.assertRegex(done.stdout, re.compile(r"^WELCOME ", re.M), self.explain(done))
        hello = sent_frames(done.stdout)[0]
        self.assertEqual(hello["type"], "HELLO")
        return hello["credentials"]

    def test_the_token_goes_in_hellos_credentials(self):
        token = example_token()
        self.assertEqual(self.hello_credentials(), b"")
        self.assertEqual(self.hello_credentials("--token", token), token.encode())
        self.assertEqual(self.hello_credentials(env={"SNAPSYNC_TOKEN": token + "\n"}), token.encode())
        self.assertEqual(self.hello_credentials("--token", "x.y.z", env={"SNAPSYNC_TOKEN": token}), b"x.y.z")

    def test_auth_mid_session_is_acknowledged_without_authentication(self):
        token = example_token()
        done = self.snapcat("join lobby\nauth %s\nappend-sections lobby main\n" % token, "--hex")
        self.assertEqual(done.returncode, 0, self.explain(done))
        auth = [f for f in sent_frames(done.stdout) if f["type"] == "AUTH"]
        self.assertEqual(auth, [{"type": "AUTH", "request_id": 2, "credentials": token.encode()}])
        self.assertRegex(done.stdout, re.compile(r"^ACK #2 e=0 v=0 \(AUTH accepted\)$", re.M), self.explain(done))
        self.assertRegex(done.stdout, re.compile(r"^ACK #3 lobby e=\d+ v=1$", re.M), self.explain(done))
        self.assertNotIn(token, done.stdout.replace(auth[0]["credentials"].hex(), ""))


class ConnectionTests(unittest.TestCase):
    def test_connection_refused_exits_1(self):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()                     # nothing listens on it now
        done = run_snapcat(port, "ping\n", "-w", "2")
        self.assertEqual(done.returncode, snapcat.EXIT_CONNECTION)
        self.assertIn("cannot connect to 127.0.0.1 port %d" % port, done.stderr)

    def test_no_welcome_in_time_exits_1(self):
        # A listener that accepts (the kernel does) but never answers.
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        try:
            done = run_snapcat(s.getsockname()[1], "ping\n", "-w", "0.5")
        finally:
            s.close()
        self.assertEqual(done.returncode, snapcat.EXIT_CONNECTION)
        self.assertIn("no WELCOME", done.stderr)

    def test_help(self):
        done = run_snapcat(1, "", "--help")
        self.assertEqual(done.returncode, 0)
        for word in ["append-items ROOM [to S]", "move-item ROOM ITEM to S", "exit status", "--json",
                     "--token TOKEN", "$SNAPSYNC_TOKEN", "auth TOKEN"]:
            self.assertIn(word, done.stdout)


if __name__ == "__main__":
    unittest.main()


class OutlineTests(DaemonTestCase):
    """Protocol version 2 end to end: snapcat builds an outline, a second snapcat sees it."""

    def test_an_outline_built_with_snapcat_is_seen_whole_by_another_session(self):
        done = self.snapcat("append-sections o s t\n"
                            "append-items o to s a b\n"
                            "append-items o to-parent a a1=one a2\n"
                            "append-items o to-parent a1 a11\n"
                            "move-item o b to-parent a2\n"
                            "append-items o to t c\n"
                            "move-item o a1 to-parent c\n"
                            "join o\nshow o\n")
        self.assertEqual(done.returncode, 0, self.explain(done))
        self.assertTrue(done.stdout.startswith("WELCOME v=4 "), self.explain(done))
        self.assertIn("max_outline_depth=64", done.stdout.splitlines()[0])
        self.assertEqual(len(re.findall(r"^ACK #\d+ o ", done.stdout, re.M)), 7, self.explain(done))
        tree = done.stdout.split("\n<o ")[1].splitlines()[1:]
        self.assertEqual(tree, ["├─ section s",
                                "│  └─ item a",
                                "│     └─ item a2 (level 1)",
                                "│        └─ item b (level 2)",
                                "└─ section t",
                                "   └─ item c",
                                "      └─ item a1=\"one\" (level 1)",
                                "         └─ item a11 (level 2)"], self.explain(done))
        # A second session's SNAPSHOT, in JSON form, nests the same tree; its digest covers the levels.
        done = self.snapcat("join o\n", "--json")
        snap = [json.loads(l) for l in done.stdout.splitlines() if '"SNAPSHOT"' in l][0]
        self.assertEqual(snap["snapshot"][1]["items"],
                         [{"id": "c", "payload": "", "children": [
                             {"id": "a1", "payload": "one", "children": [{"id": "a11", "payload": ""}]}]}])
        native = wire.snapshot_from_json(snap["snapshot"])
        self.assertEqual(wire.message_from_json(snap)["digest"], hashlib.sha256(wire.encode_snapshot(native)).digest())

    def test_replace_section_and_the_rejections_of_outlines(self):
        done = self.snapcat("append-sections o s t\nappend-items o to t keep\n"
                            'replace-section o s [{"id": "a", "children": [{"id": "b", "payload": "B"}]}, {"id": "c"}]\n'
                            "move-item o a to-parent b\n"
                            "append-items o to-parent nope x\n"
                            'replace-section o nope [{"id": "z"}]\n'
                            'replace-section o s [{"id": "keep"}]\n'
                            "join o\nshow o\n")
        self.assertEqual(done.returncode, 0, self.explain(done))
        out = done.stdout
        self.assertRegex(out, re.compile(r"^ACK #3 o e=\d+ v=3$", re.M), self.explain(done))
        self.assertRegex(out, re.compile(r"^REJECT #4 o move_into_own_subtree \(52\) op=0 id=a: ", re.M))
        self.assertRegex(out, re.compile(r"^REJECT #5 o parent_not_found \(51\) op=0 id=nope: ", re.M))
        self.assertRegex(out, re.compile(r"^REJECT #6 o section_not_found \(22\) id=nope: ", re.M))
        self.assertRegex(out, re.compile(r"^REJECT #7 o duplicate_item \(21\) id=keep: ", re.M))
        self.assertIn("│  ├─ item a\n│  │  └─ item b=\"B\" (level 1)\n│  └─ item c\n", out)

    def test_a_version_1_session_is_refused_an_outline_room(self):
        self.snapcat("append-sections o s\nappend-items o to s a\nappend-items o to-parent a b\n")
        hello = wire.encode_frame({"type": "HELLO", "magic": wire.MAGIC, "versions": [1],
                                   "client_name": b"old", "credentials": b""}).hex()
        join = wire.encode_frame({"type": "JOIN", "request_id": 1, "room": b"o", "resume": None}).hex()
        done = self.snapcat("raw %s\nraw %s\nwait\n" % (hello, join), "--no-hello", "-q", "1")
        self.assertIn("WELCOME v=1 ", done.stdout, self.explain(done))
        self.assertNotIn("max_outline_depth", done.stdout)
        self.assertRegex(done.stdout, re.compile(r"^REJECT #1 (o )?outline_unsupported \(54\): ", re.M), self.explain(done))


class PresenceTests(DaemonTestCase):
    """Presence end to end (PROTOCOL.md section 9, "Presence"; version 4): snapcat sessions in a
    room, one watching. Changes reach a watcher within a presence interval (10 ms here); each
    step waits for the watcher's line before the next, so that no two steps coalesce."""

    def setUp(self):
        self.daemon = Daemon("--presence-interval", "10ms", "--max-presence-bytes", "64", "--presence-view", "2")
        self.sessions = []

    def session_id(self, session):
        line = session.expect(r"WELCOME")
        if line.startswith("{"):
            return json.loads(line)["session_id"]
        return int(re.match(r"^WELCOME v=4 session=(\d+) ", line).group(1))

    def test_a_watcher_sees_members_join_set_their_state_and_leave(self):
        # Connected in this order, so that their member ids (session ids) ascend: a view of 2
        # holds alice and the watcher, and bob is only counted until alice leaves.
        alice = self.interactive("--name", "alice", "--json")
        a = self.session_id(alice)
        watcher = self.interactive("--name", "watcher")
        w = self.session_id(watcher)
        bob = self.interactive("--name", "bob")
        b = self.session_id(bob)
        self.assertLess(a, w)
        self.assertLess(w, b)

        alice.send("presence lobby")
        first = json.loads(alice.expect(r'"type":"PRESENCE"'))
        self.assertEqual((first["request_id"], first["room"], first["count"], first["next"]), (2, "lobby", 1, 0))
        [me] = first["members"]
        self.assertEqual((me["member_id"], me["principal"], me["state"]), (a, "alice", ""))

        watcher.send("presence lobby")
        joined = json.loads(alice.expect(r'"type":"PRESENCE_DIFF"'))
        self.assertEqual(joined["count"], 2)
        [change] = joined["changes"]
        self.assertEqual(change["kind"], "joined")
        self.assertEqual((change["member"]["member_id"], change["member"]["principal"]), (w, "watcher"))
        watcher.expect(r"^PRESENCE #2 lobby: ")

        bob.send("join lobby")
        counted = json.loads(alice.expect(r'"type":"PRESENCE_DIFF"'))
        self.assertEqual((counted["count"], counted["changes"]), (3, []))
        watcher.expect(r"^PRESENCE_DIFF lobby: 3 members: \(no change in the view\)$")
        bob.send('set-presence lobby {"editing": "milk"}')
        bob.expect(r"^ACK #2 lobby e=0 v=0 \(presence set\)$")

        # alice leaves: bob is shown, with the state he set.
        alice.send("leave lobby")
        line = watcher.expect(r"^PRESENCE_DIFF lobby: 2 members: ")
        self.assertEqual(sorted(line.split(": ", 2)[2].split(", ")),
                         sorted(["-%d (left)" % a, '>%d bob {"editing": "milk"} (shown)' % b]), line)

        # Every member, a page of one at a time.
        bob.send("presence lobby --list 1")
        bob.expect(r"^PRESENCE #3 lobby: 2 members: %d watcher next=%d$" % (w, w))
        bob.expect(r'^PRESENCE #4 lobby: 2 members: %d bob {"editing": "milk"}$' % b)

        # bob's connection closes: he left, disconnected.
        self.assertEqual(bob.close(), 0)
        watcher.expect(r"^PRESENCE_DIFF lobby: 1 member: -%d \(disconnected\)$" % b)
        self.assertEqual(watcher.close(), 0)
        self.assertEqual(alice.close(), 0)
        # Every PRESENCE_DIFF fitted the view each watcher held (snapcat checks them).
        self.assertEqual([l for l in watcher.stderr + alice.stderr if "warning" in l], [])

    def test_a_state_over_max_presence_bytes_is_refused_and_the_previous_one_stays(self):
        big = json.dumps({"editing": "x" * 64})
        done = self.snapcat('set-presence r {"n": 1}\nset-presence r %s\npresence r\n' % big)
        self.assertEqual(done.returncode, 0, self.explain(done))
        self.assertIn("max_presence_bytes=64 presence_view=2", done.stdout.splitlines()[0])
        self.assertRegex(done.stdout, re.compile(r"^ACK #2 r e=0 v=0 \(presence set\)$", re.M))
        self.assertRegex(done.stdout, re.compile(
            r"^REJECT #3 r payload_too_large \(29\): presence state of %d bytes .*64$" % len(big), re.M))
        self.assertRegex(done.stdout, re.compile(r'^PRESENCE #4 r: 1 member: \d+ snapcat {"n": 1}$', re.M),
                         self.explain(done))

    def test_presence_of_a_room_not_joined_is_refused(self):
        watch = wire.encode_frame({"type": "PRESENCE_WATCH", "request_id": 101, "room": b"r", "watch": 1})
        listing = wire.encode_frame({"type": "PRESENCE_LIST", "request_id": 102, "room": b"r", "after": 0, "limit": 0})
        done = self.snapcat("raw %s\nraw %s\npresence r off\njoin r\nleave r\npresence r off\n"
                            % (watch.hex(), listing.hex()))
        self.assertEqual(done.returncode, 0, self.explain(done))
        refused = re.findall(r"^REJECT #(\d+) r not_joined \(43\): ", done.stdout, re.M)
        self.assertEqual(refused, ["101", "102", "1", "4"], self.explain(done))

    def test_presence_on_a_version_3_connection_is_an_unknown_message_type(self):
        hello = wire.encode_frame({"type": "HELLO", "magic": wire.MAGIC, "versions": [3, 2, 1],
                                   "client_name": b"old", "credentials": b""})
        join = wire.encode_frame({"type": "JOIN", "request_id": 1, "room": b"r", "resume": None})
        watch = wire.encode_frame({"type": "PRESENCE_WATCH", "request_id": 2, "room": b"r", "watch": 1})
        done = self.snapcat("raw %s\nraw %s\nraw %s\n" % (hello.hex(), join.hex(), watch.hex()), "-n")
        self.assertEqual(done.returncode, snapcat.EXIT_SERVER_ERROR, self.explain(done))
        lines = done.stdout.splitlines()
        self.assertTrue(lines[0].startswith("WELCOME v=3 "), self.explain(done))
        self.assertNotIn("max_presence_bytes", lines[0])
        self.assertRegex(lines[1], r"^SNAPSHOT #1 r ")
        self.assertRegex(lines[2], r"^ERROR unknown_message_type \(3\): ")

    def test_set_presence_faster_than_the_rate_is_busy_and_changes_nothing(self):
        # A rate of 1 a second, in bursts of 1: of 5 states sent at once, the first is set and
        # at least some of the rest refused (all of them unless the daemon took seconds to read them).
        slow = Daemon("--presence-updates-per-second", "1")
        try:
            done = run_snapcat(slow.port, "".join('set-presence r {"n": %d}\n' % n for n in range(5)) + "presence r\n",
                               timeout=30)
        finally:
            slow.stop()
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        answers = re.findall(r"^(ACK|REJECT) #(\d+) r (?:e=0 v=0 \(presence set\)|busy \(55\): .*)$", done.stdout, re.M)
        self.assertEqual([int(n) for _, n in answers], [2, 3, 4, 5, 6], done.stdout)
        self.assertEqual(answers[0][0], "ACK")
        self.assertIn("REJECT", [kind for kind, _ in answers])
        # The state is the last one set: a refused state changes nothing.
        last = max(int(n) for kind, n in answers if kind == "ACK") - 2
        self.assertRegex(done.stdout, re.compile(r'^PRESENCE #7 r: 1 member: \d+ snapcat {"n": %d}$' % last, re.M))
