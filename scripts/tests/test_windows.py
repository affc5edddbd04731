"""End to end: snapcat following windows of rooms (PROTOCOL.md section 9, "Windows") against the
real snapsyncd, with a second snapcat writing. The daemon comes from $SNAPSYNCD or
.build/debug/snapsyncd, as for test_daemon.py.

The window frames' ops are the server's choice (section 11.31), so these tests check what they
lead to: snapcat's windowed replica (`show`), the counts and the effective window.
"""

import re
import unittest

from tests.test_daemon import DaemonTestCase

ROWS = 1000


def build_room(room="big", section="s", rows=ROWS):
    """Commands that make `room` with one section of `rows` items i0 ... i<rows-1>."""
    return "append-sections %s %s\nappend-items %s to %s %s\n" % (
        room, section, room, section, " ".join("i%d" % k for k in range(rows)))


class WindowTestCase(DaemonTestCase):
    def setUp(self):
        super().setUp()
        done = self.snapcat(build_room())
        self.assertEqual(done.returncode, 0, self.explain(done))
        self.assertRegex(done.stdout, re.compile(r"^ACK #2 big e=\d+ v=2$", re.M), self.explain(done))

    def windowed(self, request):
        """An interactive snapcat that has joined `big` with `request` (the words after 'join big
        window') and got its WINDOW_STATE."""
        s = self.interactive()
        s.send("join big window " + request)
        s.expect(r"^WINDOW_STATE #1 big ")
        return s

    def tree(self, s, room="big"):
        """snapcat's `show` of a windowed replica: its head line and every line after it up to the
        last shown item (read until a line that is not part of the tree is due: we send a ping)."""
        s.send("show " + room)
        head = s.expect(r"^<%s " % room)
        s.send("ping")
        lines = []
        while True:
            line = s.expect(r"")
            if line.startswith("PONG"):
                return head, lines
            lines.append(line)


class JoiningTests(WindowTestCase):
    def test_join_a_window_of_a_1000_item_room(self):
        done = self.snapcat("join big window s around i500 2 2\nshow big\n")
        self.assertEqual(done.returncode, 0, self.explain(done))
        self.assertRegex(done.stdout, re.compile(
            r"^WINDOW_STATE #1 big e=\d+ v=2 window=\[s around i500 2 2\] 1 section, 1,000 items, 5 shown: "
            r"s \(1,000 items\) \[i498, i499, i500, i501, i502\]$", re.M), self.explain(done))
        self.assertNotIn("SNAPSHOT", done.stdout)
        tree = done.stdout.split("\n<big ", 1)[1].splitlines()
        self.assertRegex(tree[0], r"version=2; windowed \[s around i500 2 2\]; 1 sections, 1,000 items, 5 shown>$")
        self.assertEqual(tree[1:], ["└─ section s (1,000 items): rows shown 5 (around i500 2 2)",
                                    "   ├─ item i498", "   ├─ item i499", "   ├─ item i500", "   ├─ item i501",
                                    "   └─ item i502"])

    def test_first_last_and_several_sections(self):
        done = self.snapcat("append-sections big t\nappend-items big to t t0 t1\n"
                            "join big window s first 2 t last 1\nshow big\n")
        self.assertEqual(done.returncode, 0, self.explain(done))
        self.assertRegex(done.stdout, re.compile(
            r"^WINDOW_STATE #3 big e=\d+ v=4 window=\[s first 2; t last 1\] 2 sections, 1,002 items, 3 shown: "
            r"s \(1,000 items\) \[i0, i1\] \| t \(2 items\) \[t1\]$", re.M), self.explain(done))

    def test_moving_the_window(self):
        s = self.windowed("s first 3")
        s.send("window big s last 2")
        line = s.expect(r"^WINDOW_DIFF #2 big ")
        self.assertRegex(line, r" v=2 window=\[s last 2\]")
        head, lines = self.tree(s)
        self.assertIn("windowed [s last 2]", head)
        self.assertEqual(lines, ["└─ section s (1,000 items): rows shown 2 (last 2)", "   ├─ item i998",
                                 "   └─ item i999"])
        s.send("window big")      # sections and counts only
        s.expect(r"^WINDOW_DIFF #4 big e=\d+ v=2 window=\[\]")
        head, lines = self.tree(s)
        self.assertEqual(lines, ["└─ section s (1,000 items): not in the window"])
        self.assertEqual(s.close(), 0)

    def test_a_window_on_a_section_that_appears_later(self):
        s = self.windowed("later first 2")
        w = self.interactive()
        w.send("append-sections big later")
        s.expect(r"^WINDOW_DIFF big e=\d+ v=3 .*counts later=0")
        w.send("append-items big to later a b c")
        s.expect(r"^WINDOW_DIFF big e=\d+ v=4 ")
        head, lines = self.tree(s)
        self.assertEqual(lines, ["├─ section s (1,000 items): not in the window",
                                 "└─ section later (3 items): rows shown 2 (first 2)", "   ├─ item a",
                                 "   └─ item b"])

    def test_join_makes_a_windowed_member_full_again_and_window_makes_it_windowed(self):
        s = self.windowed("s first 1")
        s.send("join big")
        s.expect(r"^SNAPSHOT #2 big e=\d+ v=2 initial .* 1 section, 1000 items")
        s.send("window big s last 1")
        s.expect(r"^WINDOW_STATE #3 big e=\d+ v=2 window=\[s last 1\] .*\[i999\]$")
        self.assertEqual(s.close(), 0)

    def test_refused_windows_change_nothing(self):
        done = self.snapcat("join big window s first 1001\n"
                            "join big window s first 1 s last 1\n"
                            "join big window s around nope 1 1\n"
                            "join big window s first 1000\n"
                            "window big s first 999 t first 2\n")
        self.assertEqual(done.returncode, 0, self.explain(done))
        out = done.stdout
        self.assertRegex(out, re.compile(r"^REJECT #1 big window_too_large \(57\): .+$", re.M), self.explain(done))
        self.assertRegex(out, re.compile(r"^REJECT #2 big duplicate_section \(20\) id=s: .+$", re.M))
        self.assertRegex(out, re.compile(r"^REJECT #3 big anchor_item_not_found \(25\) id=nope: .+$", re.M))
        self.assertRegex(out, re.compile(r"^WINDOW_STATE #4 big .* 1,000 shown", re.M))
        # A windowed member's refused WINDOW keeps its window.
        self.assertRegex(out, re.compile(r"^REJECT #5 big window_too_large \(57\): .+$", re.M))


