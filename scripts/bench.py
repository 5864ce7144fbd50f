#!/usr/bin/env python3
"""scripts/bench.py — `make bench`: llmd beside llama.cpp's llama-server under
the scenarios of bench/scenarios/, driven by llmbench, written up as
bench/REPORT.md.

The one idea: every figure in the report is measured in this one invocation,
side by side, on this machine.  The two servers get the same model, the same
thread count and the same requests (llmbench draws them from each scenario's
seed), and they never run at the same time: each run starts a fresh server
(fresh caches, a fresh DB), runs llmbench, reads the server's own counters,
and stops it before the next one starts.  Nothing in the report is typed in
by hand: each number is read from this run's llmbench JSON, llmd's /metrics,
`llmadmin --json status` and `usage`, or /proc.  A server that does not start
or a run that fails is said so in the report, and the exit status is 1.

    python3 scripts/bench.py --bin build/bin --model MODEL [--soak-s 3600]
        [--out build/bench] [--report bench/REPORT.md] [--llama-bin DIR]
        [--only saturation,priority,...] [--threads N] [--sat-req-s X]
        [--max-duration S]

Comparisons: saturation, load, priority, fairness, long_context,
shared_prefix (both servers); chaos, soak (llmd only).  load, fairness and
soak are scaled from the saturation request rate (the lower of the two
servers'), so --only with any of them also runs saturation unless
--sat-req-s gives the rate.
"""

import argparse
import datetime
import http.client
import json
import os
import platform
import shlex
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCEN_DIR = os.path.join(ROOT, "bench", "scenarios")
ORDER = ["saturation", "load", "priority", "fairness", "long_context", "shared_prefix", "chaos",
         "soak"]
NEEDS_SAT = {"load", "fairness", "soak"}
LOAD_FRACTIONS = (0.40, 0.75)  # of the saturation request rate
FAIR_SCALE = 0.80     # fairness.json's tenant a at 80% of saturation, b at 5x that
SOAK_FRACTION = 0.50  # soak.json's rates add up to 1/s: half of saturation
LONG_KV_BLOCKS = 384  # 6144 tokens: 3 of long_context's 8 sequences at most
LONG_SWAP_BLOCKS = 2048
RSS_EVERY_S = 10.0
START_TIMEOUT = 180.0  # model load on a busy machine; a bound against hangs only
STOP_TIMEOUT = 60.0
GOAL_PRIORITY = 1.5
GOAL_FAIR = 0.10
GOAL_SOAK_GROWTH = 0.10


# ----------------------------------------------------------------- utils --

def log(msg):
    print("bench: " + msg, flush=True)


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ok(argv, **kw):
    """Runs argv; its stdout, or raises RuntimeError with its output."""
    p = subprocess.run(argv, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        raise RuntimeError("%s failed (%d): %s%s" % (shlex.join(argv), p.returncode,
                                                     p.stdout[-2000:], p.stderr[-2000:]))
    return p.stdout


def raise_nofile():
    """Overload scenarios keep hundreds of connections open on both ends."""
    try:
        import resource
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft < hard:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ImportError, ValueError, OSError):
        pass


def load_scenario(name):
    with open(os.path.join(SCEN_DIR, name + ".json")) as f:
        return json.load(f)


def dist_max(d):
    """The largest value a scenario DIST can draw (its clip where it has one)."""
    if isinstance(d, (int, float)):
        return int(d)
    if d.get("max"):
        return int(d["max"])
    for kind, sds in (("uniform", None), ("normal", 4), ("lognormal", None)):
        if kind in d:
            a, b = d[kind]
            if kind == "uniform":
                return int(b)
            if kind == "normal":
                return int(a + sds * b)
            return int(a * 2.718281828 ** (4 * b))
    raise ValueError("unknown DIST %r" % d)


def slot_ctx(scen):
    """Context one llama-server slot needs for the longest request."""
    need = max(t.get("prefix_len", 0) + dist_max(t["prompt_len"]) + dist_max(t["max_tokens"])
               for t in scen["tenants"])
    return (need + 16 + 255) // 256 * 256


def slots(scen):
    """llama-server slots: every closed-loop request, and 32 for open arrivals
    (the concurrency of saturation.json, so both see the same batch limit)."""
    closed = sum(t["arrival"].get("concurrency", 0) for t in scen["tenants"])
    opened = any("concurrency" not in t["arrival"] for t in scen["tenants"])
    return closed + (32 if opened else 0)


