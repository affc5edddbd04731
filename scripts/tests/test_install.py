"""scripts/install into a scratch prefix: files land where --help says, and a rerun is a no-op."""

import os
import shutil
import stat
import subprocess
import tempfile
import unittest

from tests.support import REPO, SCRIPTS

INSTALL = os.path.join(SCRIPTS, "install")


class InstallTests(unittest.TestCase):
    def run_install(self, *args):
        return subprocess.run([INSTALL, *args], capture_output=True, text=True, timeout=600)

    def test_install_is_idempotent_and_uninstall_removes_it(self):
        with tempfile.TemporaryDirectory() as tmp:
            binary = os.path.join(tmp, "built-snapsyncd")
            shutil.copy("/bin/true", binary)
            prefix, unitdir = os.path.join(tmp, "prefix"), os.path.join(tmp, "units")
            args = ["--prefix", prefix, "--unit-dir", unitdir, "--binary", binary]
            first = self.run_install(*args)
            self.assertEqual(first.returncode, 0, first.stderr)
            installed = os.path.join(prefix, "bin", "snapsyncd")
            unit = os.path.join(unitdir, "snapsyncd.service")
            self.assertTrue(os.stat(installed).st_mode & stat.S_IXUSR)
            with open(unit) as f:
                text = f.read()
            self.assertIn("ExecStart=%s --host 127.0.0.1" % installed, text)
            settings = [l for l in text.splitlines() if not l.startswith("#")]
            self.assertFalse([l for l in settings if "/usr/local" in l], "unit still names /usr/local")
            docs = [os.path.join(prefix, "share", "doc", "snapsync", name) for name in ("PROTOCOL.md", "AUTH.md")]
            for doc in docs:
                with open(doc) as f, open(os.path.join(REPO, "Protocol", os.path.basename(doc))) as g:
                    self.assertEqual(f.read(), g.read())
            self.assertEqual(first.stderr.count("install: installed "), 4, first.stderr)

            again = self.run_install(*args)
            self.assertEqual(again.returncode, 0, again.stderr)
            self.assertNotIn("install: installed ", again.stderr)
            self.assertEqual(again.stderr.count("install: unchanged "), 4, again.stderr)

            gone = self.run_install("--prefix", prefix, "--unit-dir", unitdir, "--uninstall")
            self.assertEqual(gone.returncode, 0, gone.stderr)
            self.assertFalse(os.path.exists(installed) or os.path.exists(unit) or any(map(os.path.exists, docs)))

    def test_help_and_bad_options(self):
        done = self.run_install("--help")
        self.assertEqual(done.returncode, 0)
        for word in ["--prefix", "--unit-dir", "--enable", "--uninstall", "daemon-reload"]:
            self.assertIn(word, done.stdout)
        done = self.run_install("--frobnicate")
        self.assertEqual(done.returncode, 2)
        self.assertIn("unknown option --frobnicate", done.stderr)


if __name__ == "__main__":
    unittest.main()
