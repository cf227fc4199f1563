#!/usr/bin/env python3
"""Times OpenMined PSI (the `openmined-psi` wheel) on the workload of
`psikit bench filter`, for docs/benchmarks.md.

OpenMined PSI is DH-PSI on P-256 (SHA-256 hash to the curve, OpenSSL): the
server encrypts every item under its key and sends them in a setup message
(a Golomb-compressed set, GCS, or a Bloom filter); the client encrypts its
items, the server re-encrypts them, and the client removes its own key and
looks the results up in the setup message.

Same data as psikit: server items are "user{i}@example.com" for i in 0..n;
client item j is the server item scatter(j/2) when j is even and the fresh
item n + j when j is odd, so half the client set is in the intersection.
Every run checks the intersection against that truth.

False-positive rate: psikit targets 2^-30 per client item. OpenMined's `fpr`
argument is the probability that a query of `num_client_inputs` items has
any false positive; it divides it by `num_client_inputs` to get the rate per
item. We pass num_client_inputs = the largest client set measured and
fpr = num_client_inputs * 2^-30, i.e. 2^-30 per item (the same expected
number of false positives per query as psikit). The setup message depends
on num_client_inputs only through max(num_client_inputs, n), so one setup
per server size serves every client size here.

This is a comparison tool, not a psikit dependency:
    pip install openmined-psi
    python3 scripts/openmined_compare.py [--server-log2 16,20,22]
        [--client-sizes 1,1024,65536] [--repeats 3] [--json out.json]
"""

import argparse
import json
import os
import platform
import resource
import statistics
import sys
import time

try:
    import private_set_intersection.python as psi
except ImportError:  # pragma: no cover - depends on the environment
    sys.exit("openmined-psi is not installed: pip install openmined-psi")

PER_ITEM_FPR = 2.0**-30
SCATTER = 0x9E3779B97F4A7C15


def item(i):
    """The synthetic item with id i (same strings as psikit's benchmark)."""
    return f"user{i}@example.com"


def scatter(t, n):
    """psikit's permutation of 0..n (n a power of two)."""
    return (t * SCATTER) & (n - 1)


