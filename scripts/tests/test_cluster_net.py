"""scripts/cluster_net.py, the network namespaces of scripts/cluster --netns, without servers:
the links a partition and an isolation set down and a heal sets up again, and the clean-up of
a topology, its own and a stale one's. Needs root and `ip netns` (skipped otherwise)."""

import json
import os
import subprocess
import tempfile
import sys
import unittest

import cluster_net

SERVERS = ["n1", "n2", "n3"]


PORT = 7000
CONNECT = ("import socket, sys\n"
           "c = socket.create_connection((sys.argv[1], %d), timeout=1)\n"
           "print(c.recv(64).decode())\n" % PORT)
# Says which namespace answered: a gateway that accepts any connection (some sandboxes' do)
# is not the server.
LISTEN = ("import socket, sys\n"
          "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
          "s.bind(('0.0.0.0', %d)); s.listen(16); print('ready', flush=True)\n"
          "while True:\n"
          "    c = s.accept()[0]; c.sendall(sys.argv[1].encode()); c.close()\n" % PORT)


def reachable(address, prefix=()):
    """Which server's listener (`listen`) answers a TCP connection to `address` within a second,
    from the root namespace or through `prefix` (a namespace's exec prefix); None if none does."""
    done = subprocess.run([*prefix, sys.executable, "-c", CONNECT, address], capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 and done.stdout.strip() in SERVERS else None


@unittest.skipIf(cluster_net.available(), cluster_net.available() or "")
class ClusterNetTests(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="snapsync-net-test-")
        self.addCleanup(self.tmp.cleanup)
        self.net = self.make(self.tmp.name)
        self.addCleanup(lambda: cluster_net.destroy(self.net))

    def make(self, root):
        """A topology that belongs to the (fake) cluster in `root`, as scripts/cluster records it."""
        net = cluster_net.create(root, SERVERS)
        with open(os.path.join(root, "cluster.json"), "w") as f:
            json.dump({"netns": net, "nodes": []}, f)
        return net

    def listen(self, net, name):
        """A TCP listener in server `name`'s namespace, on all its addresses."""
        proc = subprocess.Popen(cluster_net.exec_prefix(net, name) + [sys.executable, "-c", LISTEN, name],
                                stdout=subprocess.PIPE, text=True)
        self.addCleanup(proc.stdout.close)
        self.addCleanup(proc.wait)
        self.addCleanup(proc.kill)
        self.assertEqual(proc.stdout.readline().strip(), "ready")

    def namespaces(self, net):
        listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        return sorted(line.split()[0] for line in listed.splitlines() if cluster_net.ns_name(net["id"], "") in line)

    def test_partition_cuts_the_routes_only_isolate_both_heal_restores(self):
        self.assertEqual(self.namespaces(self.net), sorted(cluster_net.ns_name(self.net["id"], n)
                                                           for n in SERVERS + ["rt"]))
        n1, n2 = self.net["servers"]["n1"], self.net["servers"]["n2"]
        in_n1 = cluster_net.exec_prefix(self.net, "n1")
        self.listen(self.net, "n1")
        self.listen(self.net, "n2")
        self.assertEqual(cluster_net.links(self.net), {n: (True, True) for n in SERVERS})
        self.assertEqual(reachable(n2["client"]), "n2")
        self.assertEqual(reachable(n2["route"], in_n1), "n2")
        # The root namespace has no address on the route network: it never reaches the routes.
        self.assertIsNone(reachable(n1["route"]))

        cluster_net.partition(self.net, "n2")
        self.assertEqual(cluster_net.links(self.net)["n2"], (False, True))
        self.assertEqual(reachable(n2["client"]), "n2", "a partitioned server's clients no longer reach it")
        self.assertIsNone(reachable(n2["route"], in_n1), "n1 still reaches n2's routes")

        cluster_net.isolate(self.net, "n2")
        self.assertEqual(cluster_net.links(self.net)["n2"], (False, False))
        self.assertIsNone(reachable(n2["client"]))

        cluster_net.heal(self.net, "n2")
        self.assertEqual(cluster_net.links(self.net), {n: (True, True) for n in SERVERS})
        self.assertEqual(reachable(n2["client"]), "n2")
        self.assertEqual(reachable(n2["route"], in_n1), "n2")

    def test_two_topologies_do_not_share_names_or_client_subnets(self):
        other_root = tempfile.TemporaryDirectory(prefix="snapsync-net-test-")
        self.addCleanup(other_root.cleanup)
        other = self.make(other_root.name)
        self.addCleanup(lambda: cluster_net.destroy(other))
        self.assertNotEqual(other["id"], self.net["id"])
        self.assertNotEqual(other["client_net"], self.net["client_net"])
        cluster_net.destroy(other)
        self.assertEqual(self.namespaces(other), [])
        self.assertEqual(len(self.namespaces(self.net)), 4, "destroying one topology took the other's")

    def test_a_topology_whose_cluster_is_gone_is_removed_with_what_runs_in_it(self):
        stale_root = tempfile.mkdtemp(prefix="snapsync-net-test-")
        stale = self.make(stale_root)
        sleeper = subprocess.Popen(cluster_net.exec_prefix(stale, "n1") + ["sleep", "600"])
        self.addCleanup(sleeper.wait)
        subprocess.run(["rm", "-rf", stale_root], check=True)
        removed = cluster_net.cleanup_stale()
        self.assertIn(stale["id"], removed)
        self.assertEqual(self.namespaces(stale), [])
        self.assertEqual(sleeper.wait(timeout=10), -9)
        links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
        self.assertNotIn(cluster_net.client_bridge(stale["id"]), links)
        self.assertNotIn(self.net["id"], removed)
        self.assertEqual(len(self.namespaces(self.net)), 4)


if __name__ == "__main__":
    unittest.main()
