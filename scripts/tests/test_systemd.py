"""The systemd unit: hardened (systemd-analyze security exposure <= 2.0) and clean under verify."""

import os
import re
import shutil
import subprocess
import tempfile
import unittest

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
        self.assertEqual(keys["MemoryDenyWriteExecute"], "yes")


if __name__ == "__main__":
    unittest.main()