def parse_prom(text):
    """Prometheus text -> {'name{labels}': value} (histogram buckets left out)."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#") or "_bucket{" in line:
            continue
        try:
            key, val = line.rsplit(" ", 1)
            out[key] = float(val)
        except ValueError:
            continue
    return out


def rss_kib(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


# --------------------------------------------------------------- servers --

class ServerError(RuntimeError):
    pass


class Server:
    """A server process, its log, and the wait for its /health."""
    side = "?"

    def __init__(self, ctx, name):
        self.ctx, self.name = ctx, name
        self.port = free_port()
        self.proc = None
        self.log_path = os.path.join(ctx.logs, "%s-%s.log" % (name, self.side))
        self.argv = []
        self.exit_status = None

    def _spawn(self, env=None):
        self.logf = open(self.log_path, "w")
        self.proc = subprocess.Popen(self.argv, stdout=self.logf, stderr=subprocess.STDOUT,
                                     env=env, cwd=ROOT)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.logf.close()
                last = [ln for ln in tail(self.log_path).splitlines() if ln.strip()]
                raise ServerError("%s exited (%d) before it was ready: %s (log %s)"
                                  % (self.side, self.proc.returncode,
                                     last[-1].strip() if last else "no output",
                                     os.path.relpath(self.log_path, ROOT)))
            try:
                if self.get("/health")[0] == 200:
                    return
            except (OSError, http.client.HTTPException):
                pass
            time.sleep(0.25)
        self.stop()
        raise ServerError("%s not ready in %.0f s; log %s" % (self.side, START_TIMEOUT,
                                                              self.log_path))

    def check_alive(self):
        """A server that died under load is a result, not a detail."""
        rc = self.proc.poll()
        if rc is not None:
            how = "killed by signal %d" % -rc if rc < 0 else "exited with status %d" % rc
            raise ServerError("%s %s during the run; log %s:\n%s"
                              % (self.side, how, self.log_path, tail(self.log_path)))

    def get(self, path):
        c = self.connect()
        try:
            c.request("GET", path)
            r = c.getresponse()
            return r.status, r.read().decode("utf-8", "replace")
        finally:
            c.close()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc:
            self.exit_status = self.proc.returncode
            self.logf.close()
        return self.exit_status


def tail(path, n=15):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return ""


class Llmd(Server):
    side = "llmd"

    def __init__(self, ctx, name, tenants, extra=()):
        super().__init__(ctx, name)
        tmp = tempfile.mkdtemp(prefix=name + "-", dir=ctx.tmp)
        self.db = os.path.join(tmp, "llmd.db")
        self.sock = os.path.join(tmp, "admin.sock")
        self.admin = [os.path.join(ctx.bin, "llmadmin"), "--db", self.db, "--socket", self.sock]
        run_ok(self.admin + ["init"])
        self.keys = {}
        for t in tenants:
            run_ok(self.admin + ["tenant", "add", t, "--weight", "1", "--max-priority", "0"])
            self.keys[t] = json.loads(run_ok(self.admin + ["--json", "key", "create", t]))["key"]
        self.argv = [os.path.join(ctx.bin, "llmd"), "--model", ctx.model, "--listen",
                     "127.0.0.1:%d" % self.port, "--tls-cert", ctx.cert, "--tls-key",
                     ctx.cert_key, "--db", self.db, "--admin-socket", self.sock,
                     "--max-queue", "100000", "--max-connections", "8192",
                     "--drain-timeout", "10"] + list(extra)
        self.url = "https://127.0.0.1:%d" % self.port
        env = dict(os.environ, OMP_NUM_THREADS=str(ctx.threads))
        self._spawn(env)

    def connect(self):
        return http.client.HTTPSConnection("127.0.0.1", self.port, context=self.ctx.ssl,
                                           timeout=30)

    def bench_args(self):
        out = ["--url", self.url, "--ca", self.ctx.cert]
        for t, k in self.keys.items():
            out += ["--key", "%s=%s" % (t, k)]
        return out

    def metrics(self):
        st, body = self.get("/metrics")
        return parse_prom(body) if st == 200 else {}

    def status(self):
        return json.loads(run_ok(self.admin + ["--json", "status"]))

    def usage_rows(self):
        return json.loads(run_ok(self.admin + ["--json", "usage", "--rows", "100000"]))


class LlamaServer(Server):
    side = "llama-server"

    def __init__(self, ctx, name, scen):
        super().__init__(ctx, name)
        self.key = "sk-bench-" + os.urandom(8).hex()
        n, per = slots(scen), slot_ctx(scen)
        self.argv = [os.path.join(ctx.llama_bin, "llama-server"), "-m", ctx.model, "--host",
                     "127.0.0.1", "--port", str(self.port), "--parallel", str(n), "-c",
                     str(n * per), "--cont-batching", "-t", str(ctx.threads), "-tb",
                     str(ctx.threads), "--api-key", self.key, "--no-webui"]
        self.url = "http://127.0.0.1:%d" % self.port
        self._spawn()

    def connect(self):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)

    def bench_args(self):
        return ["--url", self.url, "--key", self.key]


# --------------------------------------------------------------- llmbench --

def llmbench(ctx, srv, scen_name, tag, extra=(), env=None, background=False):
    """Runs llmbench on one scenario against srv; its report (dict) or raises.
    With background, returns (Popen, finish) instead: finish() waits for it."""
    path = os.path.join(ctx.out, "%s-%s.json" % (tag, srv.side))
    plot = path[:-5] + ".svg"
    extra = list(extra)
    dur = load_scenario(scen_name).get("duration_s", 0)
    if ctx.max_duration and "--duration" not in extra and (not dur or dur > ctx.max_duration):
        extra += ["--duration", "%g" % ctx.max_duration]
    argv = ([os.path.join(ctx.bin, "llmbench")] + srv.bench_args()
            + ["--model", ctx.model_id, "--json", path, "--plot", plot, "--quiet"]
            + list(extra) + [os.path.join(SCEN_DIR, scen_name + ".json")])
    ctx.commands.append(shlex.join(redact(argv)))
    errlog = open(os.path.join(ctx.logs, "%s-%s.llmbench.log" % (tag, srv.side)), "w")
    if os.path.exists(path):
        os.unlink(path)
    p = subprocess.Popen(argv, stdout=errlog, stderr=subprocess.STDOUT, env=env, cwd=ROOT)

    def finish():
        rc = p.wait()
        errlog.close()
        if not os.path.exists(path):
            raise RuntimeError("llmbench %s against %s exited %d without a report; log %s"
                               % (tag, srv.side, rc, errlog.name))
        with open(path) as f:
            rep = json.load(f)
        rep["_path"] = os.path.relpath(path, ROOT)
        rep["_rc"] = rc
        return rep

    if background:
        return p, finish
    return finish()


def redact(argv):
    """Keys change every run; the rerun commands show where they go."""
    out = []
    for a in argv:
        if a.startswith("sk-"):
            a = "KEY"
        elif "=sk-" in a:
            a = a.split("=", 1)[0] + "=KEY"
        out.append(a)
    return out


# ------------------------------------------------------------ the runs --

class Ctx:
    pass


def tenants_of(name):
    return [t["name"] for t in load_scenario(name)["tenants"]]


def one_run(ctx, side, scen_name, tag, extra=(), llmd_flags=(), after=None):
    """Starts a fresh server of side, runs llmbench, calls after(server, report)
    while the server still runs, stops it.  A result dict; failures inside."""
    res = {"side": side, "tag": tag}
    srv = None
    try:
        if side == "llmd":
            # The same batch limit on both sides: llmd runs at most as many
            # sequences at once as llama-server has slots.
            seqs = ["--max-seqs", str(slots(load_scenario(scen_name)))]
            srv = Llmd(ctx, tag, tenants_of(scen_name), seqs + list(llmd_flags))
        else:
            srv = LlamaServer(ctx, tag, load_scenario(scen_name))
        ctx.commands.append(shlex.join(redact(srv.argv)))
        log("%s: %s running" % (tag, side))
        rep = llmbench(ctx, srv, scen_name, tag, extra)
        res["report"] = rep
        srv.check_alive()
        if after:
            after(srv, rep, res)
    except (ServerError, RuntimeError, OSError, ValueError, KeyError) as e:
        res["error"] = str(e)
        log("%s: %s FAILED: %s" % (tag, side, str(e).splitlines()[0]))
    finally:
        if srv:
            st = srv.stop()
            res["exit_status"] = st
            res["log"] = os.path.relpath(srv.log_path, ROOT)
    if "error" in res:
        ctx.failures.append("%s on %s: %s" % (tag, side, res["error"].splitlines()[0]))
    return res


def llmd_counters(srv, rep, res):
    res["metrics"] = srv.metrics()
    res["status"] = srv.status()


def sides(i):
    """Alternates which server goes first from one comparison to the next."""
    return ("llmd", "llama-server") if i % 2 == 0 else ("llama-server", "llmd")


def sat_rates(R):
    """The saturation request rates of the servers measured, and their max.
    Every saturation request asks for the same fixed number of tokens
    (ignore_eos), so tokens/s over it is the request rate, and a smoother one
    than completions per second: the 32 requests of the closed loop tend to
    finish in waves."""
    per_req = dist_max(load_scenario("saturation")["tenants"][0]["max_tokens"])
    rates = [r["report"]["overall"]["out_tok_per_s"] / per_req
             for r in R.get("saturation", {}).values()
             if isinstance(r, dict) and "report" in r
             and r["report"]["overall"]["out_tok_per_s"] > 0]
    return rates, (max(rates) if rates else None)


def do_saturation(ctx, R):
    R["saturation"] = {s: one_run(ctx, s, "saturation", "saturation") for s in sides(0)}
    per_req = dist_max(load_scenario("saturation")["tenants"][0]["max_tokens"])
    rates = sat_rates(R)[0]
    if rates:
        ctx.sat_max_req_s = max(rates)
    if rates and ctx.sat_req_s is None:
        ctx.sat_req_s = min(rates)
        ctx.sat_from = "the lower of the two servers' output tok/s ÷ %d tokens a request" % per_req


def do_load(ctx, R):
    R["load"] = {}
    for i, frac in enumerate(LOAD_FRACTIONS):
        scale = frac * ctx.sat_req_s
        key = "%d%%" % round(frac * 100)
        R["load"][key] = {"scale": scale}
        for s in sides(i + 1):
            R["load"][key][s] = one_run(ctx, s, "load", "load-%d" % round(frac * 100),
                                        ["--rate-scale", "%.4f" % scale])


def do_priority(ctx, R):
    R["priority"] = {}
    for i, (key, extra) in enumerate((("unloaded", ["--only", "interactive"]),
                                      ("loaded", []))):
        R["priority"][key] = {s: one_run(ctx, s, "priority", "priority-" + key, extra)
                              for s in sides(i)}


def do_fairness(ctx, R):
    # From the faster server's capacity: tenant a alone must ask for more
    # than half of what either server can serve, or max-min fairness rightly
    # gives it just what it asks and the ratio says nothing.
    scale = FAIR_SCALE * (getattr(ctx, "sat_max_req_s", None) or ctx.sat_req_s)
    R["fairness"] = {"scale": scale}
    for s in sides(1):
        R["fairness"][s] = one_run(ctx, s, "fairness", "fairness",
                                   ["--rate-scale", "%.4f" % scale])


def do_long(ctx, R):
    R["long_context"] = {"kv_blocks": LONG_KV_BLOCKS}
    base = ["--kv-blocks", str(LONG_KV_BLOCKS), "--swap-blocks", str(LONG_SWAP_BLOCKS)]
    for mode in ("swap", "recompute"):
        R["long_context"]["llmd-" + mode] = one_run(
            ctx, "llmd", "long_context", "long_context-" + mode,
            llmd_flags=base + ["--preempt", mode], after=llmd_counters)
    R["long_context"]["llama-server"] = one_run(ctx, "llama-server", "long_context",
                                                "long_context")


def do_shared(ctx, R):
    R["shared_prefix"] = {}
    for s in sides(0):
        R["shared_prefix"][s] = one_run(ctx, s, "shared_prefix", "shared_prefix",
                                        after=llmd_counters if s == "llmd" else None)


def do_chaos(ctx, R):
    res = {"side": "llmd", "tag": "chaos"}
    srv = None
    try:
        srv = Llmd(ctx, "chaos", tenants_of("chaos"))
        ctx.commands.append(shlex.join(redact(srv.argv)))
        log("chaos: llmd running")
        env = dict(os.environ, LLMADMIN=shlex.join(
            [os.path.join(ctx.bin, "llmadmin"), "--socket", srv.sock]))
        res["report"] = llmbench(ctx, srv, "chaos", "chaos", env=env)
        srv.check_alive()
        time.sleep(1.0)  # finished requests give their blocks back within a step
        res["status"] = srv.status()
        res["metrics"] = srv.metrics()
    except (ServerError, RuntimeError, OSError, ValueError, KeyError) as e:
        res["error"] = str(e)
        log("chaos FAILED: %s" % str(e).splitlines()[0])
    finally:
        if srv:
            res["exit_status"] = srv.stop()
            res["log"] = os.path.relpath(srv.log_path, ROOT)
            # The ledger is written by a batched writer thread: read it after
            # the daemon has stopped and flushed.
            try:
                res["usage"] = srv.usage_rows()
            except (RuntimeError, ValueError) as e:
                res.setdefault("error", "usage: %s" % e)
    if "error" in res:
        ctx.failures.append("chaos: %s" % res["error"].splitlines()[0])
    R["chaos"] = res


def do_soak(ctx, R):
    scale = SOAK_FRACTION * ctx.sat_req_s
    res = {"side": "llmd", "tag": "soak", "scale": scale, "soak_s": ctx.soak_s, "rss": []}
    srv = None
    try:
        srv = Llmd(ctx, "soak", tenants_of("soak"))
        ctx.commands.append(shlex.join(redact(srv.argv)))
        log("soak: llmd running for %d s" % ctx.soak_s)
        p, finish = llmbench(ctx, srv, "soak", "soak",
                             ["--rate-scale", "%.4f" % scale, "--duration", str(ctx.soak_s)],
                             background=True)
        t0, next_t = time.monotonic(), RSS_EVERY_S
        res["rss"].append([0.0, rss_kib(srv.proc.pid)])
        while True:
            try:
                p.wait(max(0.0, next_t - (time.monotonic() - t0)))
                break
            except subprocess.TimeoutExpired:
                res["rss"].append([round(time.monotonic() - t0, 1), rss_kib(srv.proc.pid)])
                next_t += RSS_EVERY_S
        res["rss"].append([round(time.monotonic() - t0, 1), rss_kib(srv.proc.pid)])
        res["report"] = finish()
        srv.check_alive()
        time.sleep(1.0)
        res["status"] = srv.status()
        res["metrics"] = srv.metrics()
    except (ServerError, RuntimeError, OSError, ValueError, KeyError) as e:
        res["error"] = str(e)
        log("soak FAILED: %s" % str(e).splitlines()[0])
    finally:
        if srv:
            res["exit_status"] = srv.stop()
            res["log"] = os.path.relpath(srv.log_path, ROOT)
    if "error" in res:
        ctx.failures.append("soak: %s" % res["error"].splitlines()[0])
    R["soak"] = res


RUNNERS = {"saturation": do_saturation, "load": do_load, "priority": do_priority,
           "fairness": do_fairness, "long_context": do_long, "shared_prefix": do_shared,
           "chaos": do_chaos, "soak": do_soak}


# ------------------------------------------------------------ the report --

def st(res, tenant=None):
    """The llmbench STATS of a run (overall, or one tenant's), or None."""
    rep = res.get("report") if isinstance(res, dict) else None
    if not rep:
        return None
    return rep["overall"] if tenant is None else rep.get("tenants", {}).get(tenant)


def lat(s, metric, p):
    v = s.get(metric) if s else None
    return v.get(p) if v and v.get("n") else None


def f(v, spec=".1f"):
    return "—" if v is None else format(v, spec)


def ratio(a, b):
    return a / b if a is not None and b else None


def pct(a, b):
    return "—" if a is None or not b else "%.1f%%" % (100.0 * a / b)


def verdict(ok):
    return "n/a (not measured)" if ok is None else ("met" if ok else "**not met**")


def outcomes(s):
    if not s:
        return "—"
    parts = ["%d sent" % s["sent"], "%d ok" % s["ok"]]
    for k in ("refused", "failed", "disconnected", "lost", "cut"):
        if s.get(k):
            parts.append("%d %s" % (s[k], k))
    return ", ".join(parts)


def failed_note(res):
    if not isinstance(res, dict) or "error" not in res:
        return ""
    return "\n> **%s did not complete**: %s\n" % (res.get("side", "?"),
                                                res["error"].splitlines()[0])


def table(head, rows):
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out) + "\n"


