"""Network namespaces for scripts/cluster --netns: each NATS server on a network of its own, so
that a partition is a link going down, not a firewall rule.

On loopback every server shares 127.0.0.1, and nothing short of a packet filter can cut one
server's routes while its clients still reach it. Here each server runs in its own network
namespace with two veth links:

- a **route** link, on a bridge that lives in a namespace of its own (the route hub): the
  servers' cluster routes listen only there, so nothing in the root namespace can reach them;
- a **client** link, on a bridge in the root namespace that has an address on the client
  subnet: the snapsyncd nodes and the test clients, which run in the root namespace, reach
  every server's client and monitoring ports through it.

``partition(X)`` sets the hub's end of X's route link down: X loses its routes to the other
servers (packets are dropped, no reset: a real partition) while its clients still reach it, the
case where a stream leader is cut off from the two others. ``isolate(X)`` also sets its client
link down. ``heal`` sets them up again.

Names are unique per topology (a random 4-hex-digit id: namespaces ``snapsync-ID-n1``..,
``snapsync-ID-rt``; root links ``ssnIDc`` (the client bridge) and ``ssnIDc1``..), and so is the
client subnet (10.A.B.0/24, chosen among those no root address or route uses), so topologies of
concurrent test runs do not meet. Every topology is recorded in REGISTRY (``ID.json``: the
cluster's state directory, and the pid of an owner process if one was named); creating or
removing one first removes the stale ones: those whose state directory no longer names them,
whose owner has died, and any namespace or root link with the prefix that no record claims
(after a kill -9 of the process that made it). Removing a namespace first SIGKILLs what runs
in it. All under one lock file, so concurrent runs do not race.

Needs root and iproute2 (`ip`); nothing else (no iptables).
"""

import fcntl
import json
import os
import random
import signal
import subprocess
import time

REGISTRY = "/run/snapsync-cluster-net"
NS_PREFIX = "snapsync-"
LINK_PREFIX = "ssn"
CLIENT_PORT = 4222
ROUTE_PORT = 6222
MONITOR_PORT = 8222


class NetError(Exception):
    pass


