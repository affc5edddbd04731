"""The nemesis test: a SnapSync cluster under faults, in the manner of Jepsen, bounded and seeded.

3 NATS servers, each in a network namespace of its own (scripts/cluster --netns,
scripts/cluster_net.py), and 3 `snapsyncd --cluster` nodes. While writers and readers use two
rooms through every node, a nemesis injects one fault at a time, on a schedule drawn from a
seed: kill -9 of a node, of a server, of the stream's leader; SIGSTOP of a node or of the
stream's leader (SIGCONT a few seconds later); loss of quorum (two servers killed or stopped);
the stream leader's route link down (~10 s: cut from the two other servers, still reachable by its
clients); a server isolated (both links down). Each fault is healed before the next. Then
everything is healed, the writers stop, and the checks judge what the clients recorded:

1. every acknowledged write is in every node's final state (a fresh JOIN on each node) exactly
   once, and in the room's history once, at its acknowledged version;
2. no write refused for good (a typed REJECT on every attempt, the Jepsen `fail`) is applied;
   one whose outcome its client could not know (`storage_failure`, a lost connection: `info`)
   may be, at most once;
3. one history per room: for each (room, epoch, version) every client that saw a DIFF saw the
   same bytes, and every connection's view is gap-free (tests/cluster_history.py);
4. every node and every reader's replica (built from the SNAPSHOT it was sent and the DIFFs
   that followed) end on the same (epoch, version, digest), within a bounded wait after the
   faults are healed; each node's digest is also that of the history replayed from empty. The
   digest is of the content; when clients are sent the room's hash chain, it belongs here too.

A failing run leaves a report directory (seed, fault timeline, the problems, history excerpts
around them, every write's outcome, the servers' and nodes' logs) and says where.

The test is a program, not a unittest module (its name does not start with test_, so the
python lane does not run it): scripts/test runs it in the cluster lane, scripts/nemesis runs it
by hand. Writers and clients are those of the cluster tests (tests/cluster_workload.py,
tests/cluster_client.py); this adds the readers, the nemesis and the final checks.
"""

import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.request

SCRIPTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if SCRIPTS not in sys.path:
    sys.path.insert(0, SCRIPTS)

import cluster_net  # noqa: E402
from tests.cluster_client import SECTION, ConnectionLost, NoAnswer, connect_any  # noqa: E402
from tests.cluster_history import check_room  # noqa: E402
from tests.cluster_workload import ANSWER_WITHIN, RETRY_PAUSE, STORAGE_FAILURE, Writer, first_write  # noqa: E402
from tests.support import daemon_path, wire  # noqa: E402

CLUSTER = os.path.join(SCRIPTS, "cluster")
STREAM = "snapsync-rooms"
ROOMS = (b"nemesis-1", b"nemesis-2")
SHORT_SECONDS = 100
LONG_SECONDS = 1800
SKIPPED = 77
# Nodes keep every version of a short run (a reader's resume and the final read from version 0
# need them); a checkpoint every 10000 writes (retention twice that) so a node restarted under the
# nemesis loads the room with its whole history. A long run outgrows them: then a final read is
# answered with a resync SNAPSHOT (a note in the report), and the readers' views, which span the
# run, hold the history.
NODE_ARGS = ["--history-count", "50000", "--history-bytes", "64MiB", "--cluster-checkpoint-every", "10000",
             "--cluster-retain", "20000"]
# Bounds on hangs, not figures.
HEALTHY_WITHIN = 60.0
CONVERGE_WITHIN = 30.0
WRITERS_STOP_WITHIN = 120.0

FAULTS = ("kill-node", "kill-server", "kill-leader", "pause-node", "pause-leader", "quorum-loss",
          "partition-leader", "isolate-server")


def nemesis_ops(write_id):
    """A nemesis write: section `main`'s payload becomes the write id (so a DIFF names its write,
    tests/cluster_client.py) and an item of that id is appended to it, so a node's final state
    holds every write it applied, each once (a second item of one id would be refused)."""
    return [{"op": "update_sections", "elements": [{"id": SECTION, "payload": write_id}]},
            {"op": "append_items", "section": SECTION, "elements": [{"id": write_id, "payload": b""}]}]


