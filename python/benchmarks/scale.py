"""Sharded HE databases (issue 14): build throughput on Ray against the
CLI, and query latency against the shard count, strong and weak scaling.

* Build (skipped with ``--skip-build``): ``psikit he db build`` (one
  process, the whole database of ``2^--log2`` rows) against
  ``psikit.scale.build`` with 1 and 2 OPRF workers (Ray started before
  the clock; every stage its report times, i.e. every key ending in
  ``_s``).
* Queries, on this machine, through plain ``psikit serve`` processes (one
  per shard and the router, no Ray): ``psikit he query`` of ``--client``
  items (half of them present), for each shard count of ``--shards``:

  * strong scaling: the same ``2^--log2`` rows split more and more;
  * weak scaling: ``2^--per-shard-log2`` rows per shard, the database
    growing with the shard count.

  Each query is split into the client's phases (parameters and keys,
  OPRF, encrypt, server, decrypt, as ``psikit he query`` prints them) and
  the router's trace (``psikit serve --trace-queries``): the query's
  arrival at the router, the fan-out (bytes of the query sent to every
  shard, time until the last shard has it), each shard's evaluation as
  the router sees it (query sent to done; median over shards and the
  slowest), and the gathering (last shard done to the client's done).

    python python/benchmarks/scale.py --cli target/release/psikit --skip-build \\
        --log2 20 --per-shard-log2 16 --shards 1,2,4,8,16 --runs 3

Needs the release CLI; the build part also needs psikit installed with
its ``ray`` extra. A database of a given size and shard count is built
once per ``--work`` directory and reused (the strong and weak scaling
share some). Each shard server holds its part in memory.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Tuple


def write_server(work: Path, rows: int) -> Path:
    """The server's CSV of `rows` rows (written once per size)."""
    path = work / f"server-{rows}.csv"
    if not path.exists():
        tmp = path.with_suffix(".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            f.write("email,tier\n")
            for i in range(rows):
                f.write(f"user{i}@example.org,t{i % 97:07d}\n")
        tmp.rename(path)
    return path


def write_client(work: Path, client: int, smallest: int) -> Path:
    """The client's CSV: odd entries present in every server set of at
    least `smallest` rows, even ones absent."""
    if (client - 1) * 7 >= smallest:
        sys.exit(f"--client {client} needs servers of more than {(client - 1) * 7} rows")
    path = work / "client.csv"
    with open(path, "w", encoding="utf-8") as f:
        f.write("email\n")
        for i in range(client):
            f.write(f"user{i * 7 if i % 2 else (1 << 40) + i}@example.org\n")
    return path


def timed(cmd: List[str]) -> Tuple[float, str]:
    t = time.perf_counter()
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return time.perf_counter() - t, out


def serve(cli: str, args: List[str], log: Path = None) -> Tuple[subprocess.Popen, str]:
    stderr = open(log, "w", encoding="utf-8") if log else subprocess.DEVNULL
    proc = subprocess.Popen([cli, "serve", "--listen", "127.0.0.1:0", *args], stdout=subprocess.PIPE,
                            stderr=stderr, text=True)
    line = proc.stdout.readline()
    addr = next((w for w in line.split() if w.startswith("127.0.0.1:")), None)
    if addr is None:
        proc.kill()
        sys.exit(f"psikit serve {' '.join(args)} did not start: {line!r}")
    return proc, addr


def client_phases(out: str) -> Dict[str, float]:
    """The phases `psikit he query` prints, in seconds, and its traffic in
    MiB."""
    def secs(name: str) -> float:
        m = re.search(rf"{name} ([0-9.]+) (ms|s)\b", out)
        return 0.0 if not m else float(m.group(1)) / (1000 if m.group(2) == "ms" else 1)

    def mib(name: str) -> float:
        m = re.search(rf"{name} ([0-9.]+) (B|KiB|MiB|GiB)", out)
        scale = {"B": 1 / 1024 ** 2, "KiB": 1 / 1024, "MiB": 1, "GiB": 1024}
        return 0.0 if not m else float(m.group(1)) * scale[m.group(2)]

    return {"keys_s": secs("parameters and keys"), "oprf_s": secs("OPRF"), "encrypt_s": secs("encrypt"),
            "server_s": secs("server"), "decrypt_s": secs("decrypt"),
            "sent_mib": mib("sent"), "received_mib": mib("received")}


def router_phases(traces: List[dict]) -> Dict[str, float]:
    """One query's router traces (one per query round) as phases: seconds,
    MiB, package counts; rounds run one after the other, so they add."""
    out = {"arrival_s": 0.0, "fan_out_s": 0.0, "fan_out_mib": 0.0, "shard_eval_median_s": 0.0,
           "shard_eval_max_s": 0.0, "gather_s": 0.0, "router_s": 0.0, "packages": 0, "forwarded_mib": 0.0}
    for t in traces:
        shards = t["shards"]
        evals = [(s["done_ms"] - s["sent_ms"]) / 1e3 for s in shards]
        out["arrival_s"] += t["received_ms"] / 1e3
        out["fan_out_s"] += (max(s["sent_ms"] for s in shards) - t["received_ms"]) / 1e3
        out["fan_out_mib"] += t["fan_out_bytes"] / 2 ** 20
        out["shard_eval_median_s"] += statistics.median(evals)
        out["shard_eval_max_s"] += max(evals)
        out["gather_s"] += t["gather_ms"] / 1e3
        out["router_s"] += t["done_ms"] / 1e3
        out["packages"] += t["packages"]
        out["forwarded_mib"] += t["forwarded_bytes"] / 2 ** 20
    return out


class TraceLog:
    """The trace lines a router writes to its stderr log, read as they
    come."""

    def __init__(self, path: Path):
        self.path = path
        self.seen = 0

    def new(self) -> List[dict]:
        prefix = "psikit: query trace "
        lines = [l for l in self.path.read_text(encoding="utf-8").splitlines() if l.startswith(prefix)]
        fresh, self.seen = lines[self.seen:], len(lines)
        return [json.loads(l[len(prefix):]) for l in fresh]


def build_sharded(cli: str, work: Path, rows: int, shards: int, common: List[str]) -> Path:
    """The database of `rows` rows in `shards` shards (built once)."""
    state = work / f"sharded-{rows}-{shards}"
    if not (state / "router" / "manifest.json").exists():
        subprocess.run([cli, "he", "db", "build", "--csv", str(write_server(work, rows)), "--state", str(state),
                        "--shards", str(shards), "--force", *common], check=True, capture_output=True)
    return state


def bench_queries(cli: str, work: Path, client: Path, state: Path, shards: int, runs: int) -> Dict[str, float]:
    """The median (by wall time) of `runs` queries of `state` served by
    `shards` shard processes and a tracing router, with the 1-minute load
    average after them."""
    procs = []
    try:
        addrs = []
        for i in range(shards):
            proc, addr = serve(cli, ["--he-state", str(state / f"shard-{i}")])
            procs.append(proc)
            addrs.append(addr)
        log = work / "router.log"
        shard_args = [x for addr in addrs for x in ("--he-shard", addr)]
        proc, router = serve(cli, ["--he-router", str(state / "router"), "--trace-queries", *shard_args], log)
        procs.append(proc)
        traces = TraceLog(log)
        samples = []
        for _ in range(runs):
            t, out = timed([cli, "he", "query", "--server", router, "--csv", str(client), "--key", "email",
                            "--out", str(work / "matches.csv")])
            # The router writes its trace before the client's done message
            # goes out, so it is in the log by now.
            got = traces.new()
            if not got:
                sys.exit(f"no query trace in {log}")
            samples.append({"wall_s": t, **client_phases(out), **router_phases(got), "rounds": len(got)})
        # The run of median wall time, whole: medians taken field by field
        # would mix runs (a shard's evaluation above the client's server
        # time).
        samples.sort(key=lambda s: s["wall_s"])
        return {**samples[len(samples) // 2], "load": os.getloadavg()[0]}
    finally:
        for p in procs:
            p.kill()
            p.wait()


def bench_build(a, work: Path, common: List[str]) -> Dict[str, object]:
    """The CLI's whole build against the Ray build's, alternated run by run
    (this VM's speed drifts), medians; each output is removed after its
    run."""
    import shutil

    import psikit.scale
    import ray

    rows = 1 << a.log2
    csv = write_server(work, rows)
    runs: Dict[str, Dict[str, List[float]]] = {}
    ray.init(include_dashboard=False, log_to_driver=False)
    try:
        for _ in range(a.runs):
            out = work / "build-out"
            t, _ = timed([a.cli, "he", "db", "build", "--csv", str(csv), "--state", str(out), *common])
            runs.setdefault("cli", {}).setdefault("total_s", []).append(t)
            shutil.rmtree(out)
            for workers in map(int, a.workers.split(",")):
                t = time.perf_counter()
                report = psikit.scale.build(str(csv), out, shards=a.build_shards, key="email", label="tier",
                                            workers=workers, client_items=a.client)
                stages = runs.setdefault(f"ray_{workers}_workers", {})
                # The stages are whatever the build reports timing for.
                for k, v in report.items():
                    if k.endswith("_s") and k != "total_s":
                        stages.setdefault(k, []).append(v)
                stages.setdefault("total_s", []).append(time.perf_counter() - t)
                shutil.rmtree(out)
    finally:
        ray.shutdown()
    return {name: {k: statistics.median(v) for k, v in stages.items()} for name, stages in runs.items()}


def ms(s: float) -> str:
    return f"{s * 1e3:,.1f} ms" if s < 0.1 else f"{s * 1e3:,.0f} ms"


def table(title: str, rows: List[Tuple[int, int, Dict[str, float]]]) -> str:
    """A markdown table of one scaling's queries."""
    head = ("| shards | rows | whole query | OPRF | server (client) | fan-out | shard eval (median) "
            "| slowest shard | gathering | decrypt | to shards | sent | received | load |")
    lines = [f"{title}:", "", head, "|" + "---|" * (head.count("|") - 1)]
    for shards, rows_, q in rows:
        lines.append(
            f"| {shards} | 2^{rows_.bit_length() - 1} | {ms(q['wall_s'])} | {ms(q['oprf_s'])} | {ms(q['server_s'])} "
            f"| {ms(q['fan_out_s'])} | {ms(q['shard_eval_median_s'])} | {ms(q['shard_eval_max_s'])} "
            f"| {ms(q['gather_s'])} | {ms(q['decrypt_s'])} | {q['fan_out_mib']:.2f} MiB "
            f"| {q['sent_mib']:.2f} MiB | {q['received_mib']:.2f} MiB | {q['load']:.1f} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cli", required=True)
    ap.add_argument("--log2", type=int, default=16, help="rows of the build and of the strong scaling (log2)")
    ap.add_argument("--per-shard-log2", type=int, default=16, help="rows per shard of the weak scaling (log2)")
    ap.add_argument("--scaling", default="strong,weak")
    ap.add_argument("--client", type=int, default=1024)
    ap.add_argument("--shards", default="1,2,4,8,16")
    ap.add_argument("--build-shards", type=int, default=4)
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--skip-build", action="store_true", help="benchmark the queries only (no Ray needed)")
    ap.add_argument("--work", help="a directory for data and states, reused across runs (default: a temporary one)")
    a = ap.parse_args()
    work = Path(a.work or tempfile.mkdtemp(prefix="psikit-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    common = ["--key", "email", "--label", "tier", "--client-items", str(a.client)]
    shard_counts = [int(s) for s in a.shards.split(",")]
    scalings = [name for name in a.scaling.split(",") if name]  # --scaling "": the build alone
    sizes = {
        "strong": [(s, 1 << a.log2) for s in shard_counts],
        "weak": [(s, s << a.per_shard_log2) for s in shard_counts],
    }
    smallest = min((rows for name in scalings for _, rows in sizes[name]), default=1 << a.log2)
    client = write_client(work, a.client, smallest)
    results: Dict[str, object] = {"client": a.client}

    if not a.skip_build:
        results["build"] = bench_build(a, work, common)
        print(json.dumps({"build": results["build"]}), file=sys.stderr)

    tables = []
    for name in scalings:
        done = []
        for shards, rows in sizes[name]:
            state = build_sharded(a.cli, work, rows, shards, common)
            q = bench_queries(a.cli, work, client, state, shards, a.runs)
            results[f"{name}_{shards}_shards"] = {"rows": rows, **q}
            print(json.dumps({f"{name}_{shards}_shards": results[f"{name}_{shards}_shards"]}), file=sys.stderr)
            done.append((shards, rows, q))
        tables.append(table(f"{name.capitalize()} scaling", done))
    print(json.dumps(results, indent=2))
    print("\n\n".join(tables))


if __name__ == "__main__":
    main()
