"""Sharded HE databases (issue 14): build throughput on Ray against the
CLI, and query latency against the shard count.

* Build: ``psikit he db build`` (one process, the whole database) against
  ``psikit.scale.build`` with 1 and 2 OPRF workers (Ray started before the
  clock; the stages timed apart: scan and plan, OPRF, shards).
* Queries (strong scaling: the same database in 1, 2, 4, ... shards on
  this machine, plain ``psikit serve`` processes, no Ray): ``psikit he
  query`` of 1,024 items, as a whole process, with the phases it prints
  (OPRF, server, decrypt) and its traffic.

    python python/benchmarks/scale.py --cli target/release/psikit --log2 16 --runs 3

Needs the release CLI and psikit installed with its ``ray`` extra. Sizes
beyond what fits here: raise ``--log2`` (each shard server holds its part
in memory; the build holds all OPRF outputs).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List

import psikit
import psikit.scale


def write_sets(work: Path, rows: int, client: int) -> None:
    with open(work / "server.csv", "w", encoding="utf-8") as f:
        f.write("email,tier\n")
        for i in range(rows):
            f.write(f"user{i}@example.org,t{i % 97:07d}\n")
    with open(work / "client.csv", "w", encoding="utf-8") as f:
        f.write("email\n")
        for i in range(client):
            f.write(f"user{i * 7 if i % 2 else rows + i}@example.org\n")


def timed(cmd: List[str]) -> (float, str):
    t = time.perf_counter()
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return time.perf_counter() - t, out


def serve(cli: str, args: List[str]) -> (subprocess.Popen, str):
    proc = subprocess.Popen([cli, "serve", "--listen", "127.0.0.1:0", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline()
    addr = next(w for w in line.split() if w.startswith("127.0.0.1:"))
    return proc, addr


def query_phases(out: str) -> Dict[str, float]:
    """The phases `psikit he query` prints, in seconds, and its traffic in
    KiB."""
    def secs(name: str) -> float:
        m = re.search(rf"{name} ([0-9.]+) (ms|s)", out)
        return 0.0 if not m else float(m.group(1)) / (1000 if m.group(2) == "ms" else 1)

    sent = re.search(r"sent ([0-9.]+) (KiB|MiB)", out)
    recv = re.search(r"received ([0-9.]+) (KiB|MiB)", out)
    kib = lambda m: 0.0 if not m else float(m.group(1)) * (1024 if m.group(2) == "MiB" else 1)  # noqa: E731
    return {"oprf_s": secs("OPRF"), "server_s": secs("server"), "decrypt_s": secs("decrypt"),
            "sent_kib": kib(sent), "received_kib": kib(recv)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cli", required=True)
    ap.add_argument("--log2", type=int, default=16)
    ap.add_argument("--client", type=int, default=1024)
    ap.add_argument("--shards", default="1,2,4,8,16")
    ap.add_argument("--build-shards", type=int, default=4)
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--work", help="a directory for data and states (default: a temporary one)")
    a = ap.parse_args()
    work = Path(a.work or tempfile.mkdtemp(prefix="psikit-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    rows = 1 << a.log2
    write_sets(work, rows, a.client)
    common = ["--key", "email", "--label", "tier", "--client-items", str(a.client)]
    results: Dict[str, object] = {"rows": rows}

    # Build: the CLI's whole database, then Ray with 1 and 2 workers.
    cli_build = []
    for r in range(a.runs):
        t, _ = timed([a.cli, "he", "db", "build", "--csv", str(work / "server.csv"), "--state",
                      str(work / f"whole-{r}"), *common])
        cli_build.append(t)
    results["cli_build_s"] = statistics.median(cli_build)
    import ray

    ray.init(include_dashboard=False, log_to_driver=False)
    for workers in map(int, a.workers.split(",")):
        stages: Dict[str, List[float]] = {}
        for r in range(a.runs):
            t = time.perf_counter()
            report = psikit.scale.build(str(work / "server.csv"), work / f"ray-{workers}-{r}",
                                        shards=a.build_shards, key="email", label="tier",
                                        workers=workers, client_items=a.client)
            stages.setdefault("total_s", []).append(time.perf_counter() - t)
            for k in ("scan_and_plan_s", "oprf_s", "shards_s"):
                stages.setdefault(k, []).append(report[k])
        results[f"ray_build_{workers}_workers"] = {k: statistics.median(v) for k, v in stages.items()}
    ray.shutdown()

    # Queries against 1, 2, 4, ... shards (plain processes).
    for shards in map(int, a.shards.split(",")):
        state = work / f"sharded-{shards}"
        subprocess.run([a.cli, "he", "db", "build", "--csv", str(work / "server.csv"), "--state", str(state),
                        "--shards", str(shards), *common], check=True, capture_output=True)
        procs = []
        try:
            addrs = []
            for i in range(shards):
                proc, addr = serve(a.cli, ["--he-state", str(state / f"shard-{i}")])
                procs.append(proc)
                addrs.append(addr)
            shard_args = [x for addr in addrs for x in ("--he-shard", addr)]
            proc, router = serve(a.cli, ["--he-router", str(state / "router"), *shard_args])
            procs.append(proc)
            runs = []
            for _ in range(a.runs):
                t, out = timed([a.cli, "he", "query", "--server", router, "--csv", str(work / "client.csv"),
                                "--key", "email", "--out", str(work / "matches.csv")])
                runs.append({"wall_s": t, **query_phases(out)})
            results[f"query_{shards}_shards"] = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        finally:
            for p in procs:
                p.kill()
                p.wait()
        print(json.dumps({f"query_{shards}_shards": results[f"query_{shards}_shards"]}), file=sys.stderr)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