class Reader(threading.Thread):
    """A member of `room` on node `home` that records every DIFF (as segments, like the writers)
    and, after a lost connection or a LEFT, joins again from its position (after a LEFT
    storage_failure, without one: its node's copy may have left the room's history), on its home
    node if it answers, else on the next one. Its replica is rebuilt from its segments
    (`replica_of`)."""

    def __init__(self, name, ports, home, room, segments):
        super().__init__(name=name, daemon=True)
        self.client = name
        self.ports = ports
        self.home = home
        self.room = room
        self.segments = segments
        self.conn = None
        self.node = home
        self.position = (None, -1)
        self.joins = []
        self.errors = []
        self.stop = threading.Event()

    def run(self):
        try:
            while not self.stop.is_set():
                if self.conn is None or self.conn.closed:
                    self._connect()
                    continue
                if not self.conn.joined(self.room):
                    self._join()
                    continue
                self.position = self.conn.position(self.room)
                with self.conn.cond:
                    self.conn.cond.wait(0.2)
        except Exception as e:
            self.errors.append("%s: %s: %s" % (self.client, type(e).__name__, e))
        finally:
            if self.conn:
                self.conn.close()

    def _connect(self):
        if self.conn is not None:
            self.position = self.conn.position(self.room)
            self.conn.close()
            self.conn = None
        try:
            index, self.conn = connect_any(self.ports, self.home, self.client, self.segments, within=60.0)
        except ConnectionLost as e:
            self.joins.append(("-", "no node: %s" % e))
            time.sleep(RETRY_PAUSE)
            return
        self.node = index
        self._join()

    def _join(self):
        epoch, version = self.conn.position(self.room)
        chain = self.conn.held_chain(self.room)
        if epoch is None:
            epoch, version = self.position
        resume = {"epoch": epoch, "version": version, "chain": chain} if epoch is not None else None
        with self.conn.cond:
            if self.room in self.conn.resync:
                # LEFT storage_failure: the replica may hold a state the room never had.
                self.conn.resync.discard(self.room)
                resume = None
        try:
            answer = self.conn.join(self.room, resume, ANSWER_WITHIN)
        except (ConnectionLost, NoAnswer) as e:
            self.joins.append((self.node, "JOIN: %s" % e))
            self.conn.close()
            self.conn = None
            return
        if answer["type"] == "REJECT":
            self.joins.append((self.node, "REJECT %s" % wire.error_name(answer["code"])))
            if answer["code"] != STORAGE_FAILURE:
                self.errors.append("%s: JOIN on node %d: REJECT %s: %s" % (
                    self.client, self.node, wire.error_name(answer["code"]), answer["message"].decode()))
            # Another node may hold the room; this one may, later.
            self.conn.close()
            self.conn = None
            self.home += 1
            time.sleep(RETRY_PAUSE)
            return
        kind = answer["type"] if answer["type"] != "SNAPSHOT" else "SNAPSHOT " + answer["reason"]
        self.joins.append((self.node, kind))
        self.position = self.conn.position(self.room)


def apply_diff(state, frame):
    """Applies a DIFF's ops to `state` in place (a DIFF the daemon sent is valid; copying the
    snapshot per DIFF, as apply_batch does for atomicity, made the checks quadratic)."""
    for k, op in enumerate(wire.decode_frame(frame, wire.SERVER_TO_CLIENT)["ops"]):
        state.apply_op(op, k)


def replay(log):
    """The snapshot the room's log builds from empty (version -> (write id, DIFF frame))."""
    state = wire.Snapshot()
    for version in sorted(log):
        apply_diff(state, log[version][1])
    return state


def replica_of(segments, client):
    """The replica a client built from what it was sent: each SNAPSHOT replaces it, each
    CATCHUP must continue it from its position, each DIFF applies to it at the next version; a
    folded CATCHUP's one DIFF (PROTOCOL.md section 11.12) applies to it at the CATCHUP's
    from_version, after which its digest must be the CATCHUP's (the chain was taken, so this is
    the DIFF's only check). Returns (epoch, version, Snapshot or None, problems)."""
    epoch, version, state, problems = None, -1, None, []
    for s in [s for s in segments if s["client"] == client]:
        if s["answer"] == "SNAPSHOT":
            epoch, version = s["epoch"], s["base"]
            state = wire.Snapshot(s["snapshot"])
            if state.digest() != s["digest"]:
                problems.append("%s: SNAPSHOT at %d:%d whose digest is not its content's" % (client, epoch, version))
        elif (s["epoch"], s["base"]) != (epoch, version):
            problems.append("%s: CATCHUP from %s:%d while its replica is at %s:%d" % (
                client, s["epoch"], s["base"], epoch, version))
            epoch, version, state = s["epoch"], s["base"], None
        folded = s.get("folded")
        if folded and "version" in folded:
            if state is not None:
                try:
                    apply_diff(state, folded["diff"])
                except Exception as e:
                    problems.append("%s: the folded DIFF %d:%d..%d does not apply to its replica: %s" % (
                        client, epoch, folded["from"], folded["version"], e))
                    state = None
                else:
                    if state.digest() != folded["digest"]:
                        problems.append("%s: after the folded DIFF %d:%d..%d its replica's digest is %s, the "
                                        "CATCHUP's %s" % (client, epoch, folded["from"], folded["version"],
                                                          state.digest().hex()[:16], folded["digest"].hex()[:16]))
            version = folded["version"]
        for v, _, frame in s["diffs"]:
            if state is not None:
                try:
                    apply_diff(state, frame)
                except Exception as e:
                    problems.append("%s: DIFF %d:%d does not apply to its replica: %s" % (client, epoch, v, e))
                    state = None
            version = v
    return epoch, version, state, problems


