"""The Python package's overhead against the CLI, on the workloads of issue 13:

* a filter query of 1,024 items against a 2^20-item server;
* an HE query of 1,024 items against APSI's 1M-1024-cmp parameters (2^20 items);
* a balanced PSI (VOLE-PSI, semi-honest) of 2^20 against 2^20 items.

Each case times the CLI command (the whole process) and the same work from
Python (the call, in a fresh interpreter that has already imported psikit;
the process's wall time too), alternating CLI and Python runs, and reports
medians. The peer is the same CLI process for both: a `psikit serve` for
the queries, a `psikit psi send --listen` started afresh for each VOLE-PSI
run. Python runs twice per case: on the same CSV file as the CLI (the
binding's own overhead) and on a list of str read beforehand (the input
conversion too), and a third time on the CSV file after
`psikit.reuse_freed_memory()` (freed memory kept for good, as the CLI's
one-shot commands keep it; `psi.receive` keeps it only while it runs, then
restores glibc's settings and returns the memory). A CSV path's result is
a `psikit.Rows` whose dicts are made when read; the runner takes its
length only. Then the wheel's size and the time of `import psikit`.

    python python/benchmarks/overhead.py --cli target/release/psikit --wheel dist/psikit-*.whl

Needs the release CLI and the release wheel installed in this interpreter.
The machine is shared: before each case it waits (up to --max-wait-secs in
all) until `pgrep -c rustc` prints 0, and says which runs found it busy.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

ROOT = Path(__file__).resolve().parents[2]
APSI_PARAMS = ROOT / "crates/protocols/src/he_psi/apsi-params/1M-1024-cmp.json"

# A Python run: prepares its input, then times the call alone (printed as
# JSON on the last line of stdout).
RUNNER = r"""
import json, sys, time, psikit
kind, inp, args = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
data = inp
if args.pop("reuse_memory", False):
    psikit.reuse_freed_memory()
if args.pop("as_list", False):
    with open(inp, encoding="utf-8") as f:
        next(f)
        data = [line.rstrip("\n") for line in f]
    args.pop("key", None)
t = time.perf_counter()
if kind == "filter":
    out = psikit.filter.query(args.pop("server"), data, **args)
elif kind == "he":
    out = psikit.he.query(args.pop("server"), data, **args)
else:
    out = psikit.psi.receive(data, **args)
