"""The systemd unit: hardened (systemd-analyze security exposure <= 2.0) and clean under verify."""

import os
import re
import shutil
import subprocess
import tempfile
import unittest
import urllib.request

from tests.support import SCRIPTS

UNIT = os.path.join(SCRIPTS, "systemd", "snapsyncd.service")
ANALYZE = shutil.which("systemd-analyze")
MAX_EXPOSURE = 2.0

if ANALYZE is None:
    print("test_systemd: skipping, systemd-analyze is not installed (Debian package systemd)")


@unittest.skipIf(ANALYZE is None, "systemd-analyze is not installed (Debian package systemd)")
class UnitTests(unittest.TestCase):
    def unit_with_binary(self, tmp):
        """A copy of the unit whose ExecStart names an executable that exists: verify checks it."""
        binary = os.path.join(tmp, "snapsyncd")
        shutil.copy("/bin/true", binary)
        with open(UNIT) as f:
            text = f.read()
        self.assertIn("ExecStart=/usr/local/bin/snapsyncd ", text)
        path = os.path.join(tmp, "snapsyncd.service")
        with open(path, "w") as f:
            f.write(text.replace("/usr/local/bin/snapsyncd", binary))
        return path

    def test_exposure_is_at_most_2(self):
        done = subprocess.run([ANALYZE, "security", "--offline=true", "--no-pager", UNIT],
                              capture_output=True, text=True, timeout=60)
        m = re.search(r"Overall exposure level for snapsyncd\.service: (\d+\.\d+)", done.stdout)
        self.assertIsNotNone(m, done.stdout + done.stderr)
        self.assertLessEqual(float(m.group(1)), MAX_EXPOSURE, done.stdout)

    def test_verify_is_clean(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = self.unit_with_binary(tmp)
            done = subprocess.run([ANALYZE, "verify", "--no-pager", path],
                                  capture_output=True, text=True, timeout=60)
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        self.assertEqual((done.stdout + done.stderr).strip(), "", "verify printed warnings")

    def test_the_unit_runs_the_daemon_as_documented(self):
        with open(UNIT) as f:
            keys = dict(re.findall(r"^(\w+)=(.*)$", f.read(), re.M))
        self.assertEqual(keys["Type"], "notify")
        self.assertEqual(keys["StateDirectory"], "snapsyncd")
        self.assertIn("--data-dir %S/snapsyncd", keys["ExecStart"])
        self.assertIn("--metrics-listen 127.0.0.1:9400", keys["ExecStart"])
        self.assertEqual(keys["MemoryDenyWriteExecute"], "yes")


if __name__ == "__main__":
    unittest.main()


STRACE = shutil.which("strace")


def expand_syscall_set(name, seen=None):
    """Syscall names in a systemd syscall group (@name), following nested groups."""
    seen = set() if seen is None else seen
    done = subprocess.run([ANALYZE, "syscall-filter", "--no-pager", name],
                          capture_output=True, text=True, timeout=60)
    names = set()
    for line in done.stdout.splitlines()[1:]:
        word = line.strip()
        if not word or word.startswith("#"):
            continue
        if word.startswith("@"):
            if word not in seen:
                seen.add(word)
                names |= expand_syscall_set(word, seen)
        else:
            names.add(word)
    return names


def unit_syscall_filter():
    """(allowed, denied) as the unit's SystemCallFilter= lines say."""
    with open(UNIT) as f:
        lines = re.findall(r"^SystemCallFilter=(.*)$", f.read(), re.M)
    allowed, denied = set(), set()
    for value in lines:
        deny = value.startswith("~")
        for word in value.lstrip("~").split():
            names = expand_syscall_set(word) if word.startswith("@") else {word}
            (denied if deny else allowed).update(names)
    return allowed, denied


@unittest.skipIf(ANALYZE is None, "systemd-analyze is not installed (Debian package systemd)")
@unittest.skipIf(STRACE is None, "strace is not installed (Debian package strace): cannot trace "
                                 "the daemon's system calls")
class DaemonUnderUnitRulesTests(unittest.TestCase):
    """systemd is not PID 1 on build machines, so the unit cannot be started here; instead the
    real daemon runs under strace through a session and a SIGTERM, and every system call it made
    is checked against the unit's SystemCallFilter= and MemoryDenyWriteExecute=."""

    def test_the_daemon_only_makes_system_calls_the_unit_allows(self):
        from tests.support import Daemon, run_snapcat
        allowed, denied = unit_syscall_filter()
        self.assertIn("setuid", denied)
        self.assertIn("openat", allowed)
        with tempfile.TemporaryDirectory() as tmp:
            trace = os.path.join(tmp, "trace")
            # With the metrics endpoint, as the unit runs it, scraped once (evhttp's calls too).
            daemon = Daemon("--metrics-listen", "127.0.0.1:0", wrapper=[STRACE, "-f", "-qq", "-o", trace])
            try:
                done = run_snapcat(daemon.port, "join r\nappend-sections r s\nappend-items r a\n"
                                                "stats\nping\nleave r\n")
                self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
                [url] = [m.group(1) for m in map(re.compile(r"metrics: serving (http://\S+/metrics)").search,
                                                 daemon.stderr_lines) if m]
                with urllib.request.urlopen(url, timeout=10) as r:
                    self.assertIn("snapsync_writes_applied_total 2", r.read().decode())
            finally:
                daemon.stop()
            with open(trace) as f:
                lines = f.read().splitlines()
        calls = set()
        wx = []
        for line in lines:
            # "PID name(args) = ret" or "PID <... name resumed> ..."; signals and exits differ.
            m = re.match(r"^\d+\s+(?:<\.\.\. )?([a-z0-9_]+)[( ]", line)
            if not m:
                continue
            calls.add(m.group(1))
            # MemoryDenyWriteExecute= refuses W+X mappings and making any mapping executable.
            if re.search(r"\b(mmap|mmap2)\(.*PROT_WRITE\|PROT_EXEC|\b(mmap|mmap2)\(.*PROT_EXEC\|PROT_WRITE", line) \
                    or re.search(r"\b(mprotect|pkey_mprotect)\(.*PROT_EXEC", line):
                wx.append(line)
        self.assertGreater(len(calls), 10, "strace saw almost nothing: %s" % sorted(calls))
        calls.discard("execve")   # the exec that starts the service happens before the filter
        self.assertEqual(sorted(calls & denied), [], "system calls the unit denies")
        self.assertEqual(sorted(calls - allowed), [], "system calls outside @system-service")
        self.assertEqual(wx, [], "mappings MemoryDenyWriteExecute= would refuse")
