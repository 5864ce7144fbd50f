"""tests/compat/harness.py — a live llmd for the compatibility suites.

Each suite gets a real daemon, as an operator would run it: a temporary
directory with a self-signed certificate (openssl CLI), a SQLite DB set up
with llmadmin (tenants, keys), a free loopback port, llmd started with its
stderr in a log file and polled on /health until it serves.  Stopping sends
SIGTERM and insists on exit status 0, because a clean drain is part of the
contract.  When a test fails, the daemon's log lines written during that
test are printed, so a failure in CI explains itself.

Environment: LLMD_BIN_DIR (llmd, llmadmin), LLMD_MODEL (GGUF file),
LLMD_COMPAT_KEEP=1 keeps the temporary directory.
"""

import atexit
import ctypes
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.request

START_TIMEOUT = 120.0  # model load on a busy CI machine; only a bound against hangs
STOP_TIMEOUT = 60.0

_live = []  # daemons still running, killed at exit whatever happened


def _kill_leftovers():
    for d in list(_live):
        d.kill()


atexit.register(_kill_leftovers)
# A terminated test run unwinds (atexit runs) instead of dying on the spot.
signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))


def _die_with_parent():
    """Runs in the child before exec: llmd gets SIGKILL if this Python dies,
    so a killed test run never leaves a daemon behind."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def bin_dir():
    return os.path.abspath(os.environ.get("LLMD_BIN_DIR", "build/bin"))


def model_path():
    return os.path.abspath(
        os.environ.get("LLMD_MODEL", "models/SmolLM2-135M-Instruct.Q4_1.gguf"))


def model_id():
    """The id llmd serves: the GGUF file name without .gguf."""
    name = os.path.basename(model_path())
    return name[:-5] if name.endswith(".gguf") else name


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(argv, **kw):
    """Runs a command; a failure raises with its output, which says why."""
    p = subprocess.run(argv, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        raise RuntimeError("%s exited %d\nstdout: %s\nstderr: %s" %
                           (" ".join(argv), p.returncode, p.stdout, p.stderr))
    return p.stdout


def make_cert(cert, key):
    """A self-signed P-256 certificate for 127.0.0.1 and localhost."""
    run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
         "-nodes", "-days", "2", "-subj", "/CN=localhost", "-addext",
         "subjectAltName=IP:127.0.0.1,DNS:localhost", "-keyout", key, "-out", cert])


class Daemon:
    """One llmd with its own directory, certificate, DB and port.

    tenants: {name: [llmadmin tenant add options]}; every tenant gets one
    key (self.keys[name]).  disabled: tenants disabled before the start.
    """

    def __init__(self, tenants, disabled=(), extra_args=()):
        self.dir = tempfile.mkdtemp(prefix="llmd-compat-")
        self.cert = os.path.join(self.dir, "cert.pem")
        self.key = os.path.join(self.dir, "key.pem")
        self.db = os.path.join(self.dir, "llmd.db")
        self.log_path = os.path.join(self.dir, "llmd.log")
        self.llmd = os.path.join(bin_dir(), "llmd")
        self.llmadmin = os.path.join(bin_dir(), "llmadmin")
        self.model = model_id()
        self.keys = {}
        self.key_ids = {}
        self.proc = None
        self.port = None
        self.exit_status = None
        self._log = None
        try:  # a daemon that cannot start leaves nothing behind
            make_cert(self.cert, self.key)
            self._setup_db(tenants, disabled)
            self._start(list(extra_args))
        except BaseException:
            self.cleanup()
            raise

    # ---------------------------------------------------------------- DB --
    def admin(self, *args, json_out=False):
        argv = [self.llmadmin, "--db", self.db] + (["--json"] if json_out else []) + list(args)
        out = run(argv)
        return json.loads(out) if json_out else out

    def _setup_db(self, tenants, disabled):
        self.admin("init")
        for name, opts in tenants.items():
            self.admin("tenant", "add", name, *opts)
            k = self.admin("key", "create", name, json_out=True)
            if not str(k.get("key", "")).startswith("sk-llmd-") or k.get("tenant") != name:
                raise RuntimeError("llmadmin --json key create %s printed %r" % (name, k))
            self.keys[name] = k["key"]
            self.key_ids[name] = k["id"]
        for name in disabled:
            self.admin("tenant", "disable", name)

    # ----------------------------------------------------------- process --
    def _start(self, extra):
        # The port is free when picked but another process may take it before
        # llmd binds: a start that fails that way is tried again elsewhere.
        for attempt in range(3):
            self.port = free_port()
            argv = [self.llmd, "--model", model_path(), "--listen", "127.0.0.1:%d" % self.port,
                    "--tls-cert", self.cert, "--tls-key", self.key, "--db", self.db,
                    "--admin-socket", os.path.join(self.dir, "admin.sock"),
                    "--log-level", "info"] + extra
            self._log = open(self.log_path, "ab")
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=self._log,
                                         stderr=self._log, preexec_fn=_die_with_parent)
            _live.append(self)
            if self._wait_ready():
                return
            in_use = "in use" in self.log_text().lower()
            self.kill()
            if not in_use or attempt == 2:
                break
        self.print_log()
        raise RuntimeError("llmd did not become ready (log above)")

    def _wait_ready(self):
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                status, body, _ = self.get("/health", timeout=2)
                if status == 200 and json.loads(body).get("status") == "ok":
                    return True
            except (OSError, ValueError, ssl.SSLError):
                pass
            time.sleep(0.1)
        return False

    def ssl_context(self):
        return ssl.create_default_context(cafile=self.cert)

    @property
    def url(self):
        return "https://127.0.0.1:%d" % self.port

    def get(self, path, headers=None, timeout=10):
        """A plain GET with urllib: (status, body text, headers)."""
        req = urllib.request.Request(self.url + path, headers=headers or {})
        try:
            with urllib.request.urlopen(req, context=self.ssl_context(), timeout=timeout) as r:
                return r.status, r.read().decode(), r.headers
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode(), e.headers

    def stop(self):
        """SIGTERM and wait: returns the exit status (0 expected)."""
        if self.proc is None:
            return self.exit_status
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.exit_status = self.proc.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            self.exit_status = "hung after SIGTERM (killed)"
        self._forget()
        return self.exit_status

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._forget()

    def _forget(self):
        if self in _live:
            _live.remove(self)
        self.proc = None
        if self._log:
            self._log.close()
            self._log = None

    def cleanup(self):
        self.kill()
        if os.environ.get("LLMD_COMPAT_KEEP") == "1":
            sys.stderr.write("llmd-compat: kept %s\n" % self.dir)
        else:
            shutil.rmtree(self.dir, ignore_errors=True)

    def shutdown_checked(self):
        """Stops the daemon and raises (with its log) unless it exited 0."""
        status = self.stop()
        try:
            if status != 0:
                self.print_log()
                raise AssertionError("llmd exit status after SIGTERM: %r (expected 0)" % status)
        finally:
            self.cleanup()

    # --------------------------------------------------------------- log --
    def log_size(self):
        try:
            return os.path.getsize(self.log_path)
        except OSError:
            return 0

    def log_text(self, since=0):
        try:
            with open(self.log_path, "rb") as f:
                f.seek(since)
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def print_log(self, since=0, limit=200):
        lines = self.log_text(since).splitlines()
        sys.stderr.write("---- llmd log (%s, last %d of %d lines) ----\n" %
                         (self.log_path, min(limit, len(lines)), len(lines)))
        for line in lines[-limit:]:
            sys.stderr.write(line + "\n")
        sys.stderr.write("---- end of llmd log ----\n")


class DaemonTestCase(unittest.TestCase):
    """A test over a shared daemon (cls.daemon): when it fails, the daemon's
    log lines written while it ran are printed after it."""

    daemon = None

    def run(self, result=None):
        if result is None:
            return super().run(result)
        d = type(self).daemon
        start = d.log_size() if d else 0
        bad = len(result.failures) + len(result.errors)
        out = super().run(result)
        if d and len(result.failures) + len(result.errors) > bad:
            d.print_log(since=start)
        return out