def metric(res, key):
    return (res.get("metrics") or {}).get(key) if isinstance(res, dict) else None


def sec_saturation(R, meta, goals):
    S = R["saturation"]
    rows, notes = [], ""
    for side in ("llmd", "llama-server"):
        s = st(S.get(side, {}))
        notes += failed_note(S.get(side))
        rows.append([side, f(s and s["out_tok_per_s"]), f(s and s["req_per_s"], ".2f"),
                     f(lat(s, "ttft_ms", "p50"), ".0f"), f(lat(s, "ttft_ms", "p99"), ".0f"),
                     f(lat(s, "tpot_ms", "p50")), outcomes(s)])
    a, b = st(S.get("llmd", {})), st(S.get("llama-server", {}))
    rt = ratio(a and a["out_tok_per_s"], b and b["out_tok_per_s"])
    rr = ratio(a and a["req_per_s"], b and b["req_per_s"])
    rows.append(["llmd ÷ llama-server", f(rt, ".2f"), f(rr, ".2f"), "", "", "", ""])
    goals.append(["saturation", "llmd output tok/s ÷ llama-server's", f(rt, ".2f"),
                  "(no goal: reported)"])
    return ("## Saturation\n\nA closed loop of 32 requests (about 128 prompt ids, 64 output "
            "tokens, streamed). Throughput over the window.\n\n"
            + table(["server", "out tok/s", "req/s", "TTFT p50 ms", "TTFT p99 ms",
                     "TPOT p50 ms", "requests"], rows) + notes
            + "\nSaturation rate that load, fairness and soak are scaled from: %s req/s (%s).\n"
            % (f(meta["sat_req_s"], ".3g"), meta["sat_from"] or "none"))


