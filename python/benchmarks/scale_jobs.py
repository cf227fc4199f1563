"""Balanced jobs across two Ray clusters (issue 27): the throughput of a
VOLE-PSI job against the workers per party, against the one-machine
CLI job of the same sets, and a cost model for 10^9 x 10^9 rows.

* Two Ray heads on loopback addresses (127.0.0.2, 127.0.0.3: Ray turns
  127.0.0.1 into the interface's address), one per party, started before
  the clock.
* Each run alternates the CLI job (``psikit psi --job-dir``, both
  parties' processes) and ``python -m psikit.scale psi`` with each
  worker count of ``--workers`` (both parties' drivers), on the same
  ``2^--log2``-row sets (half of the receiver's rows shared); both
  parties start at once on a port chosen beforehand (two organisations
  start theirs independently; the connecting party dials until the
  listener is up), the wall time runs from there to both ending (the Ray
  drivers' start and connection to their clusters included), and each
  Ray job's stages come from its result. The machine's CPU seconds over
  each job tell extra work from waiting.
* The cost model takes the rates measured here (rows per second of each
  pass, core-seconds per bucket item, bytes per item) and predicts a
  10^9 x 10^9 job on 2 x 32 cores and on 2 x 8 nodes of 16 cores, at 10
  and 1 Gbit/s between the parties.

    python python/benchmarks/scale_jobs.py --cli target/release/psikit --log2 20 --runs 3 --workers 1,2

Needs the release CLI and psikit installed with its ``ray`` extra. Bigger
sets: ``--log2 24`` (about 2 GB of job directories per party).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Tuple

RAY = str(Path(sys.executable).with_name("ray"))
# Ray's token authentication off for these loopback clusters (as in
# python/tests/test_scale_jobs.py).
ENV = {**os.environ, "RAY_AUTH_MODE": "disabled"}


def pinned(args: List[str], core: "int | None") -> List[str]:
    """``args`` run on CPU ``core`` alone (``taskset``), or as they are."""
    return args if core is None else ["taskset", "-c", str(core), *args]


def head(ip: str, base: int, tmp: str, cpus: int, core: "int | None" = None) -> str:
    """A Ray head on the loopback address ``ip``, ports from ``base`` (its
    processes and workers on CPU ``core`` alone, if given)."""
    ports = {
        "port": base, "dashboard-agent-listen-port": base + 2, "dashboard-agent-grpc-port": base + 3,
        "metrics-export-port": base + 4, "runtime-env-agent-port": base + 5, "node-manager-port": base + 6,
        "object-manager-port": base + 7, "min-worker-port": base + 100, "max-worker-port": base + 199,
    }
    args = [RAY, "start", "--head", f"--node-ip-address={ip}", f"--temp-dir={tmp}", f"--num-cpus={cpus}",
            "--include-dashboard=false", "--disable-usage-stats", "--object-store-memory=500000000"]
    subprocess.run(pinned(args + [f"--{k}={v}" for k, v in ports.items()], core), check=True, capture_output=True,
                   env=ENV)
    return f"{ip}:{base}"


def inputs(work: Path, log2: int) -> Tuple[Path, Path]:
    """The two parties' CSVs (written once per size): ``2^log2`` rows each,
    half of the receiver's ids in the sender's set."""
    n = 1 << log2
    s, r = work / f"s-{log2}.csv", work / f"r-{log2}.csv"
    if not r.exists():
        with open(s, "w") as f:
            f.write("id,row\n")
            f.writelines(f"user{i}@example.org,{i}\n" for i in range(n))
        with open(r, "w") as f:
            f.write("id,row\n")
            f.writelines(f"user{i + n // 2}@example.org,{i}\n" for i in range(n))
    return s, r


def free_port() -> int:
    """A loopback port nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def both(listening: List[str], connecting: List[str], env: Tuple[Dict, Dict]) -> subprocess.CompletedProcess:
    """Starts both parties at once, as two organisations start theirs (the
    connecting party dials until the listener is up); returns the
    connecting party's run once both ended, failing if either did."""
    sender = subprocess.Popen(listening, env=env[0], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    got = subprocess.run(connecting, env=env[1], capture_output=True, text=True)
    _, err = sender.communicate()
    if sender.returncode or got.returncode:
        raise RuntimeError(f"a party failed:\n{err[-2000:]}\n{got.stderr[-2000:]}")
    return got


def cli_stages(text: str) -> Dict[str, float]:
    """The receiver's stage times from the CLI job's summary line
    ("receiver: read 5.41 s, split 2.40 s, buckets ..., output ...")."""
    found = {}
    for stage, value, unit in re.findall(r"\b(read|split|buckets|output) ([0-9.]+) (ms|s)\b", text):
        found[f"{stage}_s"] = float(value) / (1e3 if unit == "ms" else 1.0)
    return found


def last_json(text: str) -> Dict:
    return json.loads(next(line for line in reversed(text.splitlines()) if line.startswith("{")))


def machine_cpu_s() -> float:
    """CPU seconds every process on this machine has used (``/proc/stat``):
    a job's difference, against its wall time, tells work (the relay's
    copies, Ray's own processes) from waiting."""
    with open("/proc/stat") as f:
        fields = f.readline().split()[1:]
    user, nice, system = (int(x) for x in fields[:3])
    return (user + nice + system) / os.sysconf("SC_CLK_TCK")


#: The CPU of each party (sender, receiver) with ``--pin``, else None:
#: two organisations run on machines of their own.
CORES: List["int | None"] = [None, None]


def cli_job(cli: str, work: Path, s: Path, r: Path, bucket_items: int) -> Dict:
    for d in ("cli-s", "cli-r", "cli.csv"):
        shutil.rmtree(work / d, ignore_errors=True)
    common = ["--key", "id", "--bucket-items", str(bucket_items)]
    addr = f"127.0.0.1:{free_port()}"
    t, cpu = time.perf_counter(), machine_cpu_s()
    got = both(pinned([cli, "psi", "send", "--input", str(s), "--listen", addr, "--job-dir", str(work / "cli-s"),
                       *common], CORES[0]),
               pinned([cli, "psi", "receive", "--input", str(r), "--connect", addr, "--job-dir", str(work / "cli-r"),
                       "--output", str(work / "cli.csv"), *common], CORES[1]), (ENV, ENV))
    return {"total_s": time.perf_counter() - t, "cpu_s": machine_cpu_s() - cpu, **cli_stages(got.stdout + got.stderr)}


def ray_job(clusters: Tuple[str, str], work: Path, s: Path, r: Path, workers: int, bucket_items: int) -> Dict:
    for d in ("ray-s", "ray-r", "ray.csv"):
        shutil.rmtree(work / d, ignore_errors=True)
    common = ["--key", "id", "--bucket-items", str(bucket_items), "--workers", str(workers)]
    scale = [sys.executable, "-m", "psikit.scale", "psi"]
    addr = f"127.0.0.1:{free_port()}"
    t, cpu = time.perf_counter(), machine_cpu_s()
    out = both(pinned([*scale, "send", str(s), "--job-dir", str(work / "ray-s"), "--listen", addr, *common],
                      CORES[0]),
               pinned([*scale, "receive", str(r), "--job-dir", str(work / "ray-r"), "--connect", addr,
                       "--output", str(work / "ray.csv"), *common], CORES[1]),
               ({**ENV, "RAY_ADDRESS": clusters[0]}, {**ENV, "RAY_ADDRESS": clusters[1]}))
    total, cpu = time.perf_counter() - t, machine_cpu_s() - cpu
    result = last_json(out.stdout)
    c = result["cluster"]
    return {"total_s": total, "cpu_s": cpu, "parts_s": c["parts_s"], "control_s": c["control_s"], "split_s": result["split_s"],
            "output_s": result["output_s"], "buckets_s": c.get("buckets_s", 0.0), "buckets": result["buckets"],
            "bytes": c["bucket_bytes_sent"] + c["bucket_bytes_received"] + result["bytes_sent"]
            + result["bytes_received"], "matched": result["matched_rows"]}


def model(rows: int, m: Dict[str, float], cores: int, nodes: int, gbit: float) -> Dict[str, float]:
    """Predicted stage times (seconds) of a job of ``rows`` x ``rows`` on
    ``nodes`` nodes of ``cores`` cores per party, from the rates ``m``."""
    parts = rows / (m["parts_rows_per_s_per_core"] * cores * nodes)
    split = rows / m["split_rows_per_s"]
    output = rows / m["output_rows_per_s"]
    compute = rows * m["bucket_core_s_per_item"] / (cores * nodes)
    network = rows * m["bytes_per_item"] * 8 / (gbit * 1e9)
    buckets = max(compute, network)
    return {"parts": parts, "split": split, "buckets": buckets, "compute": compute, "network": network,
            "output": output, "total": parts + split + buckets + output}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cli", required=True)
    ap.add_argument("--log2", type=int, default=20)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--bucket-items", type=int, default=1 << 18)
    ap.add_argument("--work", default=None)
    ap.add_argument("--pin", action="store_true",
                    help="each party on a CPU of its own (taskset): sender and its cluster on CPU 0, receiver on 1")
    a = ap.parse_args()
    if a.pin:
        CORES[:] = [0, 1]
    work = Path(a.work or tempfile.mkdtemp(prefix="psikit-scale-jobs-"))
    work.mkdir(parents=True, exist_ok=True)
    s, r = inputs(work, a.log2)
    workers = [int(w) for w in a.workers.split(",")]
    tmp = [tempfile.mkdtemp(prefix="bs", dir="/tmp"), tempfile.mkdtemp(prefix="br", dir="/tmp")]
    cpus = 1 if a.pin else os.cpu_count() or 2
    # Ports below Linux's ephemeral range (as in the tests).
    clusters = (head("127.0.0.2", 24700, tmp[0], cpus, CORES[0]), head("127.0.0.3", 25000, tmp[1], cpus, CORES[1]))
    runs: Dict[str, List[Dict]] = {}
    try:
        for i in range(a.runs):
            order = ["cli"] + [f"ray-{w}" for w in workers]
            for name in order if i % 2 == 0 else reversed(order):
                if name == "cli":
                    got = cli_job(a.cli, work, s, r, a.bucket_items)
                else:
                    got = ray_job(clusters, work, s, r, int(name[4:]), a.bucket_items)
                runs.setdefault(name, []).append(got)
                print(name, json.dumps(got), flush=True)
    finally:
        subprocess.run([RAY, "stop", "--force"], capture_output=True, env=ENV)
        for d in tmp:
            shutil.rmtree(d, ignore_errors=True)
    med = {name: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for name, rs in runs.items()}
    n = 1 << a.log2
    print(f"\n2^{a.log2} x 2^{a.log2} rows, VOLE-PSI semi-honest, bucket items {a.bucket_items}, medians of {a.runs}")
    print("| run | total | CPU (machine) | parts | split | buckets | output | bytes/item | against the CLI |")
    print("|---|---|---|---|---|---|---|---|---|")
    cli_total = med["cli"]["total_s"]
    c = med["cli"]
    print(f"| CLI job (one machine) | {cli_total:.2f} s | {c['cpu_s']:.1f} s | read {c.get('read_s', 0):.2f} s"
          f" | {c.get('split_s', 0):.2f} s | {c.get('buckets_s', 0):.2f} s | {c.get('output_s', 0):.2f} s | | |")
    for w in workers:
        m = med[f"ray-{w}"]
        print(f"| Ray, {w} worker(s) per party | {m['total_s']:.2f} s | {m['cpu_s']:.1f} s | {m['parts_s']:.2f} s"
              f" | {m['split_s']:.2f} s"
              f" | {m['buckets_s']:.2f} s | {m['output_s']:.2f} s | {m['bytes'] / n:.1f} |"
              f" {100 * (m['total_s'] / cli_total - 1):+.1f}% |")
    one = med[f"ray-{workers[0]}"]
    # Rates from the one-worker run: every stage on this machine's cores,
    # which both parties share (each party counts as half of them), or
    # on its own core with --pin.
    party_cores = 1 if a.pin else cpus / 2
    rates = {
        "parts_rows_per_s_per_core": n / one["parts_s"] / party_cores,
        "split_rows_per_s": n / max(one["split_s"], 1e-9),
        "output_rows_per_s": n / max(one["output_s"], 1e-9),
        "bucket_core_s_per_item": one["buckets_s"] * party_cores / n,
        "bytes_per_item": one["bytes"] / n,
    }
    print("\nrates measured:", json.dumps({k: round(v, 9) for k, v in rates.items()}))
    print("\n10^9 x 10^9 rows, predicted (seconds):")
    print("| cluster per party | link | parts | split | buckets (compute / network) | output | total |")
    print("|---|---|---|---|---|---|---|")
    for cores, nodes, label in ((32, 1, "1 x 32 cores"), (16, 8, "8 nodes x 16 cores")):
        for gbit in (10, 1):
            p = model(10**9, rates, cores, nodes, gbit)
            print(f"| {label} | {gbit} Gbit/s | {p['parts']:.0f} | {p['split']:.0f} | {p['buckets']:.0f} "
                  f"({p['compute']:.0f} / {p['network']:.0f}) | {p['output']:.0f} | {p['total']:.0f} "
                  f"({p['total'] / 60:.1f} min) |")


if __name__ == "__main__":
    main()
