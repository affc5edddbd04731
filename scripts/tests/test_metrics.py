"""snapsyncd --metrics-listen, read as Prometheus would: urllib fetches /metrics and the
prometheus_client package's own parser reads it (scripts/deps.sh installs it), so the text is
checked against a second implementation of the exposition format, not against ours."""

import re
import unittest
import urllib.error
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from tests.support import Daemon, run_snapcat

# The README's table: family names as the parser reports them (a counter's without _total).
FAMILIES = {
    "snapsync_build_info": "gauge",
    "snapsync_connections": "gauge",
    "snapsync_connections_accepted": "counter",
    "snapsync_connections_refused": "counter",
    "snapsync_rooms": "gauge",
    "snapsync_rooms_deleted": "counter",
    "snapsync_rooms_expired": "counter",
    "snapsync_rooms_evicted": "counter",
    "snapsync_rooms_woken": "counter",
    "snapsync_items": "gauge",
    "snapsync_received_bytes": "counter",
    "snapsync_sent_bytes": "counter",
    "snapsync_frames_received": "counter",
    "snapsync_frame_bytes_received": "counter",
    "snapsync_frames_sent": "counter",
    "snapsync_frame_bytes_sent": "counter",
    "snapsync_writes_applied": "counter",
    "snapsync_writes_rejected": "counter",
    "snapsync_output_queue_bytes": "gauge",
    "snapsync_slow_consumer_disconnects": "counter",
    "snapsync_protocol_errors": "counter",
    "snapsync_auth_refused": "counter",
    "snapsync_requests_busy": "counter",
    "snapsync_input_yields": "counter",
    "snapsync_io_passes_spread": "counter",
    "snapsync_presence_changes": "counter",
    "snapsync_presence_updates": "counter",
    "snapsync_presence_updates_refused": "counter",
    "snapsync_windowed_members": "gauge",
    "snapsync_window_rebuilds": "counter",
    "snapsync_room_members_bucket": "gauge",
    "snapsync_room_members_count": "gauge",
    "snapsync_room_members_sum": "gauge",
    "snapsync_rooms_stored": "gauge",
    "snapsync_rooms_refused": "counter",
    "snapsync_data_directory_bytes": "gauge",
    "snapsync_data_directory_free_bytes": "gauge",
    "snapsync_tokens_expired": "counter",
    "snapsync_forbidden": "counter",
    "snapsync_uptime_seconds": "gauge",
    "snapsync_loop_pass_p99_seconds": "gauge",
    "snapsync_loop_pass_max_seconds": "gauge",
    "snapsync_fsync_duration_seconds": "histogram",
    "snapsync_write_ack_duration_seconds": "histogram",
}


class MetricsTests(unittest.TestCase):
    def setUp(self):
        self.daemon = Daemon("--metrics-listen", "127.0.0.1:0", "--fsync", "everysec")
        m = None
        for line in self.daemon.stderr_lines:
            m = re.search(r"metrics: serving http://(\S+?)/metrics", line) or m
        if m is None:
            self.daemon.stop()
            self.fail("no 'metrics: serving' line")
        self.base = "http://" + m.group(1)

    def tearDown(self):
        self.daemon.stop()

    def get(self, path, headers=None, method="GET", data=None):
        request = urllib.request.Request(self.base + path, data=data, headers=headers or {}, method=method)
        try:
            with urllib.request.urlopen(request, timeout=10) as r:
                return r.status, r.headers.get("Content-Type"), r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.headers.get("Content-Type"), e.read().decode()

    def scrape(self):
        status, content_type, text = self.get("/metrics")
        self.assertEqual(status, 200)
        self.assertTrue(content_type.startswith("text/plain; version=0.0.4"), content_type)
        families = {f.name: f for f in text_string_to_metric_families(text)}
        samples = {}
        for f in families.values():
            for s in f.samples:
                samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
        return families, samples

    def test_every_family_parses_with_its_type_and_writes_move_the_counters(self):
        families, before = self.scrape()
        for name, kind in FAMILIES.items():
            self.assertIn(name, families, "missing " + name)
            self.assertEqual(families[name].type, kind, name)
        self.assertEqual(before[("snapsync_writes_applied_total", ())], 0)

        done = run_snapcat(self.daemon.port, "append-sections r main\nappend-items r to main a b\n"
                                             "delete-items r nope\nstats\n")
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        self.assertIn("REJECT #3 r item_not_found", done.stdout)
        stats = dict(kv.split("=") for kv in done.stdout.splitlines()[-1].split()[2:])

        _, after = self.scrape()
        self.assertEqual(after[("snapsync_writes_applied_total", ())], 2)
        self.assertEqual(after[("snapsync_writes_applied_total", ())], int(stats["writes_applied"]))
        self.assertEqual(after[("snapsync_writes_rejected_total", (("code", "item_not_found"),))], 1)
        self.assertEqual(after[("snapsync_frames_received_total", (("type", "MUTATE"),))], 3)
        self.assertEqual(after[("snapsync_items", ())], 2)
        self.assertEqual(after[("snapsync_rooms", (("state", "resident"),))], 1)
        self.assertEqual(after[("snapsync_write_ack_duration_seconds_count", ())], 2)
        # Every label set of a family is one of a fixed list: no room name anywhere.
        for (name, labels) in after:
            for _, value in labels:
                self.assertNotEqual(value, "r", name)

    def test_healthz_unknown_paths_and_the_request_bounds(self):
        self.assertEqual(self.get("/healthz")[0::2], (200, "ok\n"))
        self.assertEqual(self.get("/metrics/x")[0], 404)
        self.assertEqual(self.get("/")[0], 404)
        self.assertEqual(self.get("/metrics", headers={"X-Big": "x" * 9000})[0], 400)
        self.assertEqual(self.get("/metrics", headers={"X-Small": "x" * 100})[0], 200)
        self.assertEqual(self.get("/metrics", method="POST")[0], 501)
        self.assertEqual(self.get("/metrics", method="POST", data=b"x")[0], 413)


if __name__ == "__main__":
    unittest.main()