def sec_load(R, meta, goals):
    out = ("## Latency below saturation\n\nload.json (Poisson, same requests as saturation) "
           "at fractions of the saturation rate %s req/s (%s). Milliseconds.\n\n"
           % (f(meta["sat_req_s"], ".3g"), meta["sat_from"]))
    for key, L in R["load"].items():
        rows, notes = [], ""
        for side in ("llmd", "llama-server"):
            s = st(L.get(side, {}))
            notes += failed_note(L.get(side))
            row = [side]
            for m in ("ttft_ms", "tpot_ms", "itl_ms"):
                row.append(" / ".join(f(lat(s, m, p), ".0f" if m == "ttft_ms" else ".1f")
                                      for p in ("p50", "p90", "p99")))
            row += [f(s and s["req_per_s"], ".2f"), f(s and s["slo_met_fraction"], ".2f"),
                    outcomes(s)]
            rows.append(row)
        a, b = st(L.get("llmd", {})), st(L.get("llama-server", {}))
        rows.append(["llmd ÷ llama-server (p99)"] + [
            f(ratio(lat(a, m, "p99"), lat(b, m, "p99")), ".2f")
            for m in ("ttft_ms", "tpot_ms", "itl_ms")] + ["", "", ""])
        out += ("### %s of saturation (%s req/s offered)\n\n" % (key, f(L["scale"], ".3g"))
                + table(["server", "TTFT p50/p90/p99", "TPOT p50/p90/p99", "ITL p50/p90/p99",
                         "req/s", "SLO met", "requests"], rows) + notes + "\n")
        goals.append(["load %s" % key, "llmd p99 TTFT ÷ llama-server's",
                      f(ratio(lat(a, "ttft_ms", "p99"), lat(b, "ttft_ms", "p99")), ".2f"),
                      "(no goal: reported)"])
    return out


def sec_priority(R, goals):
    P = R["priority"]
    rows, notes = [], ""
    for side in ("llmd", "llama-server"):
        u = st(P["unloaded"].get(side, {}), "interactive")
        lo = st(P["loaded"].get(side, {}), "interactive")
        bt = st(P["loaded"].get(side, {}), "batch")
        notes += failed_note(P["unloaded"].get(side)) + failed_note(P["loaded"].get(side))
        r = ratio(lat(lo, "ttft_ms", "p99"), lat(u, "ttft_ms", "p99"))
        rows.append([side, f(lat(u, "ttft_ms", "p50"), ".0f"), f(lat(u, "ttft_ms", "p99"), ".0f"),
                     f(lat(lo, "ttft_ms", "p50"), ".0f"), f(lat(lo, "ttft_ms", "p99"), ".0f"),
                     f(r, ".2f"), f(bt and bt["out_tok_per_s"]), outcomes(lo)])
        if side == "llmd":
            goals.append(["priority", "llmd interactive p99 TTFT loaded ÷ unloaded",
                          f(r, ".2f"), "≤ %.1f: %s" % (GOAL_PRIORITY, verdict(
                              None if r is None else r <= GOAL_PRIORITY))])
        else:
            goals.append(["priority", "llama-server, the same ratio (ignores priority)",
                          f(r, ".2f"), "(beside)"])
    rate = load_scenario("priority")["tenants"][0]["arrival"].get("poisson")
    return ("## Priority\n\nTenant interactive (priority 0, Poisson %s/s, short prompts, 32 "
            "tokens) alone, then under a flood of tenant batch (priority 3, closed loop of 16, "
            "~512-id prompts, 128 tokens). Goal for llmd: loaded p99 TTFT ≤ %.1f× unloaded. "
            "llama-server does not read `priority`.\n\n" % (rate, GOAL_PRIORITY)
            + table(["server", "alone TTFT p50", "alone p99", "flooded p50", "flooded p99",
                     "p99 ratio", "batch out tok/s", "interactive requests (flooded)"], rows)
            + notes)


