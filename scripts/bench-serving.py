#!/usr/bin/env python3
"""scripts/bench-serving.py — what serving costs: one saturating workload run
through the engine in-process (`llmgen --workload`, no HTTP) and through a
live llmd over HTTPS, alternating, in one invocation, side by side.

The one idea: everything but the serving layer is held equal.  Both sides get
the same requests (explicit token ids, greedy, ignore_eos, all arriving at
once, one tenant), the same engine settings (block size, KV and swap blocks,
token budget, sequences per step, taken from the workload's "engine" object)
and a fresh engine for every run (a fresh llmgen process, a fresh daemon), so
the prefix cache of one run never helps the next.  Throughput is completion
tokens over the wall time from the first submission (offline) or the first
send (daemon) to the last token / last response.  The headline figure is
median(daemon) / median(offline); the goal is >= 0.90.

The load client is our own (http.client + ssl, one keep-alive HTTPS
connection per worker, handshakes done before the clock starts) and reports
its own CPU time, so one can see it is not the bottleneck.  The daemon's CPU
time is read per thread from /proc, to show where its time goes.

    python3 scripts/bench-serving.py [--bin build/bin] [--reps 2] [--json FILE]
    python3 scripts/bench-serving.py --make-workload   # rewrites the workload file

Figures come from one machine, often shared: compare them only with figures
taken in the same invocation.
"""

import argparse
import http.client
import json
import os
import platform
import random
import resource
import shutil
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time

DEFAULT_MODEL = "models/SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_WORKLOAD = "bench/workloads/serving.json"
TENANT = "bench"
GOAL = 0.90
# Defaults of both sides for what the workload file may leave out; llmgen has
# no --max-seqs flag, so its engine always runs with the engine's default.
ENGINE_DEFAULTS = {"block_size": 16, "kv_blocks": 1024, "swap_blocks": 0,
                   "max_batch_tokens": 512, "max_seqs": 256}
LLMGEN_MAX_SEQS = 256
START_TIMEOUT = 120.0  # model load on a busy machine; a bound against hangs only
RUN_TIMEOUT = 900.0


# ------------------------------------------------------------- workload --

def make_workload(path, seed, count, lo, hi, max_tokens, engine):
    """Writes a workload of explicit requests: prompt ids drawn from a seeded
    generator (ordinary token ids, away from the special ones at both ends of
    the vocabulary), all arriving at 0, greedy, ignore_eos."""
    rng = random.Random(seed)
    reqs = []
    for i in range(count):
        n = rng.randint(lo, hi)
        reqs.append({"id": i + 1, "tenant": TENANT, "priority": 1, "arrival": 0.0,
                     "max_tokens": max_tokens, "ignore_eos": True, "temperature": 0,
                     "prompt_ids": [rng.randint(256, 48000) for _ in range(n)]})
    doc = {"description": ("Serving-overhead benchmark (scripts/bench-serving.py): %d requests "
                           "of one tenant, prompts of %d..%d random token ids (seed %d), "
                           "%d tokens each with ignore_eos, greedy, all arriving at 0. The "
                           "engine settings are given to llmgen and llmd alike."
                           % (count, lo, hi, seed, max_tokens)),
           "engine": engine, "tenants": [{"name": TENANT, "weight": 1}], "requests": reqs}
    with open(path, "w") as f:
        # One request per line keeps the file diffable and reviewable.
        f.write("{\n")
        for k in ("description", "engine", "tenants"):
            f.write("  %s: %s,\n" % (json.dumps(k), json.dumps(doc[k])))
        f.write('  "requests": [\n')
        f.write(",\n".join("    " + json.dumps(r) for r in reqs))
        f.write("\n  ]\n}\n")


def load_workload(path):
    with open(path) as f:
        doc = json.load(f)
    eng = dict(ENGINE_DEFAULTS)
    eng.update(doc.get("engine", {}))
    if eng["max_seqs"] != LLMGEN_MAX_SEQS:
        sys.exit("bench-serving: engine.max_seqs must be %d: llmgen cannot set it"
                 % LLMGEN_MAX_SEQS)
    reqs = doc.get("requests", [])
    if not reqs or "generate" in doc:
        sys.exit("bench-serving: %s: needs explicit \"requests\" (no \"generate\")" % path)
    for r in reqs:
        if "prompt_ids" not in r or r.get("arrival", 0) != 0 or r.get("n", 1) != 1:
            sys.exit("bench-serving: request %s: needs prompt_ids, arrival 0, n 1" % r.get("id"))
    return doc, eng, reqs