def check_final(room, log, outcomes, snapshots, replicas):
    """Checks 1, 2 and 4 of the module's doc against every node's fresh SNAPSHOT (`snapshots`:
    name -> answer) and every reader's replica (`replicas`: name -> replica_of's answer)."""
    problems = []
    acked = {w for w, o in outcomes.items() if o[0] == "acked" and w != b"setup"}
    refused = {w for w, o in outcomes.items() if o[0] == "rejected"}
    logged = {w for w, _ in log.values() if w != b"setup"}
    # A log with a version no client saw DIFF by DIFF (check_room reports it: e.g. one only folded
    # catch-ups went over) cannot be replayed nor stand for the writes applied.
    complete = bool(log) and all(v in log for v in range(1, max(log) + 1))
    expected = replay(log) if complete else None
    positions = {}
    for node, snap in sorted(snapshots.items()):
        if snap["type"] != "SNAPSHOT":
            problems.append("%s: %s: a fresh JOIN answered %s" % (room, node, snap["type"]))
            continue
        state = wire.Snapshot(snap["snapshot"])
        positions[node] = (snap["epoch"], snap["version"], snap["digest"])
        if state.digest() != snap["digest"]:
            problems.append("%s: %s: SNAPSHOT digest is not its content's" % (room, node))
        main = [s for s in state.sections if s["id"] == SECTION]
        items = [i["id"] for i in main[0]["items"]] if main else []
        counts = {}
        for item in items:
            counts[item] = counts.get(item, 0) + 1
        twice = sorted(w for w, n in counts.items() if n > 1)
        if twice:
            problems.append("%s: %s holds writes more than once: %s" % (room, node, twice[:10]))
        lost = sorted(acked - set(counts))
        if lost:
            problems.append("%s: %s lacks %d acknowledged write(s): %s" % (room, node, len(lost), lost[:10]))
        applied = sorted(refused & set(counts))
        if applied:
            problems.append("%s: %s holds %d refused write(s): %s" % (room, node, len(applied), applied[:10]))
        if complete and snap["version"] == max(log):
            if set(counts) != logged:
                problems.append("%s: %s's items differ from the history's writes: only in state %s, only in "
                                "history %s" % (room, node, sorted(set(counts) - logged)[:10],
                                                sorted(logged - set(counts))[:10]))
            if snap["digest"] != expected.digest():
                problems.append("%s: %s's digest at v=%d is not the history's replayed from empty"
                                % (room, node, snap["version"]))
    if len(set(positions.values())) > 1:
        problems.append("%s: the nodes end on different states: %s" % (
            room, {n: (e, v, d.hex()[:16]) for n, (e, v, d) in positions.items()}))
    target = next(iter(positions.values()), None)
    for reader, (epoch, version, state, replica_problems) in sorted(replicas.items()):
        problems.extend("%s: %s" % (room, p) for p in replica_problems)
        mine = (epoch, version, state.digest() if state is not None else None)
        if target is not None and mine != target:
            problems.append("%s: %s's replica is at %s:%s digest %s, the nodes at %s:%s digest %s" % (
                room, reader, epoch, version, mine[2].hex()[:16] if mine[2] else None, target[0], target[1],
                target[2].hex()[:16]))
    return problems