def sec_fairness(R, goals):
    F = R["fairness"]
    rows, notes = [], ""
    for side in ("llmd", "llama-server"):
        a, b = st(F.get(side, {}), "a"), st(F.get(side, {}), "b")
        notes += failed_note(F.get(side))
        r = ratio(a and a["window_output_tokens"], b and b["window_output_tokens"])
        rows.append([side, f(a and a["window_output_tokens"], "d"),
                     f(b and b["window_output_tokens"], "d"), f(r, ".3f"), outcomes(a),
                     outcomes(b)])
        if side == "llmd":
            goals.append(["fairness", "llmd window output tokens a ÷ b", f(r, ".3f"),
                          "within %d%% of 1: %s" % (GOAL_FAIR * 100, verdict(
                              None if r is None else abs(r - 1) <= GOAL_FAIR))])
        else:
            goals.append(["fairness", "llama-server, the same ratio", f(r, ".3f"), "(beside)"])
    return ("## Fairness\n\nTenants a and b, same priority and weight, Poisson rates 1:5 "
            "(a at %s req/s: %d%% of the faster server's saturation rate, so each asks for more "
            "than half of either server); output tokens received within the "
            "window. Goal for llmd: a ÷ b within %d%% of 1.\n\n"
            % (f(F["scale"], ".3g"), FAIR_SCALE * 100, GOAL_FAIR * 100)
            + table(["server", "a tokens", "b tokens", "a ÷ b", "a requests", "b requests"],
                    rows) + notes)


def sec_long(R, goals):
    L = R["long_context"]
    rows, notes = [], ""
    for key in ("llmd-swap", "llmd-recompute", "llama-server"):
        res = L.get(key, {})
        s = st(res)
        notes += failed_note(res)
        dev = (res.get("status") or {}).get("device", {})
        mb = 1 / 1048576
        rows.append([key, f(s and s["out_tok_per_s"]), f(s and s["req_per_s"], ".2f"),
                     f(lat(s, "ttft_ms", "p50"), ".0f"), f(lat(s, "ttft_ms", "p99"), ".0f"),
                     f(lat(s, "tpot_ms", "p50")), f(lat(s, "tpot_ms", "p99")),
                     f(metric(res, 'llmd_preemptions_total{mode="swap"}'), ".0f"),
                     f(metric(res, 'llmd_preemptions_total{mode="recompute"}'), ".0f"),
                     f(metric(res, 'llmd_swap_bytes_total{direction="out"}') and
                       metric(res, 'llmd_swap_bytes_total{direction="out"}') * mb, ".0f"),
                     f(metric(res, 'llmd_swap_bytes_total{direction="in"}') and
                       metric(res, 'llmd_swap_bytes_total{direction="in"}') * mb, ".0f"),
                     f(dev.get("used"), "d") if dev else "—", outcomes(s)])
    a, b = st(L.get("llmd-swap", {})), st(L.get("llama-server", {}))
    c = st(L.get("llmd-recompute", {}))
    goals.append(["long_context", "llmd (swap) out tok/s ÷ llama-server's",
                  f(ratio(a and a["out_tok_per_s"], b and b["out_tok_per_s"]), ".2f"),
                  "(no goal: reported)"])
    goals.append(["long_context", "llmd (recompute) out tok/s ÷ llama-server's",
                  f(ratio(c and c["out_tok_per_s"], b and b["out_tok_per_s"]), ".2f"),
                  "(no goal: reported)"])
    return ("## Long context under KV pressure\n\nA closed loop of 8 requests, prompts of "
            "1000–1800 ids, 256 tokens each; llmd with `--kv-blocks %d` (%d tokens), so "
            "running sequences are preempted, once with `--preempt swap` and once with "
            "`--preempt recompute`; llama-server with a slot per request. Preemptions and swap "
            "traffic from llmd's /metrics after the run (MiB).\n\n" % (
                L["kv_blocks"], L["kv_blocks"] * 16)
            + table(["server", "out tok/s", "req/s", "TTFT p50", "TTFT p99", "TPOT p50",
                     "TPOT p99", "preempt swap", "preempt recompute", "swap out MiB",
                     "swap in MiB", "blocks used after", "requests"], rows) + notes)


def sec_shared(R, goals):
    S = R["shared_prefix"]
    rows, notes = [], ""
    for side in ("llmd", "llama-server"):
        s = st(S.get(side, {}))
        notes += failed_note(S.get(side))
        rows.append([side] + [f(lat(s, "ttft_ms", p), ".0f") for p in ("p50", "p90", "p99")]
                    + [f(lat(s, "tpot_ms", "p50")), f(s and s["out_tok_per_s"]), outcomes(s)])
    a, b = st(S.get("llmd", {})), st(S.get("llama-server", {}))
    res = S.get("llmd", {})
    look = metric(res, "llmd_prefix_cache_lookups_total")
    hits = metric(res, "llmd_prefix_cache_hits_total")
    m = res.get("metrics") or {}
    cached = sum(v for k, v in m.items() if k.startswith("llmd_tokens_total") and
                 'kind="cached"' in k) if m else None
    prompt = sum(v for k, v in m.items() if k.startswith("llmd_tokens_total") and
                 'kind="prompt"' in k) if m else None
    goals.append(["shared_prefix", "llmd p50 TTFT ÷ llama-server's",
                  f(ratio(lat(a, "ttft_ms", "p50"), lat(b, "ttft_ms", "p50")), ".2f"),
                  "(no goal: reported)"])
    return ("## Shared prefix\n\nTwo tenants, each with its own 400-id prefix on every "
            "request plus a 16–48-id suffix, Poisson 0.5/s each, 32 tokens. Milliseconds.\n\n"
            + table(["server", "TTFT p50", "TTFT p90", "TTFT p99", "TPOT p50", "out tok/s",
                     "requests"], rows) + notes
            + "\nllmd's prefix cache (/metrics llmd_prefix_cache_lookups_total and _hits_total): "
            "%s lookups, %s hits (%s); %s of %s "
            "prompt tokens served from the cache (%s).\n" % (
                f(look, ".0f"), f(hits, ".0f"), pct(hits, look), f(cached, ".0f"),
                f(prompt, ".0f"), pct(cached, prompt)))


