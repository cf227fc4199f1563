"""Jobs across two Ray clusters on this machine, one per party (two
``ray start --head`` with their own ports and temp dirs, every address on
loopback), each party's driver in a process of its own
(``python -m psikit.scale psi|cpsi ...``): the bucketed results equal the
one-machine job's and the plaintext truth, for VOLE-PSI in both modes and
a circuit-PSI sum; a worker killed mid-job and a driver killed and
restarted with ``--resume`` give the same output. Skipped without Ray."""

from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pytest

import psikit

pytest.importorskip("ray")

RAY = str(Path(sys.executable).with_name("ray"))
# Ray's token authentication, off for these loopback clusters: `ray start`
# turns it on by itself when ~/.ray/auth_token exists (a local `ray.init()`
# writes one), and drivers then need the mode set too.
ENV = {**os.environ, "RAY_AUTH_MODE": "disabled"}


def _head(ip: str, base: int, tmp: str) -> str:
    """Starts a Ray head on the loopback address ``ip`` (not 127.0.0.1,
    which Ray would replace by the machine's interface address when a
    driver connects) with ports from ``base``."""
    ports = {
        "port": base, "dashboard-agent-listen-port": base + 2,
        "dashboard-agent-grpc-port": base + 3, "metrics-export-port": base + 4,
        "runtime-env-agent-port": base + 5, "node-manager-port": base + 6, "object-manager-port": base + 7,
        "min-worker-port": base + 100, "max-worker-port": base + 199,
    }
    args = [RAY, "start", "--head", f"--node-ip-address={ip}", f"--temp-dir={tmp}", "--num-cpus=2",
            "--include-dashboard=false", "--disable-usage-stats", "--object-store-memory=200000000"]
    args += [f"--{k}={v}" for k, v in ports.items()]
    subprocess.run(args, check=True, capture_output=True, timeout=120, env=ENV)
    return f"{ip}:{base}"


@pytest.fixture(scope="module")
def clusters():
    """Two Ray clusters: the sender's and the receiver's."""
    # Unix socket paths must stay short: Ray's temp dirs under /tmp.
    dirs = [tempfile.mkdtemp(prefix="rs", dir="/tmp"), tempfile.mkdtemp(prefix="rr", dir="/tmp")]
    try:
        # Ports below Linux's ephemeral range (32768-60999), which an
        # outgoing connection could hold when a head starts.
        yield _head("127.0.0.2", 24100, dirs[0]), _head("127.0.0.3", 24400, dirs[1])
    finally:
        subprocess.run([RAY, "stop", "--force"], capture_output=True, timeout=120, env=ENV)
        for d in dirs:
            shutil.rmtree(d, ignore_errors=True)


def _write(path: Path, ids: List[int], values: bool = False, first: int = 0) -> Path:
    """``ids`` as a CSV file, rows numbered from ``first``."""
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["id", "row", "amount"] if values else ["id", "row"])
        for i, x in enumerate(ids, start=first):
            w.writerow([f"User{x}", i, x % 1000] if values else [f"User{x}", i])
    return path


def _sets() -> Tuple[List[int], List[int]]:
    import random

    rng = random.Random(27)
    return [rng.randrange(3000) for _ in range(1500)], [rng.randrange(3000) for _ in range(700)]


class Party:
    """One party's driver on its cluster: ``python -m psikit.scale ...``,
    or a ``script`` of its own."""

    def __init__(self, ray_address: str, args: List[str], script: Optional[str] = None) -> None:
        env = {**ENV, "RAY_ADDRESS": ray_address}
        command = ["-m", "psikit.scale"] if script is None else ["-c", script]
        self.proc = subprocess.Popen([sys.executable, *command, *args], env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines: List[str] = []
        self.listening: Optional[str] = None
        self._ready = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)
            if line.startswith("psikit: listening on "):
                self.listening = line.split()[-1]
                self._ready.set()
        self._ready.set()

    def addr(self) -> str:
        assert self._ready.wait(180), "the listening party never listened"
        assert self.listening, self.failure()
        return self.listening

    def result(self, timeout: float = 600) -> Dict:
        self.proc.wait(timeout=timeout)
        time.sleep(0.2)  # the reader thread's last lines
        assert self.proc.returncode == 0, self.failure()
        # The result is the last JSON line (Ray prints its own lines too).
        return json.loads(next(line for line in reversed(self.lines) if line.startswith("{")))

    def failure(self) -> str:
        err = self.proc.stderr.read() if self.proc.stderr and self.proc.poll() is not None else ""
        return f"exit {self.proc.poll()}: {''.join(self.lines)[-2000:]} {err[-4000:]}"