def client_set(n, size):
    """Client items and the indices that are in the server set."""
    items, members = [], []
    for j in range(size):
        if j % 2 == 0 and j // 2 < n:
            items.append(item(scatter(j // 2, n)))
            members.append(j)
        else:
            items.append(item(n + j))
    return items, members


def machine_busy_secs():
    """CPU seconds all processes of the machine have been busy (user, nice,
    system, irq, softirq; not idle, iowait or steal), or None."""
    try:
        with open("/proc/stat") as f:
            ticks = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    return sum(ticks[i] for i in (0, 1, 2, 5, 6)) / os.sysconf("SC_CLK_TCK")


class CpuWatch:
    """Own CPU time and the average cores other processes used meanwhile
    (the machine is shared; psikit's benchmark reports the same)."""

    def __init__(self):
        self.own, self.busy, self.wall = time.process_time(), machine_busy_secs(), time.perf_counter()

    def others(self):
        busy = machine_busy_secs()
        if busy is None or self.busy is None:
            return None
        own = time.process_time() - self.own
        wall = time.perf_counter() - self.wall
        if wall < 1.0:  # /proc/stat ticks are 10 ms: shorter windows are noise
            return None
        return max(0.0, (busy - self.busy - own) / wall)


QUIET_CORES = 0.25


def wait_for_quiet(max_secs):
    """Waits up to max_secs for a one-second window in which other processes
    use fewer than QUIET_CORES cores (like `psikit bench --quiet-wait-secs`).
    Returns the seconds waited."""
    start = time.perf_counter()
    while time.perf_counter() - start < max_secs:
        watch = CpuWatch()
        time.sleep(1.05)
        others = watch.others()
        if others is None or others < QUIET_CORES:
            break
    return time.perf_counter() - start


def repeat(fn, repeats, budget):
    """Runs fn() up to `repeats` times; after the first run, only while
    `repeats` runs as long as the first fit in `budget` seconds. fn returns
    (seconds, extra). Returns the list of (seconds, extra)."""
    runs = [fn()]
    while len(runs) < repeats and runs[0][0] * repeats <= budget:
        runs.append(fn())
    return runs


def median_run(runs):
    """The run with the median time (lower median for even counts)."""
    ordered = sorted(runs, key=lambda r: r[0])
    return ordered[(len(ordered) - 1) // 2]


def data_structure(name):
    """The DataStructure enum member for a command-line name."""
    return {"gcs": psi.DataStructure.GCS, "bloom": psi.DataStructure.BLOOM_FILTER}[name]


def time_setup(server, items, max_clients, ds):
    """One CreateSetupMessage: (wall seconds, (setup, cpu seconds))."""
    fpr = max_clients * PER_ITEM_FPR
    cpu0, t0 = time.process_time(), time.perf_counter()
    setup = server.CreateSetupMessage(fpr, max_clients, items, ds)
    wall = time.perf_counter() - t0
    return wall, (setup, time.process_time() - cpu0)


def time_query(server, setup, items, members):
    """One query: request, server response, client intersection, checked."""
    client = psi.client.CreateWithNewKey(True)
    t0 = time.perf_counter()
    request = client.CreateRequest(items)
    t1 = time.perf_counter()
    response = server.ProcessRequest(request)
    t2 = time.perf_counter()
    found = client.GetIntersection(setup, response)
    t3 = time.perf_counter()
    if sorted(found) != members:
        raise SystemExit(
            f"wrong intersection: {len(found)} found, {len(members)} expected"
        )
    phases = {
        "request_secs": t1 - t0,
        "process_secs": t2 - t1,
        "intersect_secs": t3 - t2,
        "request_bytes": request.ByteSize(),
        "response_bytes": response.ByteSize(),
    }
    return t3 - t0, phases


def bench_size(log2, clients, args):
    """All figures for one server size."""
    n = 1 << log2
    items = [item(i) for i in range(n)]
    server = psi.server.CreateWithNewKey(True)
    ds = data_structure(args.data_structure)
    max_clients = max(clients)
    print(f"2^{log2}: CreateSetupMessage over {n} items ...", file=sys.stderr)
    waited = wait_for_quiet(args.quiet_wait_secs)
    watch = CpuWatch()
    runs = repeat(
        lambda: time_setup(server, items, max_clients, ds), args.repeats, args.budget_secs
    )
    others = watch.others()
    wall, (setup, cpu) = median_run(runs)
    result = {
        "server_log2": log2,
        "data_structure": args.data_structure,
        "setup_secs": wall,
        "setup_cpu_secs": cpu,
        "setup_runs": len(runs),
        "setup_items_per_sec": n / wall,
        "setup_bytes": setup.ByteSize(),
        "setup_bits_per_item": 8 * setup.ByteSize() / n,
        "setup_other_cores": others,
        "queries": {},
    }
    del items
    for size in clients:
        print(f"2^{log2}: queries of {size} items ...", file=sys.stderr)
        citems, members = client_set(n, size)
        waited += wait_for_quiet(args.quiet_wait_secs)
        watch = CpuWatch()
        runs = repeat(
            lambda: time_query(server, setup, citems, members),
            args.repeats,
            args.budget_secs,
        )
        others = watch.others()
        total, phases = median_run(runs)
        result["queries"][size] = dict(
            phases, total_secs=total, runs=len(runs), other_cores=others
        )
    result["peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    result["quiet_wait_secs"] = waited
    return result


def fmt_time(s):
    """Seconds for humans."""
    if s < 1e-3:
        return f"{s * 1e6:.0f} µs"
    if s < 1:
        return f"{s * 1e3:.1f} ms"
    return f"{s:.2f} s"


def fmt_bytes(b):
    """Bytes for humans (binary units, like psikit)."""
    value, unit = float(b), "B"
    for next_unit in ["KiB", "MiB", "GiB"]:
        if value < 1024:
            break
        value, unit = value / 1024, next_unit
    return f"{b} B" if unit == "B" else f"{value:.2f} {unit}"


def table(head, rows):
    """An aligned Markdown table."""
    widths = [max(len(str(r[c])) for r in [head] + rows) for c in range(len(head))]
    line = lambda r: "| " + " | ".join(str(x).ljust(w) for x, w in zip(r, widths)) + " |"
    out = [line(head), line(["-" * w for w in widths])]
    return "\n".join(out + [line(r) for r in rows])


def fmt_cores(v):
    """Average cores of other processes, or '-'."""
    return "-" if v is None else f"{v:.2f}"


def print_tables(results):
    """The setup table and the query table."""
    rows = [
        [
            f"2^{r['server_log2']}",
            r["data_structure"],
            fmt_time(r["setup_secs"]),
            f"{r['setup_items_per_sec']:,.0f}",
            f"{r['setup_cpu_secs'] / r['setup_secs']:.2f}",
            fmt_bytes(r["setup_bytes"]),
            f"{r['setup_bits_per_item']:.2f}",
            r["setup_runs"],
            fmt_cores(r["setup_other_cores"]),
            fmt_bytes(r["peak_rss_bytes"]),
        ]
        for r in results
    ]
    head = ["server", "setup message", "CreateSetupMessage", "items/s", "cores used",
            "setup size", "bits/item", "runs", "others (cores)", "peak RSS"]
    print(table(head, rows))
    print()
    rows = []
    for r in results:
        for size, q in r["queries"].items():
            rows.append([
                f"2^{r['server_log2']}", size, fmt_time(q["request_secs"]),
                fmt_time(q["process_secs"]), fmt_time(q["intersect_secs"]),
                fmt_time(q["total_secs"]), fmt_bytes(q["request_bytes"]),
                fmt_bytes(q["response_bytes"]), q["runs"], fmt_cores(q["other_cores"]),
            ])
    head = ["server", "client items", "CreateRequest", "ProcessRequest",
            "GetIntersection", "total", "request", "response", "runs", "others (cores)"]
    print(table(head, rows))


def parse_args():
    """Command-line options."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ints = lambda s: [int(x) for x in s.split(",") if x]
    p.add_argument("--server-log2", type=ints, default=[16, 20, 22])
    p.add_argument("--client-sizes", type=ints, default=[1, 1024, 65536])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--budget-secs", type=float, default=40.0,
                   help="a measurement whose first run exceeds this / repeats runs once")
    p.add_argument("--max-setup-secs", type=float, default=300.0,
                   help="skip server sizes whose estimated setup exceeds this")
    p.add_argument("--data-structure", choices=["gcs", "bloom"], default="gcs")
    p.add_argument("--quiet-wait-secs", type=float, default=0.0,
                   help="before each measurement, wait up to this long for other "
                        "processes to use < 0.25 cores (shared machines)")
    p.add_argument("--json", help="also write the figures to this file")
    return p.parse_args()


def main():
    args = parse_args()
    print(f"openmined-psi {psi.__version__}, Python {platform.python_version()}; "
          f"per-item fpr 2^-30; median of up to {args.repeats} runs", file=sys.stderr)
    results, rate = [], None
    for log2 in sorted(set(args.server_log2)):
        n = 1 << log2
        if rate is not None and n / rate > args.max_setup_secs:
            print(f"2^{log2}: skipped, setup would take about {n / rate:.0f} s "
                  f"(> --max-setup-secs {args.max_setup_secs:.0f})", file=sys.stderr)
            continue
        clients = [c for c in args.client_sizes if c <= n]
        results.append(bench_size(log2, clients, args))
        rate = results[-1]["setup_items_per_sec"]
    print(f"openmined-psi {psi.__version__} ({args.data_structure}), per-item fpr 2^-30, "
          f"median of up to {args.repeats} runs\n")
    print_tables(results)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"openmined_psi": psi.__version__, "per_item_fpr_log2": -30,
                       "results": results}, f, indent=2)


if __name__ == "__main__":
    main()