def blocks_goal(name, dev):
    """Device KV blocks after a run: every block free or merely cached (a
    cached block holds a finished request's prefix and is reused or freed on
    demand); a block still "used" after every request ended is a leak."""
    ok = None if not dev else dev.get("used") == 0 and (
        dev.get("free", 0) + dev.get("cached", 0) == dev.get("total"))
    return [name, "device KV blocks after: free + cached (= not used) of total",
            "%s + %s of %s" % (dev.get("free", "—"), dev.get("cached", "—"),
                               dev.get("total", "—")), "all: %s" % verdict(ok)]


def sec_chaos(R, goals):
    C = R["chaos"]
    s = st(C)
    notes = failed_note(C)
    dev = (C.get("status") or {}).get("device", {})
    rows = C.get("usage")
    answered = s and s["ok"] + s["failed"] + s["disconnected"]
    n_rows = len(rows) if rows is not None else None
    by_status = {}
    for r in rows or []:
        by_status[str(r.get("status"))] = by_status.get(str(r.get("status")), 0) + 1
    ledger_ok = None
    if s and n_rows is not None and "error" not in C:
        ledger_ok = answered <= n_rows <= answered + s["refused"] + s["cut"] + s["lost"]
    goals.append(["chaos", "requests lost", f(s and s["lost"], "d"),
                  "0: %s" % verdict(None if not s else s["lost"] == 0)])
    goals.append(blocks_goal("chaos", dev))
    goals.append(["chaos", "usage ledger rows (one per admitted request)", f(n_rows, "d"),
                  "%s..%s: %s" % (f(answered, "d"), f(s and answered + s["refused"] + s["cut"]
                                                      + s["lost"], "d"), verdict(ledger_ok))])
    acts = (C.get("report") or {}).get("actions") or []
    errs = (s or {}).get("errors") or {}
    out = ("## Chaos (llmd only)\n\nTenants a (closed loop of 4, streamed) and b (Poisson, not "
           "streamed), 20% of clients vanishing on purpose, while llmadmin evicts a's "
           "requests (swap), aborts b's, aborts a's, drains and undrains.\n\n" + notes)
    out += table(["outcome", "requests"], [[k, s[k]] for k in (
        "sent", "ok", "refused", "failed", "disconnected", "lost", "cut")] if s else [])
    out += "\nErrors seen by the client: %s.\n\n" % (
        ", ".join("%s × %d" % (k, v) for k, v in sorted(errs.items())) or "none")
    out += table(["at s", "action", "exit"], [[f(a.get("at_s")), "`%s`" % a.get("run"),
                                               a.get("exit")] for a in acts])
    out += ("\nAfter the run: device KV blocks %s free, %s cached, %s used of %s; host (swap) "
            "blocks used %s. Usage ledger: %s rows (by status: %s) for %s requests answered "
            "ok, failed or disconnected and %s refused (a refusal has a row only when the "
            "request had been admitted: aborted ones do, those refused while draining do "
            "not).\n" % (dev.get("free", "—"), dev.get("cached", "—"), dev.get("used", "—"),
                         dev.get("total", "—"),
                         ((C.get("status") or {}).get("host") or {}).get("used", "—"),
                         f(n_rows, "d"), ", ".join("%s: %d" % kv for kv in sorted(
                             by_status.items())) or "—", f(answered, "d"),
                         f(s and s["refused"], "d")))
    return out


def sec_soak(R, goals):
    S = R["soak"]
    s = st(S)
    rss = [(t, k) for t, k in S.get("rss", []) if k]
    warm = min(60.0, 0.1 * S["soak_s"])
    after = [k for t, k in rss if t >= warm]
    start = after[0] if after else None
    end = rss[-1][1] if rss else None
    peak = max(after) if after else None
    dev = (S.get("status") or {}).get("device", {})
    growth = ratio(end, start)
    goals.append(["soak", "llmd RSS end ÷ start (after %.0f s warm-up)" % warm, f(growth, ".3f"),
                  "≤ %.2f: %s" % (1 + GOAL_SOAK_GROWTH, verdict(
                      None if growth is None else growth <= 1 + GOAL_SOAK_GROWTH))])
    goals.append(blocks_goal("soak", dev))
    mib = 1 / 1024
    return ("## Soak (llmd only)\n\n%d s of soak.json at %s req/s (half the saturation rate); "
            "llmd's VmRSS sampled every %.0f s (%d samples).\n\n" % (
                S["soak_s"], f(S["scale"], ".3g"), RSS_EVERY_S, len(rss)) + failed_note(S)
            + table(["RSS start (at %.0f s)" % warm, "RSS end", "RSS max", "end ÷ start",
                     "blocks free + cached after", "requests"],
                    [[f(start and start * mib, ".1f") + " MiB", f(end and end * mib, ".1f")
                      + " MiB", f(peak and peak * mib, ".1f") + " MiB", f(growth, ".3f"),
                      "%s + %s of %s" % (dev.get("free", "—"), dev.get("cached", "—"),
                                         dev.get("total", "—")), outcomes(s)]]))


def raw_paths(R):
    paths = []

    def walk(v):
        if isinstance(v, dict):
            if "_path" in v and isinstance(v["_path"], str):
                paths.append(v["_path"])
            for x in v.values():
                walk(x)
    walk(R)
    return paths