def _pair(clusters, tmp: Path, family: List[str], send: List[str], receive: List[str],
          common: List[str]) -> Tuple[Dict, Dict]:
    s = Party(clusters[0], [*family[:1], "send", *family[1:], *send, "--job-dir", str(tmp / "s.job"),
                            "--listen", "127.0.0.1:0", "--workers", "2", *common])
    r = Party(clusters[1], [*family[:1], "receive", *family[1:], *receive, "--job-dir", str(tmp / "r.job"),
                            "--connect", s.addr(), "--workers", "1", *common])
    return s.result(), r.result()


def _rows(path: Path) -> List[Tuple[str, ...]]:
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["id", "row"]
    return sorted(tuple(r) for r in rows[1:])


def _truth(mine: List[int], theirs: List[int]) -> List[Tuple[str, ...]]:
    held = set(theirs)
    return sorted((f"User{x}", str(i)) for i, x in enumerate(mine) if x in held)


def _one_machine(tmp: Path, s_csv: Path, r_csv: Path, **options) -> Path:
    """The same job on one machine (``psikit.psi`` with ``job_dir=``)."""
    out = tmp / "one.csv"
    errors: List[BaseException] = []
    addr: List[str] = []
    ready = threading.Event()

    def sender() -> None:
        try:
            psikit.psi.send(str(s_csv), key="id", normalize=("trim", "lower"), listen="127.0.0.1:0",
                            job_dir=str(tmp / "one-s"), on_listening=lambda a: (addr.append(a), ready.set()),
                            **options)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)
            ready.set()

    t = threading.Thread(target=sender)
    t.start()
    assert ready.wait(60)
    psikit.psi.receive(str(r_csv), key="id", normalize=("trim", "lower"), connect=addr[0],
                       job_dir=str(tmp / "one-r"), output=str(out), **options)
    t.join()
    assert not errors, errors
    return out


@pytest.mark.parametrize("malicious", [False, True])
def test_vole_psi_across_two_clusters_equals_one_machine(clusters, tmp_path, malicious):
    s_ids, r_ids = _sets()
    s_csv, r_csv = _write(tmp_path / "s.csv", s_ids), _write(tmp_path / "r.csv", r_ids)
    # The sender's input in two files (two parts), read by its two workers.
    half = len(s_ids) // 2
    s_files = [_write(tmp_path / "s0.csv", s_ids[:half]), _write(tmp_path / "s1.csv", s_ids[half:], first=half)]
    mode = ["--malicious"] if malicious else []
    common = ["--key", "id", "--normalize", "trim,lower", "--bucket-items", "256", *mode]
    s, r = _pair(clusters, tmp_path, ["psi"], [str(f) for f in s_files],
                 [str(r_csv), "--output", str(tmp_path / "out.csv")], common)
    assert s["job_id"] == r["job_id"] and r["buckets"] > 2
    assert r["cluster"]["buckets_run"] == r["buckets"]
    assert s["matched_rows"] is None
    one = _one_machine(tmp_path, s_csv, r_csv, malicious=malicious, bucket_items=256)
    assert _rows(tmp_path / "out.csv") == _rows(one) == _truth(r_ids, s_ids)
    assert r["matched_rows"] == len(_truth(r_ids, s_ids))


#: A receiver whose input is a Ray Dataset, run in a process of its own
#: (Ray Data keeps state per process, tied to the cluster it first ran on).
DATASET_RECEIVER = """
import json, sys
import pyarrow as pa, pyarrow.csv as pacsv, ray
import psikit.scale
csv_path, job_dir, addr, out = sys.argv[1:]
ray.init(log_to_driver=False, **psikit.scale._loopback_node())
strings = pacsv.ConvertOptions(column_types={"id": pa.string(), "row": pa.string()})
ds = ray.data.read_csv(csv_path, convert_options=strings)
r = psikit.scale.psi.receive(ds, key="id", normalize=("trim", "lower"), job_dir=job_dir, connect=addr,
                             workers=2, bucket_items=256, output=out, batch_rows=300)
print(json.dumps(r))
"""


