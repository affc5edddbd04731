"""The cluster tests' history checker on hand-made histories: it accepts one valid history and
finds each kind of violation it exists for."""

import unittest

import hashlib

from tests.cluster_history import check_room

E = 7


def diff(write_id, version):
    # Stands in for a DIFF frame: what matters is that equal writes at equal versions compare equal.
    return b"DIFF e=%d v=%d %s" % (E, version, write_id)


def segment(client, base, *write_ids, epoch=E):
    return {"client": client, "epoch": epoch, "base": base,
            "diffs": [(base + 1 + i, w, diff(w, base + 1 + i)) for i, w in enumerate(write_ids)]}


class HistoryCheckTests(unittest.TestCase):
    def valid(self):
        """Two writers on two nodes; b's connection broke after v2 and it resumed (CATCHUP) at v2;
        a reader caught up from 0 at the end. w3 was refused by compare-and-set, w5's answer
        was lost (storage_failure) and it was not applied, w6's was lost and it was."""
        segments = [segment("a", 0, b"w1", b"w2", b"w4", b"w6"),
                    segment("b", 1, b"w2"),
                    segment("b", 2, b"w4", b"w6"),
                    segment("reader", 0, b"w1", b"w2", b"w4", b"w6")]
        writes = {b"w1": ("acked", E, 1), b"w2": ("acked", E, 2), b"w3": ("rejected", "version_mismatch"),
                  b"w4": ("acked", E, 3), b"w5": ("indeterminate",), b"w6": ("indeterminate",)}
        return segments, writes

    def test_a_valid_history_passes(self):
        segments, writes = self.valid()
        log, problems = check_room(segments, writes)
        self.assertEqual(problems, [])
        self.assertEqual({v: w for v, (w, _) in log.items()}, {1: b"w1", 2: b"w2", 3: b"w4", 4: b"w6"})

    def chained(self):
        """The valid history as version 3 connections see it: the chain of each version."""
        segments, writes = self.valid()
        chain = {0: hashlib.sha256(b"start").digest()}
        for version, (_, diff_bytes) in sorted(check_room(segments, writes)[0].items()):
            chain[version] = hashlib.sha256(chain[version - 1] + diff_bytes).digest()
        for s in segments:
            s["chains"] = [(s["base"], chain[s["base"]])] + [(v, chain[v]) for v, _, _ in s["diffs"]]
        return segments, writes, chain

    def test_chains_that_follow_the_diffs_pass(self):
        segments, writes, _ = self.chained()
        self.assertEqual(check_room(segments, writes)[1], [])

    def test_a_chain_that_does_not_follow_is_found(self):
        # The same DIFFs everywhere, but one node's chain at v3 is another history's (a node on
        # another history, which no DIFF byte shows).
        segments, writes, chain = self.chained()
        other = hashlib.sha256(b"another history").digest()
        segments[2]["chains"] = [(v, other if v == 3 else c) for v, c in segments[2]["chains"]]
        self.assertEqual(check_room(segments, writes)[1], [
            "two chains at v=3: a saw %s, b saw %s" % (chain[3].hex()[:16], other.hex()[:16])])
        # Every client's chain at v3 the other one: it is not the hash of v2's and v3's DIFF.
        for s in segments:
            s["chains"] = [(v, other if v == 3 else c) for v, c in s["chains"]]
        self.assertEqual(check_room(segments, writes)[1], [
            "the chain at v=3 is not the hash of v=2's chain and v=3's DIFF",
            "the chain at v=4 is not the hash of v=3's chain and v=4's DIFF"])

    def test_a_fork_is_found(self):
        segments, writes = self.valid()
        # Node of b applied w6 at v3 while a's applied w4 there: two orders of one room.
        segments[2] = segment("b", 2, b"w6", b"w4")
        _, problems = check_room(segments, writes)
        self.assertEqual(problems, [
            "fork at v=3: a saw write b'w4', b saw write b'w6' (different DIFFs)",
            "fork at v=4: a saw write b'w6', b saw write b'w4' (different DIFFs)"])

    def test_a_lost_acked_write_is_found(self):
        segments, writes = self.valid()
        # w4 was acked at v3, but the room (every client's view) never had it.
        segments = [segment("a", 0, b"w1", b"w2", b"w6"), segment("reader", 0, b"w1", b"w2", b"w6")]
        _, problems = check_room(segments, writes)
        self.assertIn("write b'w4' acked at v=3 is not in the room (lost)", problems)

    def test_a_duplicate_is_found(self):
        segments, writes = self.valid()
        # w2 applied again, e.g. a retry through another node that did not recognise its id.
        segments = [segment("a", 0, b"w1", b"w2", b"w4", b"w2"), segment("reader", 0, b"w1", b"w2", b"w4", b"w2")]
        _, problems = check_room(segments, writes)
        self.assertIn("write b'w2' applied 2 times, at v=[2, 4]", problems)

    def test_an_indeterminate_write_may_appear_once_only(self):
        segments, writes = self.valid()
        segments.append(segment("reader2", 4, b"w5", b"w5"))
        _, problems = check_room(segments, writes)
        self.assertEqual(problems, ["write b'w5' applied 2 times, at v=[5, 6]"])

    def test_a_rejected_write_that_appears_is_found(self):
        segments, writes = self.valid()
        segments.append(segment("reader2", 4, b"w3"))
        _, problems = check_room(segments, writes)
        self.assertEqual(problems, ["write b'w3' was rejected (version_mismatch) yet is at v=5"])

    def test_a_gap_in_one_connections_view_is_found(self):
        segments, writes = self.valid()
        segments[1]["diffs"].append((4, b"w6", diff(b"w6", 4)))    # b's first connection skipped v3
        _, problems = check_room(segments, writes)
        self.assertEqual(problems, ["b: DIFF v=4 after v=2 (a gap or a repeat)"])

    def test_an_ack_at_the_wrong_version_a_stranger_and_a_hole_are_found(self):
        segments, writes = self.valid()
        writes[b"w2"] = ("acked", E, 3)
        segments.append(segment("reader2", 5, b"zz"))
        _, problems = check_room(segments, writes)
        self.assertEqual(sorted(problems), sorted([
            "versions never seen by any client: [5]",
            "write b'zz' at v=[6] was sent by no client",
            "write b'w2' acked at v=3 is at v=2"]))

    def test_a_second_epoch_is_found(self):
        segments, writes = self.valid()
        segments.append(segment("reader2", 0, b"w1", epoch=E + 1))
        _, problems = check_room(segments, writes)
        self.assertEqual(problems, ["the room has 2 epochs [7, 8]: its history was lost or forked"])


if __name__ == "__main__":
    unittest.main()
