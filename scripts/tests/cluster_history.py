"""The history check of the cluster tests: is what clients saw of a room one total order?

A pure function over what the clients recorded, in the style of Jepsen's and Porcupine's
checks, specialised to SnapSync's model: a room's writes form one sequence of versions, and
every client's view of it is a window onto that sequence. No I/O, no clock.

Inputs:

- ``segments``: what the connections saw of one room. A segment starts with an answer to a JOIN
  (SNAPSHOT or CATCHUP) at version ``base`` and continues with the DIFFs that followed on that
  connection, in arrival order, until the connection ended:
  ``{"client": name, "epoch": e, "base": v, "diffs": [(version, write_id, diff_bytes), ...]}``.
  ``write_id`` is what the test's writes put in the DIFF's ops (the DIFF itself has no write id
  field), ``diff_bytes`` the DIFF frame as received.
- ``writes``: every write a client sent, by write id, with what its client finally knows:
  ``("acked", epoch, version)``, ``("rejected", code)`` (a typed REJECT on every attempt:
  the write was not applied) or ``("indeterminate",)`` (``storage_failure``, or the connection
  ended before the answer, and no attempt was acked: it may be in the room at most once).

  A segment of a version 3 connection also has ``"chains": [(version, chain), ...]``: the room's
  chain at its answer's version (a SNAPSHOT's) and after each DIFF (PROTOCOL.md section 9), and
  ``diff_bytes`` is the DIFF's frame without its chain, as versions 1 and 2 encode it.

  A segment answered by a folded CATCHUP (version 3, PROTOCOL.md section 11.12) also has
  ``"folded": {"from", "to", "digest"}`` and, once its one DIFF came, ``"version"``,
  ``"write_id"``, ``"diff"`` (the DIFF frame without its chain) and ``"chain"``. That DIFF takes
  the replica from ``from`` (the segment's base) to ``to`` in one step: it is not a DIFF of the
  room's history, so it is neither in ``diffs`` nor in the log, and its write id is not an
  application of a write. The chain it carries is the room's at ``to``, taken by the client and
  not computed, and stands in ``chains`` like any other (two chains at one version are still
  found, and it must still be the hash of the chain at ``to`` - 1 and that version's DIFF when
  both are known). The DIFF's own check is the state digest: when the log holds every version up
  to ``to``, the room replayed from empty must have ``digest`` at ``to``, and the folded DIFF
  applied to the room at ``from`` must give it. A version that only folded catch-ups went over
  was never seen DIFF by DIFF: it is reported as never seen, saying so (the test's history did
  not cover it: read it on a version 2 connection, whose CATCHUP replays every version), and the
  acked writes at such versions are not reported lost on top of it.

The check (``check_room``) returns ``(log, problems)``: the room's sequence as the clients saw it
(version -> (write id, DIFF bytes)) and a list of violations, empty when the history is one
sequence in which every acknowledged write appears exactly once, at its acknowledged version,
no rejected write appears, and no write appears twice.
"""


import hashlib

ZERO_CHAIN = bytes(32)


def _folds(segments, epoch):
    """(client, folded record) of each folded catch-up of the epoch whose DIFF came."""
    return [(s["client"], s["folded"]) for s in segments
            if s["epoch"] == epoch and s.get("folded") and "version" in s["folded"]]


def check_folds(folds, log):
    """The state digest of each folded catch-up against the log replayed from empty (the room at
    version 0 is empty), for those whose `to` the log reaches without a gap: the room at `to`
    has the CATCHUP's digest, and the folded DIFF applied to the room at `from` gives it."""
    from tests.support import wire     # only histories with folded catch-ups decode DIFFs

    top = 0
    while top + 1 in log:
        top += 1
    folds = [(c, f) for c, f in folds if f["to"] <= top]
    if not folds:
        return []
    problems, state = [], wire.Snapshot()
    for version in range(0, max(f["to"] for _, f in folds) + 1):
        if version:
            try:
                for k, op in enumerate(wire.decode_frame(log[version][1], wire.SERVER_TO_CLIENT)["ops"]):
                    state.apply_op(op, k)
            except (wire.WireError, wire.BatchError, KeyError, ValueError) as e:
                return problems + ["the history does not replay at v=%d (%s): folded catch-ups not checked"
                                   % (version, e)]
        for client, f in folds:
            if f["from"] == version:
                try:
                    after = state.apply_batch(wire.decode_frame(f["diff"], wire.SERVER_TO_CLIENT)["ops"])
                except (wire.WireError, wire.BatchError) as e:
                    problems.append("%s: the folded DIFF v=%d..%d does not apply to the room at v=%d: %s"
                                    % (client, f["from"], f["to"], f["from"], e))
                else:
                    if after.digest() != f["digest"]:
                        problems.append("%s: the folded DIFF v=%d..%d applied to the room at v=%d gives digest "
                                        "%s, not the CATCHUP's %s" % (client, f["from"], f["to"], f["from"],
                                                                      after.digest().hex()[:16],
                                                                      f["digest"].hex()[:16]))
            if f["to"] == version and state.digest() != f["digest"]:
                problems.append("%s: folded CATCHUP to v=%d names digest %s, the history's is %s" % (
                    client, f["to"], f["digest"].hex()[:16], state.digest().hex()[:16]))
    return problems