class LiveTests(WindowTestCase):
    def test_a_writer_above_inside_and_below_the_window(self):
        s = self.windowed("s around i500 1 1")
        w = self.interactive()
        w.send("insert-items big before i10 above")          # above: the count alone
        line = s.expect(r"^WINDOW_DIFF big ")
        self.assertRegex(line, r" v=3 counts s=1001$")
        w.send("insert-items big after i500 inside")         # inside: i501 leaves, inside comes in
        line = s.expect(r"^WINDOW_DIFF big ")
        self.assertRegex(line, r" v=4 counts s=1002; ")
        w.send("reload-items big i900=x")                    # outside, no count changes: nothing
        w.expect(r"^ACK #3 big e=\d+ v=5$")
        w.send("insert-items big after i900 below")          # below: the count alone, at v=6
        line = s.expect(r"^WINDOW_DIFF big ")
        self.assertRegex(line, r" v=6 counts s=1003$")
        w.send("reload-items big i499=changed")              # inside: an update (ops: the server's choice)
        line = s.expect(r"^WINDOW_DIFF big ")
        self.assertRegex(line, r" v=7 (?!window=|counts )")
        head, lines = self.tree(s)
        self.assertRegex(head, r"version=7; windowed \[s around i500 1 1\]; 1 sections, 1,003 items, 3 shown>$")
        self.assertEqual(lines, ["└─ section s (1,003 items): rows shown 3 (around i500 1 1)",
                                 '   ├─ item i499="changed"', "   ├─ item i500", "   └─ item inside"])
        self.assertEqual(s.close(), 0)
        self.assertEqual(w.close(), 0)

    def test_the_anchor_deleted_moves_to_the_next_row(self):
        s = self.windowed("s around i500 1 1")
        w = self.interactive()
        w.send("delete-items big i500")
        line = s.expect(r"^WINDOW_DIFF big ")
        self.assertRegex(line, r" v=3 window=\[s around i501 1 1\]; counts s=999; ")
        head, lines = self.tree(s)
        self.assertEqual(lines, ["└─ section s (999 items): rows shown 3 (around i501 1 1)",
                                 "   ├─ item i499", "   ├─ item i501", "   └─ item i502"])
        # Then the anchor and every row after it in the window: the previous row.
        w.send("delete-items big i501 i502")
        s.expect(r"^WINDOW_DIFF big e=\d+ v=4 window=\[s around i499 1 1\]; counts s=997; ")
        # Then every row of the window: first 3.
        w.send("delete-items big i498 i499 i503")
        s.expect(r"^WINDOW_DIFF big e=\d+ v=5 window=\[s first 3\]; counts s=994; ")
        head, lines = self.tree(s)
        self.assertEqual(lines, ["└─ section s (994 items): rows shown 3 (first 3)", "   ├─ item i0",
                                 "   ├─ item i1", "   └─ item i2"])

    def test_the_anchor_made_a_child_and_children_counted(self):
        s = self.windowed("s around i500 1 1")
        w = self.interactive()
        w.send("move-item big i500 to-parent i499")
        s.expect(r"^WINDOW_DIFF big e=\d+ v=3 window=\[s around i501 1 1\]")
        head, lines = self.tree(s)
        self.assertEqual(lines, ["└─ section s (1,000 items): rows shown 3 (around i501 1 1)",
                                 "   ├─ item i499", "   │  └─ item i500 (level 1)", "   ├─ item i501",
                                 "   └─ item i502"])
        w.send("append-items big to-parent i10 c1 c2")       # children outside the window: counts
        s.expect(r"^WINDOW_DIFF big e=\d+ v=4 counts s=1002$")

    def test_the_writers_window_diff_comes_before_its_ack(self):
        s = self.windowed("s first 2")
        s.send("insert-items big before i0 top")
        s.expect(r"^WINDOW_DIFF big e=\d+ v=3 counts s=1001; ")
        s.expect(r"^ACK #2 big e=\d+ v=3$")
        head, lines = self.tree(s)
        self.assertEqual(lines, ["└─ section s (1,001 items): rows shown 2 (first 2)", "   ├─ item top",
                                 "   └─ item i0"])

    def test_leave_ends_the_window_frames(self):
        s = self.windowed("s first 2")
        s.send("leave big")
        s.expect(r"^ACK #2 big e=\d+ v=2$")
        w = self.interactive()
        w.send("insert-items big before i0 top")
        w.expect(r"^ACK #1 big e=\d+ v=3$")
        s.send("ping")
        s.expect(r"^PONG")
        self.assertFalse(any(l.startswith("WINDOW_DIFF") for l in s.seen), s.seen)


if __name__ == "__main__":
    unittest.main()
