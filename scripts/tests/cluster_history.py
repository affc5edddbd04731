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

The check (``check_room``) returns ``(log, problems)``: the room's sequence as the clients saw it
(version -> (write id, DIFF bytes)) and a list of violations, empty when the history is one
sequence in which every acknowledged write appears exactly once, at its acknowledged version,
no rejected write appears, and no write appears twice.
"""


import hashlib

ZERO_CHAIN = bytes(32)


def check_room(segments, writes):
    problems = []
    epochs = sorted({s["epoch"] for s in segments})
    if len(epochs) > 1:
        problems.append("the room has %d epochs %s: its history was lost or forked" % (len(epochs), epochs))
    epoch = epochs[0] if epochs else None

    # Each connection's view is gap-free: the DIFF after version v is v + 1.
    for s in segments:
        expected = s["base"] + 1
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
    if log:
        missing = [v for v in range(1, max(log) + 1) if v not in log]
        if missing:
            problems.append("versions never seen by any client: %s" % missing)

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
            problems.append("write %r acked at v=%d is not in the room (lost)" % (write_id, acked_version))
        elif where[write_id][0] != acked_version:
            problems.append("write %r acked at v=%d is at v=%d" % (write_id, acked_version, where[write_id][0]))
    return log, problems
