"""The nemesis test's final checks (tests/nemesis.py) on hand-made states: a reader's replica
rebuilt from its segments, and each node's final state against the writes' outcomes. These run
in the python lane; the nemesis itself runs in the cluster lane."""

import random
import unittest

from tests.cluster_client import SECTION
from tests.cluster_workload import replay
from tests.nemesis import FAULTS, Nemesis, check_final, nemesis_ops, replica_of
from tests.support import wire

E = 5


def diff(room, version, write_id):
    return wire.encode_frame({"type": "DIFF", "room": room, "epoch": E, "version": version,
                              "ops": nemesis_ops(write_id)})


def initial():
    return wire.Snapshot([{"id": SECTION, "payload": b"setup"}])


def history(*write_ids, room=b"r"):
    """A room's log: v1 the setup (section main), then one version per write."""
    setup = wire.encode_frame({"type": "DIFF", "room": room, "epoch": E, "version": 1,
                               "ops": [{"op": "append_sections", "elements": [{"id": SECTION, "payload": b"setup"}]}]})
    log = {1: (b"setup", setup)}
    for i, w in enumerate(write_ids):
        log[2 + i] = (w, diff(room, 2 + i, w))
    return log


def snapshot_answer(state, version):
    return {"type": "SNAPSHOT", "epoch": E, "version": version, "digest": state.digest(),
            "snapshot": state.to_list()}


class ReplicaTests(unittest.TestCase):
    def segments(self):
        log = history(b"a", b"b", b"c")
        at1 = initial()
        return log, [
            {"client": "r1", "answer": "SNAPSHOT", "epoch": E, "base": 1, "digest": at1.digest(),
             "snapshot": at1.to_list(), "diffs": [(2, b"a", log[2][1])]},
            {"client": "r1", "answer": "CATCHUP", "epoch": E, "base": 2, "diffs": [(3, b"b", log[3][1]),
                                                                                (4, b"c", log[4][1])]}]

    def test_a_snapshot_then_a_catchup_from_its_position_builds_the_room(self):
        log, segments = self.segments()
        epoch, version, state, problems = replica_of(segments, "r1")
        self.assertEqual(problems, [])
        self.assertEqual((epoch, version, state.digest()), (E, 4, replay(log).digest()))

    def test_a_catchup_from_another_position_is_found(self):
        _, segments = self.segments()
        segments[1]["base"] = 3
        self.assertEqual(replica_of(segments, "r1")[3], ["r1: CATCHUP from 5:3 while its replica is at 5:2"])


class FinalStateTests(unittest.TestCase):
    def setUp(self):
        self.log = history(b"a", b"b", b"d")
        self.outcomes = {b"setup": ("acked", E, 1), b"a": ("acked", E, 2), b"b": ("indeterminate",),
                         b"c": ("rejected", "version_mismatch"), b"d": ("acked", E, 4)}
        self.state = replay(self.log)
        self.replica = (E, 4, self.state, [])

    def check(self, snapshots, replicas=None):
        return check_final("r", self.log, self.outcomes, snapshots, replicas or {"r1": self.replica})

    def test_every_node_and_replica_on_the_history_passes(self):
        good = snapshot_answer(self.state, 4)
        self.assertEqual(self.check({"s1": good, "s2": good}), [])

    def test_a_lost_acked_write_and_an_applied_refused_one_are_found(self):
        state = initial().apply_batch(nemesis_ops(b"a")).apply_batch(nemesis_ops(b"c"))
        problems = self.check({"s1": snapshot_answer(state, 3)})
        self.assertIn("r: s1 lacks 1 acknowledged write(s): [b'd']", problems)
        self.assertIn("r: s1 holds 1 refused write(s): [b'c']", problems)

    def test_nodes_on_different_states_and_a_diverging_replica_are_found(self):
        other = initial().apply_batch(nemesis_ops(b"a")).apply_batch(nemesis_ops(b"d")).apply_batch(
            nemesis_ops(b"b"))
        problems = self.check({"s1": snapshot_answer(self.state, 4), "s2": snapshot_answer(other, 4)},
                              {"r1": (E, 4, other, [])})
        self.assertTrue(any(p.startswith("r: the nodes end on different states") for p in problems), problems)
        self.assertIn("r: s2's digest at v=4 is not the history's replayed from empty", problems)
        self.assertTrue(any(p.startswith("r: r1's replica is at 5:4 digest") for p in problems), problems)


class ScheduleTests(unittest.TestCase):
    def test_every_kind_of_fault_runs_once_in_an_order_the_seed_decides(self):
        a = Nemesis.schedule(type("N", (), {"rng": random.Random(7), "kinds": FAULTS})())
        b = Nemesis.schedule(type("N", (), {"rng": random.Random(7), "kinds": FAULTS})())
        self.assertEqual(sorted(a), sorted(FAULTS))
        self.assertEqual(a, b)


if __name__ == "__main__":
    unittest.main()