class Nemesis:
    """Runs the test: cluster, workload, faults, checks, report. `run()` returns 0 or 1."""

    def __init__(self, seed, seconds, report_root, keep, faults=FAULTS, verbose=True):
        self.seed = seed
        self.kinds = tuple(faults)
        self.seconds = seconds
        self.rng = random.Random(seed)
        self.report_root = report_root
        self.keep = keep
        self.verbose = verbose
        self.tmp = tempfile.mkdtemp(prefix="snapsync-nemesis-")
        self.dir = os.path.join(self.tmp, "cluster")
        self.t0 = time.monotonic()
        self.timeline = []
        self.problems = []
        self.notes = []
        self.writers = []
        self.readers = []
        self.segments = {room: [] for room in ROOMS}
        self.outcomes = {room: {} for room in ROOMS}
        self.cluster_up = False
        self.final = {}
        self.fault_count = 0
        self.write_counts = {}

    # -- the cluster ----------------------------------------------------------------------

    def log(self, what):
        line = "%7.2f  %s" % (time.monotonic() - self.t0, what)
        self.timeline.append(line)
        if self.verbose:
            print("nemesis: " + line, file=sys.stderr, flush=True)

    def cluster(self, *args, check=True):
        env = dict(os.environ, SNAPSYNCD=daemon_path(), SNAPSYNC_CLUSTER_OWNER=str(os.getpid()))
        done = subprocess.run([CLUSTER, "--dir", self.dir, *args], capture_output=True, text=True, timeout=180,
                              env=env)
        if check and done.returncode != 0:
            raise AssertionError("scripts/cluster %s: exit %d: %s" % (" ".join(args), done.returncode,
                                                                      done.stderr.strip()[-2000:]))
        return done

    def state(self):
        with open(os.path.join(self.dir, "cluster.json")) as f:
            return json.load(f)

    def stream_leader(self):
        """The rooms stream's leader, as the servers' monitoring endpoints say (the majority's
        answer: a partitioned old leader may still believe it leads), or None."""
        votes = {}
        for server in self.state()["servers"]:
            url = "http://%s:%d/jsz?streams=true" % (server["host"], server["monitor_port"])
            try:
                with urllib.request.urlopen(url, timeout=2) as r:
                    body = json.load(r)
            except (OSError, ValueError):
                continue
            for account in body.get("account_details") or []:
                for stream in account.get("stream_detail") or []:
                    leader = (stream.get("cluster") or {}).get("leader")
                    if stream.get("name") == STREAM and leader:
                        votes[leader] = votes.get(leader, 0) + 1
        return max(votes, key=votes.get) if votes else None

    def heal(self, *args):
        """A fault's heal: a failure (a server or node not healthy within scripts/cluster's
        bound) is noted, and the wait for health that follows every fault decides."""
        done = self.cluster(*args, check=False)
        if done.returncode != 0:
            self.notes.append("scripts/cluster %s: exit %d: %s" % (" ".join(args), done.returncode,
                                                                   done.stderr.strip()[-500:]))
            self.log("scripts/cluster %s failed (exit %d)" % (" ".join(args), done.returncode))

    def wait_healthy(self):
        """Until every server's /healthz and every node's HELLO answer (bounded)."""
        deadline = time.monotonic() + HEALTHY_WITHIN
        while True:
            done = self.cluster("status", check=False)
            if done.returncode == 0:
                return True
            if time.monotonic() > deadline:
                self.notes.append("not healthy %g s after a heal:\n%s" % (HEALTHY_WITHIN, done.stdout))
                self.log("not healthy within %g s; scripts/cluster up" % HEALTHY_WITHIN)
                # What is down is started again; one that stays unhealthy fails the final heal.
                self.heal("up")
                return False
            time.sleep(0.5)

    # -- faults ---------------------------------------------------------------------------

    def fault(self, kind):
        """Injects one fault, holds it, heals it."""
        servers = ["n1", "n2", "n3"]
        nodes = [n["name"] for n in self.state()["nodes"]]
        leader = self.stream_leader() or self.rng.choice(servers)
        hold = self.rng.uniform(2.0, 6.0)
        if kind == "kill-node":
            victim = self.rng.choice(nodes)
            self.log("kill -9 node %s" % victim)
            self.cluster("kill", victim)
            time.sleep(hold)
            self.log("start %s" % victim)
            self.heal("start", victim)
        elif kind in ("kill-server", "kill-leader"):
            victim = leader if kind == "kill-leader" else self.rng.choice(servers)
            self.log("kill -9 server %s%s" % (victim, " (stream leader)" if victim == leader else ""))
            self.cluster("kill", victim)
            time.sleep(hold)
            self.log("start %s" % victim)
            self.heal("start", victim)
        elif kind in ("pause-node", "pause-leader"):
            victim = self.rng.choice(nodes) if kind == "pause-node" else leader
            self.log("SIGSTOP %s%s for %.1f s" % (victim, " (stream leader)" if victim == leader else "", hold))
            self.cluster("pause", victim)
            time.sleep(hold)
            self.log("SIGCONT %s" % victim)
            self.heal("resume", victim)
        elif kind == "quorum-loss":
            # Two servers killed, or hung (SIGSTOP: their connections stay open, nothing answers).
            victims = sorted(self.rng.sample(servers, 2))
            paused = self.rng.random() < 0.5
            self.log("%s servers %s (quorum lost) for %.1f s" % ("SIGSTOP" if paused else "kill -9", " ".join(victims),
                                                                  hold))
            self.cluster("pause" if paused else "kill", *victims)
            time.sleep(hold)
            self.log("%s %s" % ("SIGCONT" if paused else "start", " ".join(victims)))
            self.heal("resume" if paused else "start", *victims)
        elif kind == "partition-leader":
            hold = self.rng.uniform(8.0, 12.0)
            self.log("partition stream leader %s from the other servers for %.1f s" % (leader, hold))
            self.cluster("partition", leader)
            time.sleep(hold)
            self.log("heal %s" % leader)
            self.heal("heal", leader)
        elif kind == "isolate-server":
            victim = self.rng.choice(servers)
            hold = self.rng.uniform(5.0, 10.0)
            self.log("isolate server %s%s for %.1f s" % (victim, " (stream leader)" if victim == leader else "",
                                                         hold))
            self.cluster("isolate", victim)
            time.sleep(hold)
            self.log("heal %s" % victim)
            self.heal("heal", victim)
        else:
            raise ValueError(kind)
        self.wait_healthy()
        self.log("healthy; writes acked so far: %d" % self.acked())

    def schedule(self):
        """Every kind of fault once, in an order drawn from the seed; then faults drawn from it
        until the time is up."""
        kinds = list(self.kinds)
        self.rng.shuffle(kinds)
        return kinds

    def acked(self):
        # A copy (one C call, so atomic under the GIL): the writers add outcomes meanwhile.
        return sum(1 for w in self.writers for o in w.outcomes.copy().values() if o[0] == "acked")

    # -- the run --------------------------------------------------------------------------

    def run(self):
        try:
            self.log("seed %d, %d s of faults, in %s" % (self.seed, self.seconds, self.tmp))
            self.cluster("up", "--netns", "--", *NODE_ARGS, *extra_node_args())
            self.cluster_up = True
            state = self.state()
            self.log("cluster up: servers %s (%s), nodes %s" % (
                ", ".join("%s=%s" % (s["name"], s["host"]) for s in state["servers"]),
                nats_version(state), ", ".join(str(n["port"]) for n in state["nodes"])))
            self.workload()
            self.faults()
            self.heal_all()
            self.finish_workload()
            self.check()
        except Exception as e:
            self.problems.append("the test itself failed: %s: %s\n%s" % (type(e).__name__, e, traceback.format_exc()))
        finally:
            failed = bool(self.problems)
            report = self.report() if failed or self.keep else None
            self.teardown()
        self.summary(report)
        return 1 if failed else 0

    def workload(self):
        ports = [n["port"] for n in self.state()["nodes"]]
        for room in ROOMS:
            self.outcomes[room].update(first_write(ports, room, self.segments[room]))
        for room in ROOMS:
            for node in range(len(ports)):
                name = "%s-w%d" % (room.decode(), node + 1)
                # ~30% of the writes compare-and-set (every third); paced (50 ms between a
                # writer's writes), so that a short run stays within the nodes' history.
                w = Writer(name, ports, node, room, self.segments[room], 10 ** 9, cas_every=3, pause=0.05,
                           ops=nemesis_ops, failover=True)
                self.writers.append(w)
                r = Reader("%s-r%d" % (room.decode(), node + 1), ports, node, room, self.segments[room])
                self.readers.append(r)
        for t in self.readers + self.writers:
            t.start()
        deadline = time.monotonic() + HEALTHY_WITHIN
        while self.acked() < 20 and time.monotonic() < deadline:
            time.sleep(0.1)
        self.log("workload running: %d writers, %d readers, %d writes acked" % (
            len(self.writers), len(self.readers), self.acked()))

    def faults(self):
        end = time.monotonic() + self.seconds
        planned = self.schedule()
        count = 0
        while planned or time.monotonic() < end:
            kind = planned.pop(0) if planned else self.rng.choice(self.kinds)
            self.fault(kind)
            count += 1
            time.sleep(self.rng.uniform(1.0, 3.0))
        self.log("%d faults done" % count)
        self.fault_count = count

    def heal_all(self):
        names = [s["name"] for s in self.state()["servers"]] + [n["name"] for n in self.state()["nodes"]]
        self.cluster("resume", *names)
        self.cluster("up")          # heals every link, starts what is down
        self.wait_healthy()
        self.log("all healed")

    def finish_workload(self):
        for w in self.writers:
            w.stop.set()
        deadline = time.monotonic() + WRITERS_STOP_WITHIN
        for w in self.writers:
            w.join(timeout=max(0.1, deadline - time.monotonic()))
            if w.is_alive():
                self.problems.append("liveness: %s still writing %g s after the heal" % (w.name, WRITERS_STOP_WITHIN))
        for w in self.writers:
            self.outcomes[w.room].update(w.outcomes.copy())     # one still writing adds more
            self.problems.extend("writer: %s" % e for e in w.errors)
        counts = {}
        for room in ROOMS:
            for o in self.outcomes[room].values():
                counts[o[0]] = counts.get(o[0], 0) + 1
        self.log("writers stopped: %s" % counts)
        self.write_counts = counts

    def fresh_snapshots(self, room):
        out = {}
        for node in self.state()["nodes"]:
            _, conn = connect_any([node["port"]], 0, "probe-%s" % node["name"], [], within=30.0)
            try:
                out[node["name"]] = conn.join(room, None, ANSWER_WITHIN)
            finally:
                conn.close()
        return out

    def converged(self, room):
        """(True, snapshots) once every node's fresh JOIN and every reader of `room` are at one
        (epoch, version) and the nodes at one digest."""
        snapshots = self.fresh_snapshots(room)
        nodes = {(s.get("epoch"), s.get("version"), s.get("digest")) for s in snapshots.values()}
        readers = {r.conn.position(room) if r.conn else r.position for r in self.readers if r.room == room}
        one = len(nodes) == 1 and all(s["type"] == "SNAPSHOT" for s in snapshots.values())
        return one and readers == {next(iter(nodes))[:2]}, snapshots

    def check(self):
        final = self.final
        for room in ROOMS:
            deadline = time.monotonic() + CONVERGE_WITHIN
            while True:
                ok, snapshots = self.converged(room)
                if ok or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            if not ok:
                self.problems.append("%s: no convergence within %g s of the heal: nodes %s, readers %s" % (
                    room.decode(), CONVERGE_WITHIN,
                    {n: (s["type"], s.get("epoch"), s.get("version")) for n, s in snapshots.items()},
                    {r.name: r.conn.position(room) if r.conn else r.position for r in self.readers if r.room == room}))
            final[room] = snapshots
        for r in self.readers:
            r.stop.set()
        for r in self.readers:
            r.join(timeout=10)
            self.problems.extend("reader: %s" % e for e in r.errors)
        self.log("converged" if not self.problems else "checking after %d problem(s)" % len(self.problems))
        for room in ROOMS:
            self.final_read(room)
            log, problems = check_room(self.segments[room], self.outcomes[room])
            self.problems.extend("%s: %s" % (room.decode(), p) for p in problems)
            replicas = {r.name: replica_of(self.segments[room], r.name) for r in self.readers if r.room == room}
            self.problems.extend(check_final(room.decode(), log, self.outcomes[room], final[room], replicas))
            self.log("%s: %d versions, final %s" % (room.decode(), len(log), sorted(
                {(s.get("epoch"), s.get("version"), s.get("digest", b"").hex()[:12]) for s in final[room].values()})))

    def final_read(self, room):
        """Each node's history from version 0 (CATCHUP), recorded as a reader's, so the check sees
        every version each node holds, also those no reader happened to see. A node that folds the
        catch-up (one DIFF, PROTOCOL.md section 11.12: its chain and digest are checked) is read
        again on a version 2 connection, whose CATCHUP replays every version."""
        epochs = {s["epoch"] for s in self.segments[room]}
        for node in self.state()["nodes"]:
            for epoch in sorted(e for e in epochs if e is not None):
                try:
                    _, conn = connect_any([node["port"]], 0, "final-%s" % node["name"], self.segments[room],
                                          within=30.0)
                    try:
                        answer = conn.join(room, {"epoch": epoch, "version": 0}, ANSWER_WITHIN)
                    finally:
                        conn.close()
                    if answer["type"] == "CATCHUP" and answer.get("folded") is not None:
                        _, conn = connect_any([node["port"]], 0, "final-%s-v2" % node["name"], self.segments[room],
                                              within=30.0, versions=[2, 1])
                        try:
                            answer = conn.join(room, {"epoch": epoch, "version": 0}, ANSWER_WITHIN)
                        finally:
                            conn.close()
                except (ConnectionLost, NoAnswer) as e:
                    self.problems.append("%s: final read on %s: %s" % (room.decode(), node["name"], e))
                    continue
                if answer["type"] != "CATCHUP" and len(epochs) == 1:
                    self.notes.append("%s: the final read from %d:0 on %s was answered %s %s" % (
                        room.decode(), epoch, node["name"], answer["type"], answer.get("reason", "")))

    def teardown(self):
        for t in self.writers + self.readers:
            t.stop.set()
        if self.cluster_up or os.path.exists(os.path.join(self.dir, "cluster.json")):
            try:
                self.cluster("down", check=False)
            except Exception as e:
                print("nemesis: scripts/cluster down: %s" % e, file=sys.stderr)
        shutil.rmtree(self.tmp, ignore_errors=True)

    # -- report ---------------------------------------------------------------------------

    def report(self):
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        root = os.path.join(self.report_root, "snapsync-nemesis-%d-%s" % (self.seed, stamp))
        os.makedirs(root, exist_ok=True)
        for dirpath, _, files in os.walk(self.dir):
            for name in files:
                if name.endswith((".log", ".conf")) or name == "cluster.json":
                    src = os.path.join(dirpath, name)
                    dst = os.path.join(root, "logs", os.path.relpath(src, self.dir))
                    os.makedirs(os.path.dirname(dst), exist_ok=True)
                    shutil.copy(src, dst)
        with open(os.path.join(root, "report.txt"), "w") as f:
            f.write("SnapSync nemesis: seed %d, %d s of faults\n" % (self.seed, self.seconds))
            f.write("replay: scripts/nemesis --seed %d --seconds %d --faults %s\n" % (self.seed, self.seconds,
                                                                                 ",".join(self.kinds)))
            f.write("nats-server: %s\nsnapsyncd: %s\n\n" % (os.environ.get("SNAPSYNC_NATS_SERVER", "(pinned)"),
                                                          daemon_path()))
            f.write("== problems (%d)\n" % len(self.problems))
            for p in self.problems:
                f.write("- %s\n" % p)
            f.write("\n== notes\n")
            for n in self.notes:
                f.write("- %s\n" % n)
            f.write("\n== timeline\n%s\n" % "\n".join(self.timeline))
            f.write("\n== history excerpts\n")
            for room in ROOMS:
                f.write(self.excerpt(room))
            f.write("\n== writers' answers (last 30 each)\n")
            for w in self.writers:
                f.write("%s joins %s\n  %s\n" % (w.name, w.joins, w.answers[-30:]))
            f.write("\n== readers' joins\n")
            for r in self.readers:
                f.write("%s %s\n" % (r.name, r.joins))
        with open(os.path.join(root, "history.json"), "w") as f:
            json.dump({room.decode(): {
                "outcomes": {w.decode(errors="replace"): list(o) for w, o in self.outcomes[room].items()},
                "segments": [self.segment_json(s) for s in self.segments[room]]} for room in ROOMS}, f)
        return root

    @staticmethod
    def segment_json(s):
        """A segment for history.json; a folded catch-up's record with its bytes in hex."""
        out = {"client": s["client"], "answer": s["answer"], "epoch": s["epoch"], "base": s["base"],
               "diffs": [[v, (w or b"").decode(errors="replace"), d.hex()] for v, w, d in s["diffs"]]}
        if s.get("folded"):
            out["folded"] = {k: (v.hex() if isinstance(v, bytes) else v) for k, v in s["folded"].items()}
        return out

    def excerpt(self, room):
        """For each version a problem names (or the last ones), who saw which write there."""
        versions = set()
        for p in self.problems:
            if p.startswith(room.decode()):
                versions |= {int(v) for v in re.findall(r"v=(\d+)", p)}
        # Where the nodes ended, when they ended apart: the version after the lowest is where
        # one stopped following.
        ends = {s.get("version") for s in self.final.get(room, {}).values() if s.get("version") is not None}
        if len(ends) > 1:
            versions |= {v + d for v in ends for d in (-1, 0, 1, 2)}
        if not versions:
            top = max([v for s in self.segments[room] for v, _, _ in s["diffs"]] + [0])
            versions = set(range(max(1, top - 5), top + 1))
        out = ["-- %s\n" % room.decode()]
        for version in sorted(versions)[:40]:
            seen = {}
            for s in self.segments[room]:
                for v, w, d in s["diffs"]:
                    if v == version:
                        seen.setdefault((s["epoch"], w, d[-16:].hex()), []).append(s["client"])
            for (epoch, w, tail), clients in seen.items():
                out.append("  %d:%d write %r (DIFF ...%s) seen by %s\n" % (epoch, version, w, tail,
                                                                          sorted(set(clients))))
        return "".join(out)

    def summary(self, report):
        took = time.monotonic() - self.t0
        if self.problems:
            print("nemesis: FAILED (seed %d, %.0f s): %d problem(s):" % (self.seed, took, len(self.problems)),
                  file=sys.stderr)
            for p in self.problems[:30]:
                print("  - %s" % p, file=sys.stderr)
        else:
            print("nemesis: passed (seed %d, %.0f s, %d faults, writes %s)" % (
                self.seed, took, self.fault_count, self.write_counts), file=sys.stderr)
        if report:
            print("nemesis: report in %s" % report, file=sys.stderr)


