"""Shared helpers for snapcat's tests: loading snapcat, running it, and running the real daemon."""

import importlib.machinery
import importlib.util
import os
import queue
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

SCRIPTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO = os.path.dirname(SCRIPTS)
SNAPCAT = os.path.join(SCRIPTS, "snapcat")
VECTORS = os.path.join(REPO, "Protocol", "vectors")

if SCRIPTS not in sys.path:
    sys.path.insert(0, SCRIPTS)
import snapcat_wire as wire  # noqa: E402,F401


def load_snapcat():
    """scripts/snapcat as a module (it has no .py suffix, so it needs an explicit loader)."""
    loader = importlib.machinery.SourceFileLoader("snapcat", SNAPCAT)
    spec = importlib.util.spec_from_loader("snapcat", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


snapcat = load_snapcat()


def daemon_path():
    return os.environ.get("SNAPSYNCD") or os.path.join(REPO, ".build", "debug", "snapsyncd")


def example_token():
    """The token of Protocol/AUTH.md section 6, as the vectors carry it in an AUTH."""
    import json
    with open(os.path.join(VECTORS, "messages.json")) as f:
        tests = json.load(f)["tests"]
    [t] = [t for t in tests if t["comment"] == "AUTH with a token"]
    return t["message"]["credentials"]


def sent_frames(stdout):
    """The frames snapcat --hex says it sent ('> ' lines), decoded."""
    out = []
    for line in stdout.splitlines():
        if line.startswith("> "):
            out.append(wire.decode_frame(bytes.fromhex("".join(line.split()[1:]))))
    return out


class Daemon:
    """The real snapsyncd on an ephemeral loopback port with a throwaway data directory."""

    START_TIMEOUT = 120

    def __init__(self, *extra_args, wrapper=()):
        self.path = daemon_path()
        if not os.access(self.path, os.X_OK):
            raise AssertionError(
                "snapsyncd binary not found at %s: build it (swift build) or set SNAPSYNCD"
                % self.path)
        self.data_dir = tempfile.TemporaryDirectory(prefix="snapcat-test-")
        self.stderr_lines = []
        self.proc = subprocess.Popen(
            [*wrapper, self.path, "--host", "127.0.0.1", "--port", "0", "--data-dir", self.data_dir.name,
             *extra_args],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            start_new_session=True)     # its own process group, so stop() can end a wrapper too
        self.wrapped = bool(wrapper)
        found = queue.Queue()
        self.drain = threading.Thread(target=self._drain, args=(found,), daemon=True)
        self.drain.start()
        try:
            self.host, self.port = found.get(timeout=self.START_TIMEOUT)
        except queue.Empty:
            self.stop()
            raise AssertionError("snapsyncd printed no 'listening on HOST:PORT' within %d s; "
                                 "stderr:\n%s" % (self.START_TIMEOUT, self.log()))
        if self.port is None:
            self.stop()
            raise AssertionError("%s exited with status %s before printing 'listening on "
                                 "HOST:PORT' (stale build? set SNAPSYNCD); stderr:\n%s"
                                 % (self.path, self.proc.returncode, self.log()))

    def _drain(self, found):
        pattern = re.compile(r"listening on (\S+):(\d+)")
        told = False
        for raw in self.proc.stderr:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            self.stderr_lines.append(line)
            m = pattern.search(line)
            if m and not told:
                host = m.group(1).strip("[]")
                found.put((host, int(m.group(2))))
                told = True
        if not told:
            found.put((None, None))

    def log(self):
        return "\n".join(self.stderr_lines[-50:])

    def daemon_pid(self):
        """The daemon's pid: the process itself, or the wrapper's (e.g. strace's) child."""
        if not self.wrapped:
            return self.proc.pid
        try:
            with open("/proc/%d/task/%d/children" % (self.proc.pid, self.proc.pid)) as f:
                children = f.read().split()
        except OSError:
            children = []
        return int(children[0]) if children else None

    def stop(self):
        """SIGTERM to the daemon (a clean shutdown), SIGKILL to the group if that takes > 10 s."""
        if self.proc.poll() is None:
            pid = self.daemon_pid()
            try:
                os.kill(pid if pid else self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=10)
            except (subprocess.TimeoutExpired, ProcessLookupError):
                pass
        if self.proc.poll() is None or self.wrapped:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            self.proc.wait(timeout=10)
        self.drain.join(timeout=5)
        if not self.drain.is_alive():      # closing under a blocked reader would block too
            self.proc.stderr.close()
        self.data_dir.cleanup()


def snapcat_env(env=None):
    """The environment for a snapcat process: this one without SNAPSYNC_TOKEN (so that a token
    set where the tests run does not change what they send), plus ``env``."""
    out = {k: v for k, v in os.environ.items() if k != snapcat.TOKEN_ENV}
    out.update(env or {})
    return out


def run_snapcat(port, commands, *options, timeout=120, host="127.0.0.1", env=None):
    """Runs snapcat in a pipe: commands on stdin, returns the CompletedProcess (text)."""
    return subprocess.run([sys.executable, SNAPCAT, *options, host, str(port)],
                          input=commands, capture_output=True, text=True, timeout=timeout,
                          env=snapcat_env(env))


class Interactive:
    """A snapcat process driven line by line, with its output read as it arrives."""

    def __init__(self, port, *options, host="127.0.0.1", env=None):
        self.proc = subprocess.Popen(
            [sys.executable, SNAPCAT, *options, host, str(port)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            bufsize=1, env=snapcat_env(env))
        self.lines = queue.Queue()
        self.seen = []
        self.stderr = []
        self.pumps = [
            threading.Thread(target=self._pump, args=(self.proc.stdout, self.lines), daemon=True),
            threading.Thread(target=self._pump, args=(self.proc.stderr, self.stderr), daemon=True)]
        for t in self.pumps:
            t.start()

    @staticmethod
    def _pump(stream, sink):
        for line in stream:
            if isinstance(sink, list):
                sink.append(line.rstrip("\n"))
            else:
                sink.put(line.rstrip("\n"))
        if not isinstance(sink, list):
            sink.put(None)

    def send(self, line):
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def expect(self, pattern, timeout=60):
        """The next output line matching pattern (lines before it are kept in self.seen)."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            try:
                line = self.lines.get(timeout=max(0.01, left)) if left > 0 else None
            except queue.Empty:
                line = None
            if line is None:
                raise AssertionError("no line matching %r within %g s; output so far:\n%s\nstderr:\n%s"
                                     % (pattern, timeout, "\n".join(self.seen),
                                        "\n".join(self.stderr)))
            self.seen.append(line)
            if regex.search(line):
                return line

    def close(self, timeout=60):
        """Closes stdin and returns the exit status."""
        try:
            self.proc.stdin.close()
        except BrokenPipeError:
            pass
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError("snapcat did not exit within %g s of EOF" % timeout)
        finally:
            self.kill()

    def kill(self):
        """Ends the process if it still runs and releases its pipes (safe to call twice)."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        for t in self.pumps:
            t.join(timeout=5)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                stream.close()
            except (OSError, ValueError):
                pass