def render(meta, R, summary_path):
    m, v = meta["machine"], meta["versions"]
    goals, body = [], []
    secs = [("saturation", lambda: sec_saturation(R, meta, goals)),
            ("load", lambda: sec_load(R, meta, goals)),
            ("priority", lambda: sec_priority(R, goals)),
            ("fairness", lambda: sec_fairness(R, goals)),
            ("long_context", lambda: sec_long(R, goals)),
            ("shared_prefix", lambda: sec_shared(R, goals)),
            ("chaos", lambda: sec_chaos(R, goals)), ("soak", lambda: sec_soak(R, goals))]
    for name, fn in secs:
        if name in R:
            body.append(fn())
    head = ["# llmd benchmark report\n",
            "Written by `scripts/bench.py` (`make bench`) on %s. In every comparison below, llmd "
            "and llama.cpp's llama-server ran side by side in one invocation on the same "
            "machine, model and thread count, one server running at a time. Figures from "
            "another machine or another run are not comparable with these.\n" % meta["date"]
            + ("" if not meta.get("merged") else
               "\n**Two invocations:** %s rerun on %s (`--merge`), after a change to how the "
               "driver sets them up; the other comparisons (%s) are from %s. Within each "
               "comparison both servers still ran side by side in one invocation.\n"
               % (", ".join(meta["merged"]["rerun"]), meta["merged"]["rerun_date"],
                  ", ".join(meta["merged"]["kept"]), meta["merged"]["kept_date"])),
            "## Set-up\n",
            table(["", ""], [
                ["machine", "%s, %s cores, %s GiB memory, Linux %s" % (
                    m["cpu_model"], m["cores"], m["mem_gib"], m["kernel"])],
                ["load average", "%.2f at the start, %.2f at the end (1 min)" % (
                    m["loadavg_start"][0], m["loadavg_end"][0])],
                ["llmd", "%s, git %s%s" % (v.get("llmd", "?"), v.get("git_commit", "?"),
                                           " (with local changes)" if v.get("git_dirty") else "")],
                ["llama-server", "%s; built from %s" % (v.get("llama_server", "?"),
                                                       v.get("llama_source", "?"))],
                ["model", "`%s` (id `%s`)" % (meta["model"], meta["model_id"])],
                ["threads", "%d for both servers (llmd: OMP_NUM_THREADS; llama-server: -t, -tb)"
                 % meta["threads"]],
                ["batch limit", "per scenario, llmd's --max-seqs = llama-server's --parallel "
                 "(the closed-loop concurrency, plus 32 when requests also arrive open-loop); "
                 "llama-server's -c gives each slot the longest request"],
                ["comparisons", ", ".join(meta["todo"])],
                ["total time", "%d s" % m["total_s"]]]),
            "\nTo rerun: `make bench` (or `make bench SOAK_S=600`), which runs\n\n    "
            + shlex.join(["python3"] + meta["argv"]) + "\n"
            + ("" if not meta.get("merged") else "\nand then, for %s:\n\n    %s\n" % (
                ", ".join(meta["merged"]["rerun"]),
                shlex.join(["python3"] + meta["merged"]["argv"])))]
    busy = m["loadavg_start"][0]  # at the end it counts our own servers too
    if busy > 0.5 * (m["cores"] or 1):
        head.append("\n**The machine was busy**: a 1-minute load average of %.1f on %s cores "
                    "before it started means other work shared the cores, and spinning thread "
                    "pools (llama.cpp's above all) lose much more to that than their own "
                    "work; read these figures as a trial of the pipeline, not as a "
                    "measurement.\n" % (busy, m["cores"]))
    if meta["failures"]:
        head.append("\n**Failures in this run** (the script exited non-zero):\n\n"
                    + "".join("- %s\n" % x for x in meta["failures"]))
    head.append("\n## Goals\n\n" + table(["comparison", "figure", "value", "goal"], goals))
    tail_ = ["## Raw figures\n\nThe summary `%s`; llmbench's reports (with an SVG plot "
             "beside each):\n\n" % summary_path + "".join("- `%s`\n" % p for p in raw_paths(R))
             + "\nServer and llmbench logs are in `%s`.\n" % os.path.join(
                 os.path.dirname(summary_path), "logs"),
             "## Commands run\n\nKeys and the temporary directory differ every run.\n\n"
             + "".join("    %s\n" % c for c in meta["commands"])]
    return "\n".join(head + body + tail_)


# ------------------------------------------------------------- set-up --

def machine_info():
    info = {"cpu_model": "?", "cores": os.cpu_count(), "kernel": platform.release(),
            "mem_gib": None, "python": platform.python_version()}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu_model"] = line.split(":", 1)[1].strip()
                    break
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    info["mem_gib"] = round(int(line.split()[1]) / 1048576, 1)
    except OSError:
        pass
    info["loadavg_start"] = os.getloadavg()
    return info


def versions(ctx):
    v = {}
    with open(os.path.join(ROOT, "VERSION")) as f:
        v["llmd"] = f.read().strip()
    g = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short=12", "HEAD"],
                       capture_output=True, text=True)
    v["git_commit"] = g.stdout.strip() or "?"
    d = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                       capture_output=True, text=True)
    v["git_dirty"] = bool(d.stdout.strip())
    if not ctx.llama_bin:
        v["llama_server"] = "not built"
        return v
    p = subprocess.run([os.path.join(ctx.llama_bin, "llama-server"), "--version"],
                       capture_output=True, text=True)
    lines = [ln.strip() for ln in (p.stdout + p.stderr).splitlines()
             if ln.startswith(("version", "built"))]
    v["llama_server"] = "; ".join(lines) or "?"
    v["llama_source"] = "llama-cpp-python==%s (vendor/llama.cpp)" % os.environ.get(
        "LLAMA_CPP_PYTHON_VERSION", "0.3.36")
    v["llama_bin"] = ctx.llama_bin
    return v


def build_llama(args):
    if args.llama_bin:
        return os.path.abspath(args.llama_bin)
    log("building llama-server (scripts/llama-cpp.sh; the first time takes a while)")
    p = subprocess.run(["sh", os.path.join(ROOT, "scripts", "llama-cpp.sh"), "llama-server"],
                       cwd=ROOT, stdout=subprocess.PIPE, text=True)
    if p.returncode != 0 or not p.stdout.strip():
        return None
    return os.path.abspath(os.path.join(ROOT, p.stdout.strip().splitlines()[-1]))


def make_cert(ctx):
    ctx.cert = os.path.join(ctx.tmp, "cert.pem")
    ctx.cert_key = os.path.join(ctx.tmp, "key.pem")
    run_ok(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
            "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1",
            "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", ctx.cert_key, "-out",
            ctx.cert])
    ctx.ssl = ssl.create_default_context(cafile=ctx.cert)


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default="build/bin", help="llmd, llmadmin and llmbench")
    ap.add_argument("--model", default="models/SmolLM2-135M-Instruct.Q4_1.gguf")
    ap.add_argument("--soak-s", type=int, default=3600, help="soak length (default 3600)")
    ap.add_argument("--out", default="build/bench", help="raw JSON, SVG plots and logs")
    ap.add_argument("--report", default="bench/REPORT.md")
    ap.add_argument("--llama-bin", help="llama-server already built in DIR (no build)")
    ap.add_argument("--only", help="comma-separated comparisons: " + ",".join(ORDER))
    ap.add_argument("--threads", type=int, default=os.cpu_count(),
                    help="threads of both servers (default: every core)")
    ap.add_argument("--max-duration", type=float, metavar="S",
                    help="cap every scenario but the soak at S seconds (quick trial runs)")
    ap.add_argument("--render", action="store_true",
                    help="only write the report again from OUT/bench.json (no runs)")
    ap.add_argument("--merge", action="store_true",
                    help="keep the other comparisons of OUT/bench.json and rerun only --only's "
                         "(the report names what was rerun, and when)")
    ap.add_argument("--sat-req-s", type=float,
                    help="saturation rate to scale load, fairness and soak from, instead of "
                         "running saturation")
    return ap.parse_args()