secs = time.perf_counter() - t
t = time.perf_counter()
dicts = list(out) if isinstance(out, psikit.Rows) else None
as_list = time.perf_counter() - t if dicts is not None else None
print(json.dumps({"secs": secs, "matched": len(out), "rows_as_list_secs": as_list}))
"""


class Quiet:
    """Waits for `pgrep -c rustc` to print 0, within one budget for the run."""

    def __init__(self, budget: float) -> None:
        self.deadline = time.monotonic() + budget
        self.busy_runs: List[str] = []

    @staticmethod
    def compilers() -> int:
        out = subprocess.run(["pgrep", "-c", "rustc"], capture_output=True, text=True)
        return int(out.stdout.strip() or 0)

    def wait(self, what: str) -> None:
        while self.compilers() > 0:
            if time.monotonic() >= self.deadline:
                self.busy_runs.append(what)
                print(f"  {what}: compilers running, measured anyway", file=sys.stderr)
                return
            print(f"  {what}: compilers running, waiting 60 s", file=sys.stderr)
            time.sleep(60)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_sets(work: Path, log2: int, clients: int) -> Dict[str, Path]:
    """server.csv (2^log2 e-mails), client.csv (`clients`, half of them
    held) and peer.csv (2^log2, half of them in server.csv)."""
    rng = random.Random(13)
    n = 1 << log2
    server = [f"user{i}-{rng.getrandbits(32):08x}@example.org" for i in range(n)]
    client = [s for s in rng.sample(server, clients // 2)]
    client += [f"other{i}@example.net" for i in range(clients - len(client))]
    peer = rng.sample(server, n // 2) + [f"peer{i}@example.net" for i in range(n - n // 2)]
    files = {}
    for name, items in (("server", server), ("client", client), ("peer", peer)):
        path = work / f"{name}.csv"
        with open(path, "w", encoding="utf-8") as f:
            f.write("email\n")
            f.write("\n".join(items))
            f.write("\n")
        files[name] = path
    return files


def run_cli(args: List[str]) -> float:
    t = time.perf_counter()
    out = subprocess.run(args, capture_output=True, text=True)
    secs = time.perf_counter() - t
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed: {out.stderr}")
    return secs


def run_python(kind: str, inp: Path, args: Dict) -> Dict[str, float]:
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", RUNNER, kind, str(inp), json.dumps(args)],
                         capture_output=True, text=True)
    wall = time.perf_counter() - t
    if out.returncode != 0:
        raise SystemExit(f"python {kind} failed: {out.stderr}")
    res = json.loads(out.stdout.strip().splitlines()[-1])
    return {"call": res["secs"], "process": wall, "rows_as_list": res["rows_as_list_secs"]}


def start_sender(cli: str, peer: Path) -> Tuple[subprocess.Popen, str]:
    """A CLI VOLE-PSI sender listening on a fresh port (it prints `waiting
    for the peer on ADDR` once its input is read), and that address."""
    port = free_port()
    proc = subprocess.Popen([cli, "psi", "send", "--listen", f"127.0.0.1:{port}", "--input", str(peer),
                             "--key", "email", "--accept-timeout-secs", "120"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    line = proc.stderr.readline() if proc.stderr else ""
    if "waiting for the peer" not in line:
        raise SystemExit(f"the sender did not start: {line}")
    return proc, f"127.0.0.1:{port}"


def finish(proc: subprocess.Popen) -> None:
    if proc.wait(300) != 0:
        err = proc.stderr.read() if proc.stderr else ""
        raise SystemExit(f"the sender failed: {err}")


def median(xs: List[float]) -> float:
    return statistics.median(xs)


def measure(cli: str, files: Dict[str, Path], work: Path, runs: int, quiet: Quiet,
            only: List[str], log2: int) -> List[Dict]:
    results = []
    cli_state = work / "filter"
    he_state = work / "he"
    need_server = [c for c in ("filter", "he") if c in only]
    serve: Optional[subprocess.Popen] = None
    try:
        if need_server:
            if "filter" in only and not (cli_state / "filter.state").exists():
                t = time.perf_counter()
                run_cli([cli, "filter", "setup", "--input", str(files["server"]), "--key", "email",
                         "--state", str(cli_state), "--force"])
                print(f"filter setup: {time.perf_counter() - t:.1f} s", file=sys.stderr)
            if "he" in only and not (he_state / "he.db").exists():
                t = time.perf_counter()
                run_cli([cli, "he", "db", "build", "--csv", str(files["server"]), "--key", "email",
                         "--state", str(he_state), "--params", str(APSI_PARAMS), "--force"])
                print(f"HE database build: {time.perf_counter() - t:.1f} s", file=sys.stderr)
            cmd = [cli, "serve", "--listen", "127.0.0.1:0"]
            if "filter" in only:
                cmd += ["--filter-state", str(cli_state)]
            if "he" in only:
                cmd += ["--he-state", str(he_state)]
            serve = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            line = serve.stdout.readline() if serve.stdout else ""
            found = re.search(r"on (\S+:\d+)", line)
            if not found:
                raise SystemExit(f"psikit serve did not start: {line}")
            addr = found.group(1)
        client = files["client"]
        cases = []
        if "filter" in only:
            cases.append((f"filter query, 1,024 items, 2^{log2} server", "filter",
                          lambda out: [cli, "filter", "query", "--server", addr, "--input", str(client),
                                       "--key", "email", "--output", str(out),
                                       "--cache", str(work / "cli-filter.cache")],
                          # Both front ends keep the filter in a cache file
                          # between runs (the CLI always does).
                          lambda: {"server": addr, "key": "email",
                                   "cache": str(work / "py-filter.cache")}))
        if "he" in only:
            cases.append((f"HE query, 1,024 items, APSI 1M-1024-cmp, 2^{log2} server", "he",
                          lambda out: [cli, "he", "query", "--server", addr, "--csv", str(client),
                                       "--key", "email", "--out", str(out)],
                          lambda: {"server": addr, "key": "email"}))
        for title, kind, cli_args, py_args in cases:
            run_cli(cli_args(work / "warm.csv"))  # warm the server's caches
            c, p, pl, pr = [], [], [], []
            for i in range(runs):
                quiet.wait(f"{title} run {i + 1}")
                c.append(run_cli(cli_args(work / "out.csv")))
                p.append(run_python(kind, client, py_args()))
                pl.append(run_python(kind, client, {**py_args(), "as_list": True}))
                pr.append(run_python(kind, client, {**py_args(), "reuse_memory": True}))
            results.append(summary(title, c, p, pl, pr))
        if "vole" in only:
            title = f"VOLE-PSI receiver, 2^{log2} x 2^{log2}"
            c, p, pl, pr = [], [], [], []
            for i in range(runs):
                quiet.wait(f"{title} run {i + 1}")
                s, peer = start_sender(cli, files["peer"])
                c.append(run_cli([cli, "psi", "receive", "--connect", peer, "--input", str(files["server"]),
                                  "--key", "email", "--output", str(work / "out.csv")]))
                finish(s)
                for sink, extra in ((p, {}), (pl, {"as_list": True}), (pr, {"reuse_memory": True})):
                    s, peer = start_sender(cli, files["peer"])
                    sink.append(run_python("vole", files["server"], {"connect": peer, "key": "email", **extra}))
                    finish(s)
            results.append(summary(title, c, p, pl, pr))
    finally:
        if serve is not None:
            serve.kill()
            serve.wait()
    return results


def summary(title: str, cli: List[float], py: List[Dict[str, float]], py_list: List[Dict[str, float]],
            py_reuse: List[Dict[str, float]]) -> Dict:
    row = {
        "case": title,
        "cli_s": median(cli),
        "python_call_s": median([r["call"] for r in py]),
        "python_process_s": median([r["process"] for r in py]),
        "python_list_call_s": median([r["call"] for r in py_list]),
        "python_reuse_call_s": median([r["call"] for r in py_reuse]),
        "python_rows_as_list_s": median([r["rows_as_list"] or 0.0 for r in py]),
        "runs": {"cli": cli, "python": py, "python_list": py_list, "python_reuse": py_reuse},
    }
    print(json.dumps({k: v for k, v in row.items() if k != "runs"}), file=sys.stderr)
    return row


def import_time(runs: int = 7) -> float:
    code = "import time; t = time.perf_counter(); import psikit; print(time.perf_counter() - t)"
    times = []
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        times.append(float(out.stdout))
    return median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cli", required=True, help="the release psikit binary")
    ap.add_argument("--wheel", help="the wheel file, for its size")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--log2", type=int, default=20, help="server (and balanced) set size, log2")
    ap.add_argument("--only", default="filter,he,vole", help="cases: filter, he, vole")
    ap.add_argument("--work", help="a directory for the data and states (kept; default: a temporary one)")
    ap.add_argument("--max-wait-secs", type=float, default=1200, help="total wait for a quiet machine")
    ap.add_argument("--json", help="write the results here")
    a = ap.parse_args()
    import psikit

    quiet = Quiet(a.max_wait_secs)
    only = [c.strip() for c in a.only.split(",") if c.strip()]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(a.work) if a.work else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        if not (work / "server.csv").exists():
            files = write_sets(work, a.log2, 1024)
        else:
            files = {n: work / f"{n}.csv" for n in ("server", "client", "peer")}
        results = measure(a.cli, files, work, a.runs, quiet, only, a.log2)
    imported = import_time()
    wheel = os.path.getsize(a.wheel) if a.wheel else None
    report = {
        "psikit": psikit.__version__,
        "python": sys.version.split()[0],
        "import_psikit_s": imported,
        "wheel_bytes": wheel,
        "busy_runs": quiet.busy_runs,
        "cases": results,
    }
    if a.json:
        Path(a.json).write_text(json.dumps(report, indent=1))
    print("| case | CLI (process) | Python call, CSV path | Python process, CSV path | Python call, list "
          "| Python call, CSV path, `reuse_freed_memory()` |")
    print("|---|---|---|---|---|---|")
    for r in results:
        rel = r["python_call_s"] / r["cli_s"] - 1
        print(f"| {r['case']} | {r['cli_s'] * 1000:.0f} ms | {r['python_call_s'] * 1000:.0f} ms ({rel:+.1%}) | "
              f"{r['python_process_s'] * 1000:.0f} ms | {r['python_list_call_s'] * 1000:.0f} ms | "
              f"{r['python_reuse_call_s'] * 1000:.0f} ms |")
    print(f"\nimport psikit: {imported * 1000:.1f} ms", end="")
    if wheel:
        print(f"; wheel: {wheel / 1e6:.2f} MB", end="")
    print(f"; runs on a busy machine: {', '.join(quiet.busy_runs) or 'none'}")


if __name__ == "__main__":
    main()