def check_room(segments, writes):
    problems = []
    epochs = sorted({s["epoch"] for s in segments})
    if len(epochs) > 1:
        problems.append("the room has %d epochs %s: its history was lost or forked" % (len(epochs), epochs))
    epoch = epochs[0] if epochs else None

    # Each connection's view is gap-free: the DIFF after version v is v + 1 (after a folded
    # catch-up, the one after its DIFF, which is at the CATCHUP's to_version, two or more on).
    for s in segments:
        expected = s["base"] + 1
        folded = s.get("folded")
        if folded and "version" in folded:
            if folded["from"] != s["base"] or folded["to"] < folded["from"] + 2:
                problems.append("%s: a folded CATCHUP from v=%d to v=%d (a fold spans two versions or more)"
                                % (s["client"], folded["from"], folded["to"]))
            if folded["version"] != folded["to"]:
                problems.append("%s: the folded CATCHUP to v=%d was followed by DIFF v=%d"
                                % (s["client"], folded["to"], folded["version"]))
            expected = folded["version"] + 1
        for version, _, _ in s["diffs"]:
            if version != expected:
                problems.append("%s: DIFF v=%d after v=%d (a gap or a repeat)" % (s["client"], version, expected - 1))
            expected = version + 1

    # One sequence: every view of a version carries the same DIFF (so the same write id).
    log = {}
    seen_by = {}
    for s in segments:
        if s["epoch"] != epoch:
            continue
        for version, write_id, diff in s["diffs"]:
            if version not in log:
                log[version] = (write_id, diff)
                seen_by[version] = s["client"]
            elif log[version][1] != diff:
                problems.append("fork at v=%d: %s saw write %r, %s saw write %r (different DIFFs)"
                                % (version, seen_by[version], log[version][0], s["client"], write_id))
    folds = _folds(segments, epoch)
    folded_over = {v for _, f in folds for v in range(f["from"] + 1, f["to"] + 1)}
    unseen = set()
    if log:
        missing = [v for v in range(1, max(log) + 1) if v not in log]
        unseen = set(missing) & folded_over
        if missing:
            problems.append("versions never seen by any client: %s%s" % (missing, (
                " (%d of them only inside folded catch-ups, which do not show them one by one: read the "
                "history on a version 2 connection)" % len(unseen)) if unseen else ""))
    problems.extend(check_folds(folds, log))

    # The room's chain: one value per version whoever delivered it, each the hash of the one
    # before and that version's DIFF (a zero chain is one a node did not know: not compared).
    chains, chain_seen_by = {}, {}
    for s in segments:
        if s["epoch"] != epoch:
            continue
        for version, chain in s.get("chains", []):
            if chain == ZERO_CHAIN:
                continue
            if version not in chains:
                chains[version], chain_seen_by[version] = chain, s["client"]
            elif chains[version] != chain:
                problems.append("two chains at v=%d: %s saw %s, %s saw %s" % (
                    version, chain_seen_by[version], chains[version].hex()[:16], s["client"], chain.hex()[:16]))
    for version in sorted(chains):
        if version - 1 in chains and version in log:
            if hashlib.sha256(chains[version - 1] + log[version][1]).digest() != chains[version]:
                problems.append("the chain at v=%d is not the hash of v=%d's chain and v=%d's DIFF"
                                % (version, version - 1, version))

    # Each write id where its outcome allows it.
    where = {}
    for version in sorted(log):
        where.setdefault(log[version][0], []).append(version)
    for write_id, versions in sorted(where.items(), key=lambda kv: kv[1]):
        outcome = writes.get(write_id)
        if outcome is None:
            problems.append("write %r at v=%s was sent by no client" % (write_id, versions))
        elif len(versions) > 1:
            problems.append("write %r applied %d times, at v=%s" % (write_id, len(versions), versions))
        elif outcome[0] == "rejected":
            problems.append("write %r was rejected (%s) yet is at v=%d" % (write_id, outcome[1], versions[0]))
    for write_id, outcome in sorted(writes.items()):
        if outcome[0] != "acked":
            continue
        _, acked_epoch, acked_version = outcome
        if acked_epoch != epoch:
            problems.append("write %r acked in epoch %d, the room's is %s" % (write_id, acked_epoch, epoch))
        elif write_id not in where:
            if acked_version in unseen:
                continue    # only folded catch-ups went over its version: reported above as unseen
            problems.append("write %r acked at v=%d is not in the room (lost)" % (write_id, acked_version))
        elif where[write_id][0] != acked_version:
            problems.append("write %r acked at v=%d is at v=%d" % (write_id, acked_version, where[write_id][0]))
    return log, problems