def available():
    """None when this process can make namespaces, else why not (for a skip message)."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    try:
        subprocess.run(["ip", "netns", "list"], check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError) as e:
        return "ip netns does not work here: %s" % e
    return None


def ip(*args, check=True):
    done = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and done.returncode != 0:
        raise NetError("ip %s: %s" % (" ".join(args), done.stderr.strip()))
    return done


def ns_name(net_id, member):
    return "%s%s-%s" % (NS_PREFIX, net_id, member)


def hub(net_id):
    return ns_name(net_id, "rt")


def client_bridge(net_id):
    return "%s%sc" % (LINK_PREFIX, net_id)


def client_veth(net_id, index):
    return "%s%sc%d" % (LINK_PREFIX, net_id, index + 1)


class _Lock:
    def __enter__(self):
        os.makedirs(REGISTRY, exist_ok=True)
        self.f = open(os.path.join(REGISTRY, "lock"), "w")
        fcntl.flock(self.f, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        fcntl.flock(self.f, fcntl.LOCK_UN)
        self.f.close()


def _start_time(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _records():
    out = {}
    try:
        names = os.listdir(REGISTRY)
    except FileNotFoundError:
        return out
    for name in names:
        if name.endswith(".json"):
            try:
                with open(os.path.join(REGISTRY, name)) as f:
                    out[name[:-5]] = json.load(f)
            except (OSError, ValueError):
                out[name[:-5]] = {}
    return out


def _stale(net_id, record):
    """Whether a recorded topology has lost what it belongs to."""
    owner = record.get("owner")
    if owner and _start_time(owner) != record.get("owner_start"):
        return True
    try:
        with open(os.path.join(record.get("dir", "/nonexistent"), "cluster.json")) as f:
            return (json.load(f).get("netns") or {}).get("id") != net_id
    except (OSError, ValueError):
        return True


def _namespaces():
    return [line.split()[0] for line in ip("netns", "list").stdout.splitlines() if line.strip()]


def _root_links():
    out = []
    for line in ip("-o", "link", "show").stdout.splitlines():
        name = line.split(":", 2)[1].strip().split("@")[0]
        out.append(name)
    return out


def _remove(net_id):
    """Kills what runs in the topology's namespaces (and the cluster's nodes, which run in the
    root namespace, when its state still names them), deletes them and its root links."""
    record = _records().get(net_id) or {}
    try:
        with open(os.path.join(record.get("dir", "/nonexistent"), "cluster.json")) as f:
            state = json.load(f)
    except (OSError, ValueError):
        state = {}
    if (state.get("netns") or {}).get("id") == net_id:
        for node in state.get("nodes") or []:
            try:
                with open("/proc/%d/cmdline" % node["pid"], "rb") as f:
                    if os.path.basename(f.read().split(b"\0", 1)[0]) == b"snapsyncd":
                        os.kill(node["pid"], signal.SIGKILL)
            except (OSError, TypeError, KeyError):
                pass
    for ns in [n for n in _namespaces() if n.startswith(ns_name(net_id, ""))]:
        pids = ip("netns", "pids", ns, check=False).stdout.split()
        for pid in pids:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
        ip("netns", "del", ns, check=False)
    for link in _root_links():
        if link.startswith(LINK_PREFIX + net_id):
            ip("link", "del", link, check=False)
    try:
        os.unlink(os.path.join(REGISTRY, net_id + ".json"))
    except FileNotFoundError:
        pass


def _id_of_namespace(ns):
    return ns[len(NS_PREFIX):].split("-", 1)[0]


def _id_of_link(link):
    return link[len(LINK_PREFIX):len(LINK_PREFIX) + 4]


def cleanup_stale():
    """Removes every topology that is stale (see the module's doc); returns their ids."""
    with _Lock():
        return _cleanup_stale_locked()


def _cleanup_stale_locked():
    records = _records()
    removed = [i for i, r in records.items() if _stale(i, r)]
    for net_id in removed:
        _remove(net_id)
    live = set(records) - set(removed)
    orphans = {_id_of_namespace(n) for n in _namespaces() if n.startswith(NS_PREFIX)}
    orphans |= {_id_of_link(l) for l in _root_links()
                if l.startswith(LINK_PREFIX) and len(l) >= len(LINK_PREFIX) + 5}
    for net_id in sorted(orphans - live):
        _remove(net_id)
        removed.append(net_id)
    return removed


def _used_subnets():
    used = set()
    for args in (("-4", "-o", "addr", "show"), ("-4", "route", "show", "table", "all")):
        for word in ip(*args, check=False).stdout.split():
            if word.count(".") == 3 and word.split("/")[0].replace(".", "").isdigit():
                parts = word.split("/")[0].split(".")
                used.add(tuple(parts[:3]))
    return used


def create(root, servers, owner=None):
    """Makes a topology for `servers` (3 names) and records it as belonging to the cluster in
    state directory `root` (and to process `owner`, if given). Returns its description, kept in
    cluster.json: {"id", "client_net", "route_net", "servers": {name: {"ns", "client", "route"}}}."""
    with _Lock():
        _cleanup_stale_locked()
        taken = {_id_of_namespace(n) for n in _namespaces()} | set(_records())
        rng = random.SystemRandom()
        net_id = next(i for i in ("%04x" % rng.randrange(1 << 16) for _ in range(100)) if i not in taken)
        used = _used_subnets()
        a, b = next((a, b) for a, b in ((rng.randrange(64, 250), rng.randrange(0, 255)) for _ in range(1000))
                    if ("10", str(a), str(b)) not in used)
        client_net, route_net = "10.%d.%d" % (a, b), "10.%d.%d" % (a, (b + 1) % 255)
        record = {"dir": root, "created": time.time()}
        if owner:
            record.update(owner=owner, owner_start=_start_time(owner))
        with open(os.path.join(REGISTRY, net_id + ".json"), "w") as f:
            json.dump(record, f)
        net = {"id": net_id, "client_net": client_net, "route_net": route_net, "servers": {}}
        try:
            _build(net, servers)
        except Exception:
            _remove(net_id)
            raise
        return net


def _build(net, servers):
    net_id = net["id"]
    rt = hub(net_id)
    ip("netns", "add", rt)
    ip("-n", rt, "link", "set", "lo", "up")
    ip("-n", rt, "link", "add", "br0", "type", "bridge")
    ip("-n", rt, "link", "set", "br0", "up")
    bridge = client_bridge(net_id)
    ip("link", "add", bridge, "type", "bridge")
    ip("addr", "add", "%s.254/24" % net["client_net"], "dev", bridge)
    ip("link", "set", bridge, "up")
    for index, name in enumerate(servers):
        ns = ns_name(net_id, name)
        ip("netns", "add", ns)
        ip("-n", ns, "link", "set", "lo", "up")
        # Route link: one end in the hub (named after the server), the other in its namespace.
        tmp = "%s%sr%d" % (LINK_PREFIX, net_id, index + 1)
        ip("link", "add", tmp, "type", "veth", "peer", "name", tmp + "p")
        ip("link", "set", tmp, "netns", rt)
        ip("-n", rt, "link", "set", tmp, "name", name)
        ip("-n", rt, "link", "set", name, "master", "br0")
        ip("-n", rt, "link", "set", name, "up")
        ip("link", "set", tmp + "p", "netns", ns)
        ip("-n", ns, "link", "set", tmp + "p", "name", "route")
        route = "%s.%d" % (net["route_net"], index + 1)
        ip("-n", ns, "addr", "add", route + "/24", "dev", "route")
        ip("-n", ns, "link", "set", "route", "up")
        # Client link: one end on the root namespace's client bridge.
        veth = client_veth(net_id, index)
        ip("link", "add", veth, "type", "veth", "peer", "name", veth + "p")
        ip("link", "set", veth, "master", bridge)
        ip("link", "set", veth, "up")
        ip("link", "set", veth + "p", "netns", ns)
        ip("-n", ns, "link", "set", veth + "p", "name", "client")
        client = "%s.%d" % (net["client_net"], index + 1)
        ip("-n", ns, "addr", "add", client + "/24", "dev", "client")
        ip("-n", ns, "link", "set", "client", "up")
        net["servers"][name] = {"ns": ns, "client": client, "route": route, "index": index}


def destroy(net):
    """Removes the topology (killing anything still running in its namespaces), and stale ones."""
    with _Lock():
        _remove(net["id"])
        _cleanup_stale_locked()


def exec_prefix(net, name):
    """The command prefix that runs a program in server `name`'s namespace."""
    return ["ip", "netns", "exec", net["servers"][name]["ns"]]


def _set(net, name, route, client, state):
    server = net["servers"][name]
    if route:
        ip("-n", hub(net["id"]), "link", "set", name, state)
    if client:
        ip("link", "set", client_veth(net["id"], server["index"]), state)


def partition(net, name):
    """Cuts server `name` from the other servers (its route link down); its clients still reach it."""
    _set(net, name, True, False, "down")


def isolate(net, name):
    """Cuts server `name` from everything: the other servers and its clients."""
    _set(net, name, True, True, "down")


def heal(net, name):
    """Both links of server `name` up again."""
    _set(net, name, True, True, "up")


def links(net):
    """{server: (route link up, client link up)} as the kernel says."""
    out = {}
    for name, server in net["servers"].items():
        route = ip("-n", hub(net["id"]), "-o", "link", "show", name).stdout
        client = ip("-o", "link", "show", client_veth(net["id"], server["index"])).stdout
        out[name] = (_admin_up(route), _admin_up(client))
    return out


def _admin_up(line):
    """Whether an `ip -o link show` line's flags (<BROADCAST,MULTICAST,UP,LOWER_UP>) say UP."""
    flags = line.split("<", 1)[1].split(">", 1)[0].split(",") if "<" in line else []
    return "UP" in flags