def test_a_ray_dataset_goes_through_ray_data_into_parts(clusters, tmp_path):
    """A party whose input is a Ray Dataset: Ray Data streams it to the
    workers, which copy it into parts; the output is the same."""
    s_ids, r_ids = _sets()
    s_csv, r_csv = _write(tmp_path / "s.csv", s_ids), _write(tmp_path / "r.csv", r_ids)
    common = ["--key", "id", "--normalize", "trim,lower", "--bucket-items", "256"]
    s = Party(clusters[0], ["psi", "send", str(s_csv), "--job-dir", str(tmp_path / "s.job"), "--listen",
                            "127.0.0.1:0", "--workers", "2", *common])
    out = tmp_path / "out.csv"
    r = Party(clusters[1], [str(r_csv), str(tmp_path / "r.job"), s.addr(), str(out)], script=DATASET_RECEIVER)
    assert s.result()["job_id"] == r.result()["job_id"]
    assert _rows(out) == _truth(r_ids, s_ids)
    assert not (tmp_path / "r.job" / "rows").exists(), "the workers' copies go once the output is written"


def test_a_circuit_psi_sum_across_two_clusters(clusters, tmp_path):
    s_ids, r_ids = _sets()
    s_csv, r_csv = _write(tmp_path / "s.csv", s_ids, True), _write(tmp_path / "r.csv", r_ids, True)
    common = ["--key", "id", "--normalize", "trim,lower", "--bucket-items", "512", "--value-columns", "amount"]
    s, r = _pair(clusters, tmp_path, ["cpsi", "sum"], [str(s_csv)], [str(r_csv)], common)
    shared = set(s_ids) & set(r_ids)
    # Each party's sum adds every row of a shared key (duplicates add up).
    want_s = sum(x % 1000 for x in s_ids if x in shared)
    want_r = sum(x % 1000 for x in r_ids if x in shared)
    assert r["intersection_size"] == len(shared)
    assert r["sender_sums"] == [want_s] and r["receiver_sums"] == [want_r]
    assert r["job"]["buckets"] > 1


def _kill(pattern: str) -> int:
    """SIGKILLs the processes whose command line holds ``pattern``."""
    found = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True).stdout.split()
    for pid in found:
        try:
            os.kill(int(pid), signal.SIGKILL)
        except ProcessLookupError:
            pass
    return len(found)


def _wait_for_results(job: Path, n: int, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        results = job / "results"
        if results.exists() and len([p for p in results.iterdir() if p.name.isdigit()]) >= n:
            return
        time.sleep(0.05)
    raise AssertionError(f"{job}: fewer than {n} buckets committed")


def test_a_killed_worker_and_a_restarted_driver_give_the_same_output(clusters, tmp_path):
    s_ids, r_ids = _sets()
    s_csv, r_csv = _write(tmp_path / "s.csv", s_ids), _write(tmp_path / "r.csv", r_ids)
    common = ["--key", "id", "--normalize", "trim,lower", "--bucket-items", "128"]
    out = tmp_path / "out.csv"
    s = Party(clusters[0], ["psi", "send", str(s_csv), "--job-dir", str(tmp_path / "s.job"), "--listen",
                            "127.0.0.1:0", "--workers", "2", *common])
    receive = ["psi", "receive", str(r_csv), "--job-dir", str(tmp_path / "r.job"), "--connect", s.addr(),
               "--workers", "1", "--output", str(out), *common]
    r = Party(clusters[1], receive)
    # A worker of the listening party dies mid-job: Ray reruns it, and the
    # peer's bucket retries its dropped link.
    _wait_for_results(tmp_path / "r.job", 2)
    assert _kill("ray::_serve") >= 1
    # The receiver's driver dies too, then comes back with --resume.
    _wait_for_results(tmp_path / "r.job", 4)
    r.proc.kill()
    r.proc.wait()
    assert not out.exists()
    r = Party(clusters[1], [*receive, "--resume"])
    got, sent = r.result(), s.result()
    assert got["job_id"] == sent["job_id"]
    assert got["cluster"]["buckets_run"] < got["buckets"], "the resumed driver ran only what was left"
    assert _rows(out) == _truth(r_ids, s_ids)


def test_one_task_at_a_time_runs_its_buckets_in_one_run():
    """Runs of buckets: one run for a single task (nothing to even out,
    and each run costs a task start and a first load), about four per
    task otherwise; every bucket once, in order."""
    from psikit.scale._cluster import RUNS_PER_WORKER, runs_of

    todo = list(range(5, 45))
    assert runs_of(todo, 1) == [todo]
    runs = runs_of(todo, 2)
    assert len(runs) == 2 * RUNS_PER_WORKER
    assert [b for run in runs for b in run] == todo
    assert runs_of([], 3) == []