# ---------------------------------------------------------------- utils --

def pct(values, p):
    """Nearest-rank percentile (as llmgen reports), 0 for no values."""
    if not values:
        return 0.0
    v = sorted(values)
    k = max(0, min(len(v) - 1, int(-(-p * len(v) // 1)) - 1))
    return v[k]


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def check_run(argv, **kw):
    p = subprocess.run(argv, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        sys.exit("bench-serving: %s failed (%d):\n%s%s"
                 % (" ".join(argv), p.returncode, p.stdout, p.stderr))
    return p.stdout


def proc_threads(pid):
    """Per thread of a live process: [CPU seconds (user + system), voluntary
    and involuntary context switches].  Involuntary switches of the compute
    threads are the cost of sharing the cores with anything else."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    try:
        tids = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return out
    for tid in tids:
        try:
            with open("/proc/%d/task/%s/stat" % (pid, tid)) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open("/proc/%d/task/%s/status" % (pid, tid)) as f:
                sw = {k: int(v) for k, v in (ln.split(":") for ln in f if "ctxt_switches" in ln)}
        except (OSError, ValueError):
            continue
        out[int(tid)] = [(int(fields[11]) + int(fields[12])) / tick,  # utime + stime
                         sw.get("voluntary_ctxt_switches", 0),
                         sw.get("nonvoluntary_ctxt_switches", 0)]
    return out


def threads_delta(before, after):
    """What each thread did between two proc_threads() readings."""
    zero = [0.0, 0, 0]
    return {t: [a - b for a, b in zip(v, before.get(t, zero))] for t, v in after.items()}


def machine_info(model):
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    return {"nproc": os.cpu_count(), "cpu_model": cpu, "kernel": platform.release(),
            "python": platform.python_version(), "model": os.path.abspath(model),
            "model_bytes": os.path.getsize(model), "git_commit": commit,
            "loadavg_start": os.getloadavg()}


# -------------------------------------------------------------- offline --

def run_offline(args, eng):
    argv = [os.path.join(args.bin, "llmgen"), "-m", args.model, "--workload", args.workload,
            "--json", "--block-size", str(eng["block_size"]), "--kv-blocks",
            str(eng["kv_blocks"]), "--swap-blocks", str(eng["swap_blocks"]),
            "--max-batch-tokens", str(eng["max_batch_tokens"])]
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    p = subprocess.run(argv, capture_output=True, text=True, timeout=RUN_TIMEOUT)
    elapsed = time.monotonic() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        sys.exit("bench-serving: llmgen failed (%d):\n%s" % (p.returncode, p.stderr))
    rep = json.loads(p.stdout)
    rows = rep["requests"]
    return {"side": "offline", "wall_s": rep["duration_s"],
            "completion_tokens": rep["completion_tokens"],
            "throughput_tok_s": rep["throughput_tok_s"],
            "requests": len(rows), "errors": sum(1 for r in rows
                                                 if r["finish_reason"] not in ("length", "stop")),
            "ttft_p50_s": rep["ttft_p50"], "ttft_p99_s": rep["ttft_p99"],
            "tpot_p50_s": rep["tpot_p50"], "tpot_p99_s": rep["tpot_p99"],
            "steps": rep["steps"], "preemptions": rep["preemptions"],
            "process_s": elapsed,
            "process_cpu_s": (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime),
            "process_ctx_switches": {"voluntary": r1.ru_nvcsw - r0.ru_nvcsw,
                                     "involuntary": r1.ru_nivcsw - r0.ru_nivcsw}}


# --------------------------------------------------------------- daemon --

class Daemon:
    """A fresh llmd on a free loopback port, with its own DB, key and
    self-signed certificate in a temporary directory."""

    def __init__(self, args, eng, tmp):
        self.tmp, self.port = tmp, free_port()
        self.cert, key = os.path.join(tmp, "cert.pem"), os.path.join(tmp, "key.pem")
        db = os.path.join(tmp, "llmd.db")
        if not os.path.exists(self.cert):
            check_run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                       "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2", "-subj",
                       "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                       "-keyout", key, "-out", self.cert])
        if os.path.exists(db):
            os.unlink(db)
        adm = [os.path.join(args.bin, "llmadmin"), "--db", db]
        check_run(adm + ["init"])
        check_run(adm + ["tenant", "add", TENANT])
        self.key = json.loads(check_run(adm + ["--json", "key", "create", TENANT]))["key"]
        self.log_path = os.path.join(tmp, "llmd-%d.log" % self.port)
        self.log = open(self.log_path, "w")
        argv = [os.path.join(args.bin, "llmd"), "--model", args.model, "--listen",
                "127.0.0.1:%d" % self.port, "--tls-cert", self.cert, "--tls-key", key,
                "--db", db, "--admin-socket", "", "--block-size", str(eng["block_size"]),
                "--kv-blocks", str(eng["kv_blocks"]), "--swap-blocks", str(eng["swap_blocks"]),
                "--max-batched-tokens", str(eng["max_batch_tokens"]), "--max-seqs",
                str(eng["max_seqs"]), "--max-queue", str(max(1024, 4 * len(args.reqs)))]
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT)
        self.ctx = ssl.create_default_context(cafile=self.cert)
        self._wait_ready()

    def _wait_ready(self):
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.stop()
                sys.exit("bench-serving: llmd exited (%d); log:\n%s"
                         % (self.proc.returncode, open(self.log_path).read()))
            try:
                c = self.connect()
                c.request("GET", "/health")
                ok = c.getresponse().status == 200
                c.close()
                if ok:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        self.stop()
        sys.exit("bench-serving: llmd not ready in %.0f s" % START_TIMEOUT)

    def connect(self):
        return http.client.HTTPSConnection("127.0.0.1", self.port, context=self.ctx,
                                           timeout=RUN_TIMEOUT)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode


def read_sse(resp, t_send, rec):
    """Reads an SSE completion stream: time of the first text, usage, [DONE]."""
    while True:
        line = resp.readline()
        if not line:
            raise OSError("stream ended without [DONE]")
        line = line.strip()
        if not line.startswith(b"data:"):
            continue
        data = line[5:].strip()
        if data == b"[DONE]":
            return
        ev = json.loads(data)
        if "error" in ev:
            raise OSError("stream error: %s" % ev["error"].get("message"))
        if ev.get("choices") and ev["choices"][0].get("text") and "ttft_s" not in rec:
            rec["ttft_s"] = time.monotonic() - t_send
        if ev.get("usage"):
            rec["completion_tokens"] = ev["usage"]["completion_tokens"]


def worker(d, model_id, req, stream, barrier, rec):
    """One client: connects (TLS handshake) before the start line, then sends
    its request on that keep-alive connection and reads the whole answer."""
    try:
        conn = d.connect()
        conn.request("GET", "/health")
        conn.getresponse().read()
        body = {"model": model_id, "prompt": req["prompt_ids"], "max_tokens": req["max_tokens"],
                "temperature": 0, "ignore_eos": True}
        if stream:
            body.update(stream=True, stream_options={"include_usage": True})
        payload = json.dumps(body).encode()
        hdrs = {"Authorization": "Bearer " + d.key, "Content-Type": "application/json"}
        barrier.wait()
        t_send = time.monotonic()
        rec["t_send"] = t_send
        conn.request("POST", "/v1/completions", payload, hdrs)
        resp = conn.getresponse()
        if resp.status != 200:
            raise OSError("HTTP %d: %s" % (resp.status, resp.read()[:300]))
        if stream:
            read_sse(resp, t_send, rec)
        else:
            out = json.loads(resp.read())
            rec["completion_tokens"] = out["usage"]["completion_tokens"]
        rec["t_done"] = time.monotonic()
        conn.close()
    except (OSError, ValueError, KeyError, threading.BrokenBarrierError) as e:
        rec["error"] = str(e)
        barrier.abort()


def run_daemon(args, eng, stream, tmp):
    d = Daemon(args, eng, tmp)
    try:
        model_id = os.path.basename(args.model)
        model_id = model_id[:-5] if model_id.endswith(".gguf") else model_id
        n = len(args.reqs)
        recs = [{} for _ in range(n)]
        barrier = threading.Barrier(n + 1)
        threads = [threading.Thread(target=worker,
                                    args=(d, model_id, args.reqs[i], stream, barrier, recs[i]))
                   for i in range(n)]
        for t in threads:
            t.start()
        try:
            barrier.wait(START_TIMEOUT)
        except threading.BrokenBarrierError:
            pass
        th0 = proc_threads(d.proc.pid)
        r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
        for t in threads:
            t.join()
        th1 = proc_threads(d.proc.pid)
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        elapsed = time.monotonic() - t0
    finally:
        status = d.stop()
    errs = [r["error"] for r in recs if "error" in r]
    if errs:
        sys.exit("bench-serving: daemon run failed: %s (log %s)" % (errs[0], d.log_path))
    wall = max(r["t_done"] for r in recs) - min(r["t_send"] for r in recs)
    tokens = sum(r["completion_tokens"] for r in recs)
    e2e = [r["t_done"] - r["t_send"] for r in recs]
    per_thread = threads_delta(th0, th1)
    io = per_thread.get(d.proc.pid, [0.0, 0, 0])
    res = {"side": "daemon-stream" if stream else "daemon", "wall_s": wall,
           "completion_tokens": tokens, "throughput_tok_s": tokens / wall if wall > 0 else 0.0,
           "requests": n, "errors": 0, "daemon_exit_status": status,
           "e2e_p50_s": pct(e2e, 0.5), "e2e_p99_s": pct(e2e, 0.99),
           "client_cpu_s": (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime),
           "client_elapsed_s": elapsed,
           "daemon_cpu_s": sum(v[0] for v in per_thread.values()),
           "daemon_io_thread_cpu_s": io[0],
           "daemon_io_thread_ctx_switches": {"voluntary": io[1], "involuntary": io[2]},
           "daemon_ctx_switches": {"voluntary": sum(v[1] for v in per_thread.values()),
                                   "involuntary": sum(v[2] for v in per_thread.values())},
           # [cpu s, voluntary, involuntary] per thread, busiest first
           "daemon_threads": sorted(([round(v[0], 2), v[1], v[2]] for v in per_thread.values()),
                                    reverse=True)}
    if status != 0:
        print("bench-serving: warning: llmd exited with status %s on SIGTERM" % status)
    if stream:
        ttft = [r["ttft_s"] for r in recs if "ttft_s" in r]
        res.update(ttft_p50_s=pct(ttft, 0.5), ttft_p90_s=pct(ttft, 0.9),
                   ttft_p99_s=pct(ttft, 0.99))
    return res


# --------------------------------------------------------------- report --

def summarize(runs, sides):
    out = {}
    for s in sides:
        tp = [r["throughput_tok_s"] for r in runs if r["side"] == s]
        if tp:
            out[s] = {"throughput_median_tok_s": statistics.median(tp),
                      "throughput_best_tok_s": max(tp), "throughput_all": tp}
    off = out.get("offline")
    for s in sides:
        if s != "offline" and s in out and off:
            # Others on the machine only ever slow a run down, so the best of
            # each side is a second, less noisy view beside the medians.
            out[s]["ratio_to_offline"] = (out[s]["throughput_median_tok_s"]
                                          / off["throughput_median_tok_s"])
            out[s]["ratio_best_to_best"] = (out[s]["throughput_best_tok_s"]
                                            / off["throughput_best_tok_s"])
    return out


def fmt(v, spec):
    return format(v, spec) if isinstance(v, (int, float)) else "-"


def print_table(runs, summary):
    head = "%-14s %3s %6s %6s %6s %8s %8s %7s %7s %7s %7s %5s"
    print()
    print(head % ("side", "rep", "wall", "tokens", "tok/s", "ttft p50", "ttft p99", "client",
                  "server", "I/O thr", "invol.", "load"))
    print(head % ("", "", "s", "", "", "s", "s", "cpu s", "cpu s", "cpu s", "switch", "1m"))
    for r in runs:
        cs = r.get("daemon_ctx_switches", r.get("process_ctx_switches"))
        print("%-14s %3d %6.2f %6d %6.1f %8s %8s %7s %7s %7s %7d %5.1f"
              % (r["side"], r["rep"], r["wall_s"], r["completion_tokens"], r["throughput_tok_s"],
                 fmt(r.get("ttft_p50_s"), ".3f"), fmt(r.get("ttft_p99_s"), ".3f"),
                 fmt(r.get("client_cpu_s"), ".2f"),
                 fmt(r.get("daemon_cpu_s", r.get("process_cpu_s")), ".2f"),
                 fmt(r.get("daemon_io_thread_cpu_s"), ".2f"), cs["involuntary"], r["loadavg_1m"]))
    print()
    for s, v in summary.items():
        line = "%-14s median %6.1f tok/s, best %6.1f" % (s, v["throughput_median_tok_s"],
                                                          v["throughput_best_tok_s"])
        if "ratio_to_offline" in v:
            line += "   /offline: median %.3f (goal >= %.2f: %s), best %.3f" % (
                v["ratio_to_offline"], GOAL, "met" if v["ratio_to_offline"] >= GOAL else "NOT met",
                v["ratio_best_to_best"])
        print(line)
    print("server cpu, invol. switch: llmgen's whole process, model load included (offline "
          "rows);\nllmd's threads during the run (daemon rows), of which I/O thr is the "
          "libevent thread.\ninvol. switch: involuntary context switches (cores taken by "
          "others).  load: 1-minute\nload average after the run.  Figures are from one noisy, "
          "shared machine; compare\nonly within one run.")


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default="build/bin", help="directory of llmd, llmadmin, llmgen")
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--workload", default=DEFAULT_WORKLOAD)
    ap.add_argument("--reps", type=int, default=2, help="repetitions of each side (default 2)")
    ap.add_argument("--sides", default="offline,daemon,daemon-stream",
                    help="what runs in each repetition, in order (default: all three)")
    ap.add_argument("--json", metavar="FILE", help="write every figure to FILE")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory (logs)")
    g = ap.add_argument_group("--make-workload: write the workload file instead of running")
    g.add_argument("--make-workload", action="store_true")
    g.add_argument("--seed", type=int, default=1)
    g.add_argument("--count", type=int, default=24)
    g.add_argument("--prompt-len", type=int, nargs=2, default=[64, 256], metavar=("LO", "HI"))
    g.add_argument("--max-tokens", type=int, default=64)
    g.add_argument("--kv-blocks", type=int, default=1024)
    g.add_argument("--max-batch-tokens", type=int, default=512)
    return ap.parse_args()


def main():
    args = parse_args()
    if args.make_workload:
        eng = dict(ENGINE_DEFAULTS, kv_blocks=args.kv_blocks,
                   max_batch_tokens=args.max_batch_tokens)
        make_workload(args.workload, args.seed, args.count, args.prompt_len[0],
                      args.prompt_len[1], args.max_tokens, eng)
        print("wrote %s" % args.workload)
        return
    for prog in ("llmd", "llmadmin", "llmgen"):
        if not os.access(os.path.join(args.bin, prog), os.X_OK):
            sys.exit("bench-serving: %s/%s missing: build it first" % (args.bin, prog))
    doc, eng, args.reqs = load_workload(args.workload)
    sides = args.sides.split(",")
    if not sides or any(sd not in ("offline", "daemon", "daemon-stream") for sd in sides):
        sys.exit("bench-serving: --sides: offline, daemon, daemon-stream")
    info = machine_info(args.model)
    print("bench-serving: %d requests, %d prompt tokens, engine %s; %d cores (%s), load %.2f"
          % (len(args.reqs), sum(len(r["prompt_ids"]) for r in args.reqs), json.dumps(eng),
             info["nproc"], info["cpu_model"], info["loadavg_start"][0]))
    tmp = tempfile.mkdtemp(prefix="llmd-bench-")
    runs = []
    t_all = time.monotonic()
    try:
        for rep in range(1, args.reps + 1):
            for side in sides:
                r = (run_offline(args, eng) if side == "offline"
                     else run_daemon(args, eng, side == "daemon-stream", tmp))
                r["rep"] = rep
                r["loadavg_1m"] = os.getloadavg()[0]
                runs.append(r)
                print("  %-14s rep %d: %6.1f tok/s (%d tokens in %.2f s)"
                      % (side, rep, r["throughput_tok_s"], r["completion_tokens"], r["wall_s"]),
                      flush=True)
    finally:
        if args.keep:
            print("kept %s" % tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    summary = summarize(runs, sides)
    print_table(runs, summary)
    info["loadavg_end"] = os.getloadavg()
    info["total_s"] = time.monotonic() - t_all
    if args.json:
        out = {"note": "figures from one noisy, shared machine; compare within one run only",
               "machine": info, "workload": {"file": args.workload, "requests": len(args.reqs),
                                             "description": doc.get("description")},
               "engine": eng, "goal_ratio": GOAL, "runs": runs, "summary": summary,
               "ratio": summary.get("daemon", {}).get("ratio_to_offline")}
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)
            f.write("\n")


if __name__ == "__main__":
    main()