def extra_node_args():
    """$SNAPSYNC_NEMESIS_NODE_ARGS: more snapsyncd arguments (e.g. --cluster-allow-unsafe-nats-server)."""
    return os.environ.get("SNAPSYNC_NEMESIS_NODE_ARGS", "").split()


def nats_version(state):
    url = "http://%s:%d/varz" % (state["servers"][0]["host"], state["servers"][0]["monitor_port"])
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return "nats-server " + json.load(r).get("version", "?")
    except (OSError, ValueError):
        return "nats-server ?"


def main(argv=None):
    parser = argparse.ArgumentParser(prog="scripts/nemesis", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=None, help="the schedule's seed (default: random, printed)")
    parser.add_argument("--seconds", type=int, default=None,
                        help="faults go on this long after each kind has run once (default: "
                        "$SNAPSYNC_NEMESIS_SECONDS, else %d; --long: %d)" % (SHORT_SECONDS, LONG_SECONDS))
    parser.add_argument("--long", action="store_true", help="the benchmark mode: %d s of faults" % LONG_SECONDS)
    parser.add_argument("--report-dir", default=os.environ.get("SNAPSYNC_NEMESIS_REPORT_DIR", tempfile.gettempdir()),
                        help="where a failing run leaves its report (default: %(default)s)")
    parser.add_argument("--keep", action="store_true", help="leave a report even when the run passes")
    parser.add_argument("--faults", default=",".join(FAULTS),
                        help="the kinds of fault to draw from, comma-separated (default: all: %(default)s)")
    args = parser.parse_args(argv)
    faults = args.faults.split(",")
    if not faults or any(f not in FAULTS for f in faults):
        parser.error("--faults: kinds are %s" % ", ".join(FAULTS))
    seed = args.seed if args.seed is not None else int(os.environ.get("SNAPSYNC_NEMESIS_SEED") or
                                                        random.SystemRandom().randrange(1 << 31))
    seconds = args.seconds if args.seconds is not None else (
        LONG_SECONDS if args.long else int(os.environ.get("SNAPSYNC_NEMESIS_SECONDS") or SHORT_SECONDS))
    problem = cluster_net.available()
    if problem:
        print("nemesis: skipped: %s" % problem, file=sys.stderr)
        return SKIPPED
    if not os.access(daemon_path(), os.X_OK):
        print("nemesis: no snapsyncd at %s (build it, or set SNAPSYNCD)" % daemon_path(), file=sys.stderr)
        return 1
    test = Nemesis(seed, seconds, args.report_dir, args.keep, faults)

    def interrupted(signum, frame):
        raise KeyboardInterrupt("signal %d" % signum)

    signal.signal(signal.SIGTERM, interrupted)
    # The whole run is bounded: faults, their heals, the writers' stop and the checks.
    signal.signal(signal.SIGALRM, lambda s, f: (_ for _ in ()).throw(TimeoutError("the run's bound")))
    signal.alarm(seconds + 600)
    try:
        return test.run()
    except KeyboardInterrupt:
        test.teardown()
        return 130


if __name__ == "__main__":
    sys.exit(main())