def main():
    args = parse_args()
    if args.render:
        with open(os.path.join(args.out, "bench.json")) as fh:
            old = json.load(fh)
        with open(args.report, "w") as fh:
            fh.write(render(old["meta"], old["results"],
                            os.path.relpath(os.path.join(args.out, "bench.json"), ROOT)))
        log("wrote %s from %s/bench.json" % (args.report, args.out))
        return
    todo = ORDER if not args.only else [s.strip() for s in args.only.split(",") if s.strip()]
    bad = [s for s in todo if s not in RUNNERS]
    if bad:
        sys.exit("bench: --only: unknown %s (known: %s)" % (",".join(bad), ",".join(ORDER)))
    old = None
    if args.merge:
        with open(os.path.join(args.out, "bench.json")) as fh:
            old = json.load(fh)
        if not args.sat_req_s and "saturation" not in todo:
            args.sat_req_s = old["meta"]["sat_req_s"]
    if NEEDS_SAT & set(todo) and "saturation" not in todo and not args.sat_req_s:
        log("load, fairness and soak are scaled from saturation: running it too")
        todo = ["saturation"] + todo
    todo = [s for s in ORDER if s in todo]

    ctx = Ctx()
    ctx.bin = os.path.abspath(args.bin)
    ctx.model = os.path.abspath(args.model)
    ctx.model_id = os.path.basename(args.model)
    if ctx.model_id.endswith(".gguf"):
        ctx.model_id = ctx.model_id[:-5]
    ctx.threads, ctx.soak_s, ctx.max_duration = args.threads, args.soak_s, args.max_duration
    ctx.sat_req_s, ctx.sat_from = args.sat_req_s, "--sat-req-s" if args.sat_req_s else None
    if old and "saturation" not in todo:
        ctx.sat_from = old["meta"]["sat_from"]
        ctx.sat_max_req_s = old["meta"].get("sat_max_req_s") or sat_rates(old["results"])[1]
    ctx.out = os.path.abspath(args.out)
    ctx.logs = os.path.join(ctx.out, "logs")
    ctx.commands, ctx.failures = [], []
    for prog in ("llmd", "llmadmin", "llmbench"):
        if not os.access(os.path.join(ctx.bin, prog), os.X_OK):
            sys.exit("bench: %s/%s missing: run make first" % (args.bin, prog))
    if not os.path.exists(ctx.model):
        sys.exit("bench: no model %s" % args.model)
    os.makedirs(ctx.logs, exist_ok=True)
    raise_nofile()

    t_start = time.time()
    R = {}
    ctx.llama_bin = build_llama(args)
    both = [s for s in todo if s not in ("chaos", "soak")]
    if not ctx.llama_bin:
        ctx.failures.append("llama-server could not be built (scripts/llama-cpp.sh failed)")
        ctx.llama_bin = ""
    info = machine_info()
    ver = versions(ctx)
    ctx.tmp = tempfile.mkdtemp(prefix="llmd-bench-")
    try:
        make_cert(ctx)
        for name in todo:
            if not ctx.llama_bin and name in both:
                continue
            if name in NEEDS_SAT and not ctx.sat_req_s:
                ctx.failures.append("%s skipped: no saturation rate was measured" % name)
                continue
            log("== %s" % name)
            RUNNERS[name](ctx, R)
    finally:
        shutil.rmtree(ctx.tmp, ignore_errors=True)
    info["loadavg_end"] = os.getloadavg()
    info["total_s"] = round(time.time() - t_start)
    meta = {"machine": info, "versions": ver, "date": datetime.datetime.fromtimestamp(
        t_start, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "argv": [os.path.relpath(sys.argv[0], ROOT)] + sys.argv[1:], "threads": ctx.threads,
        "model": os.path.relpath(ctx.model, ROOT), "model_id": ctx.model_id,
        "sat_req_s": ctx.sat_req_s, "sat_from": ctx.sat_from, "todo": todo,
        "sat_max_req_s": getattr(ctx, "sat_max_req_s", None),
        "commands": ctx.commands, "failures": ctx.failures}
    if old:
        # The comparisons not rerun keep their figures, run, date and machine.
        kept = {k: v for k, v in old["results"].items() if k not in R}
        meta["merged"] = {"rerun": todo, "rerun_date": meta["date"], "kept": sorted(kept),
                          "kept_date": old["meta"].get("date"),
                          "kept_commands": old["meta"].get("commands", [])}
        meta["commands"] = old["meta"].get("commands", []) + meta["commands"]
        meta["failures"] = old["meta"].get("failures", []) + meta["failures"]
        meta["merged"]["argv"] = meta["argv"]
        for k in ("machine", "versions", "date", "threads", "argv", "todo"):
            meta[k] = old["meta"][k]
        R = dict(kept, **R)
    summary = os.path.join(ctx.out, "bench.json")
    with open(summary, "w") as f:
        json.dump({"meta": meta, "results": strip_reports(R)}, f, indent=2)
        f.write("\n")
    text = render(meta, R, os.path.relpath(summary, ROOT))
    os.makedirs(os.path.dirname(os.path.abspath(args.report)), exist_ok=True)
    with open(args.report, "w") as f:
        f.write(text)
    log("wrote %s (raw figures in %s)" % (args.report, os.path.relpath(ctx.out, ROOT)))
    if ctx.failures:
        log("%d failure(s):\n  %s" % (len(ctx.failures), "\n  ".join(ctx.failures)))
        sys.exit(1)


def strip_reports(R):
    """bench.json keeps what the report used; llmbench's full reports stay in
    their own files (named by _path)."""
    def walk(v):
        if isinstance(v, dict):
            if v.get("tool") == "llmbench":
                return {"_path": v.get("_path"), "overall": v.get("overall"),
                        "tenants": v.get("tenants"), "window_s": v.get("window_s"),
                        "wall_s": v.get("wall_s"), "actions": v.get("actions")}
            return {k: walk(x) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x) for x in v]
        return v
    return walk(R)


if __name__ == "__main__":
    main()
