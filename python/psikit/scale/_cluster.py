"""The driver of a two-party job whose buckets run on each party's own Ray
cluster (:mod:`psikit.scale.psi`, :mod:`psikit.scale.cpsi`).

Each party runs one driver on its own cluster. The job directory must be
on storage every node of the party's cluster reads and writes (the
driver's node alone for a one-node cluster). The driver:

1. unless the job resumes with its parts recorded, has its input keyed
   into parts: each file of the input is a part, whose keys a Ray task
   spools (the CLI's reader and key encoder, in Rust: no copy of the
   rows); a Ray Dataset is read as a stream through Ray Data, ``workers``
   actors each writing its share as a part (``rows/NNNNNN.csv``) first;
2. steps the job over its control connection (``_native.ClusterJob``):
   the hello, both journals and the split into buckets;
3. runs the buckets both sides still need: the connecting party as Ray
   tasks, each a run of a few buckets over one connection (as many at
   once as both parties have workers), dialling the peer's one address;
   the listening party as ``workers`` serving tasks, which its driver's
   relay hands the peer's connections;
4. steps again until the job is done; the matched rows are then written
   from the parts to ``output``, one CSV file.

Every bucket runs through the Rust bucket runner the CLI's jobs use; the
protocol has no Python implementation. A killed worker's bucket runs
again on another (Ray retries the task; the peer's side retries its
dropped link); a killed driver resumes the job with ``resume=True``.

Why files skip Ray Data: measured here, iterating a 2^22-row CSV through
Ray Data took 1.9-4.8 s (by batch size) where pyarrow reads it in 0.5 s
and psikit's own keyed pass in about 0.6 s, and copying the rows into
parts doubles the disk a job needs; a file is already a part.
"""

from __future__ import annotations

import os
import time
import uuid
from typing import Any, Dict, List, Optional, Tuple

from .. import _native
from .._native import InputError
from . import _paths

#: A part's summary from ``_native.cluster_spool_part``: its digest, rows
#: read, rows with a key and longest key.
Summary = Tuple[bytes, int, int, int]

#: How many times Ray reruns a bucket task whose worker died.
TASK_RETRIES = 5

#: How psikit's tasks run: one CPU each, retried on another worker if
#: theirs dies, in Ray's already started worker processes (a worker of
#: their own would cost a process start per job, about a second here).
#: While a task runs, its native call keeps the memory it frees for its
#: next allocations, as the CLI's job does (docs/benchmarks.md, issue 27).
_TASK: Dict[str, Any] = {"num_cpus": 1, "max_retries": TASK_RETRIES}



def plan(family: str, plan_args: Dict[str, Any]) -> Any:
    """The native plan of a job: built in every process from picklable
    arguments, with the same checks."""
    build = _native.psi_plan if family == "psi" else _native.cpsi_plan
    return build(**plan_args)


class _PartWriter:
    """A Ray actor writing one part of the input: its share of the
    dataset's batches as a CSV file with a header, then the part's keys."""

    def __init__(self, family: str, plan_args: Dict[str, Any], job_dir: str, part: int) -> None:
        self.family, self.plan_args, self.job_dir, self.part = family, plan_args, job_dir, part

    def run(self, split: Any, columns: List[str], batch_rows: int) -> Tuple[str, Summary]:
        import pyarrow as pa
        import pyarrow.csv as pacsv

        path = os.fspath(_native.cluster_part_path(self.job_dir, self.part))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{uuid.uuid4().hex[:8]}.tmp"
        writer = None
        try:
            for batch in split.iter_batches(batch_size=batch_rows, batch_format="pyarrow"):
                if writer is None:
                    writer = pacsv.CSVWriter(tmp, batch.schema)
                writer.write_table(batch)
            if writer is None:
                # No rows came this way: the header alone.
                empty = pa.table({c: pa.array([], pa.string()) for c in columns})
                pacsv.write_csv(empty, tmp)
            else:
                writer.close()
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        return path, _native.cluster_spool_part(plan(self.family, self.plan_args), self.job_dir, self.part, path)


def write_parts(ray: Any, ds: Any, columns: List[str], family: str, plan_args: Dict[str, Any], job_dir: str,
                workers: int, batch_rows: int) -> List[Tuple[str, Summary]]:
    """Step 1 for a Dataset: ``workers`` actors, each writing a part from
    its share of ``ds`` (whose columns are ``columns``); returns the parts
    and their summaries in part order."""
    # As the HE build's OPRF actors (see `psikit.scale._oprf_stage`): no
    # CPU slot of their own, spread over the nodes.
    actor = ray.remote(num_cpus=0, scheduling_strategy="SPREAD")(_PartWriter)
    actors = [actor.remote(family, plan_args, job_dir, i) for i in range(workers)]
    splits = ds.streaming_split(workers, equal=False)
    try:
        return ray.get([a.run.remote(s, columns, batch_rows) for a, s in zip(actors, splits)])
    finally:
        for a in actors:
            ray.kill(a)


def _spool_file(family: str, plan_args: Dict[str, Any], job_dir: str, part: int, path: str) -> Tuple[str, Summary]:
    """A file of the input keyed as part ``part``, as a Ray task."""
    return path, _native.cluster_spool_part(plan(family, plan_args), job_dir, part, path)


def spool_files(ray: Any, family: str, plan_args: Dict[str, Any], job_dir: str, files: List[str],
                workers: int) -> List[Tuple[str, Summary]]:
    """Step 1 for files: each file a part, ``workers`` Ray tasks at a time;
    returns the parts and their summaries in part order."""
    task = ray.remote(**_TASK)(_spool_file)
    return _in_turn(ray, [lambda i=i, f=f: task.remote(family, plan_args, job_dir, i, f)
                          for i, f in enumerate(files)], workers)


def _in_turn(ray: Any, calls: List[Any], at_once: int) -> List[Any]:
    """Runs the task submissions ``calls``, ``at_once`` at a time; returns
    their results in order."""
    refs: List[Any] = [None] * len(calls)
    running: List[Any] = []
    for i, call in enumerate(calls):
        if len(running) >= at_once:
            _, running = ray.wait(running, num_returns=1)
        refs[i] = call()
        running.append(refs[i])
    return ray.get(refs)


def _run_buckets_task(family: str, plan_args: Dict[str, Any], job_dir: str, buckets: List[int], connect: str,
                     token: bytes, tls: Optional[Dict[str, Any]], retry: float, timeout: float) -> Dict[str, Any]:
    """A connecting party's run of buckets over one connection, as a Ray task."""
    return _native.cluster_run_buckets(plan(family, plan_args), job_dir, buckets, connect, token, tls=tls,
                                       retry=retry, idle_timeout=timeout)


def _serve(family: str, plan_args: Dict[str, Any], job_dir: str, relay: str, ticket: bytes,
           timeout: float) -> int:
    """A listening party's worker, as a Ray task."""
    return _native.cluster_serve(plan(family, plan_args), job_dir, relay, ticket, idle_timeout=timeout)


def run(ray: Any, family: str, plan_args: Dict[str, Any], job_dir: str, *, listen: Optional[str],
        connect: Optional[str], tls: Optional[Dict[str, Any]], relay_listen: str, workers: int, resume: bool,
        memory: int, bucket_items: Optional[int], max_peer_rows: int, retry: float, timeout: float,
        output: Optional[str], on_listening: Any, data: Any, delimiter: str,
        batch_rows: int) -> Dict[str, Any]:
    """One party's job on ``data`` (read unless the job resumes with its
    parts recorded); returns the native result with the
    buckets this side's tasks ran and the time of each stage."""
    if workers < 1:
        raise InputError(f"workers must be at least 1, got {workers}")
    # Absolute paths: the workers run elsewhere (on other nodes, in
    # other directories).
    job_dir = os.path.abspath(job_dir)
    files = None if hasattr(data, "map_batches") else [os.path.abspath(p) for p in _paths(data)]
    # The workers' copies are CSV with a comma; files are read as given.
    plan_args = {**plan_args, "delimiter": delimiter if files else ","}
    job = _native.ClusterJob(
        plan(family, plan_args), job_dir, listen=listen, connect=connect, tls=tls, relay_listen=relay_listen,
        workers=workers, resume=resume, memory=memory, bucket_items=bucket_items, max_peer_rows=max_peer_rows,
        retry=retry, idle_timeout=timeout, output=output,
        on_listening=on_listening,
    )
    times: Dict[str, float] = {}
    t = time.perf_counter()
    if job.has_input():
        job.check_parts()
    elif files:
        job.set_parts(spool_files(ray, family, plan_args, job_dir, files, workers))
    else:
        job.set_parts(write_parts(ray, data, list(data.schema().names), family, plan_args, job_dir, workers,
                                  batch_rows))
    times["parts_s"] = time.perf_counter() - t
    serving: List[Any] = []
    costs: List[Dict[str, Any]] = []
    relay = job.relay()
    try:
        while True:
            t = time.perf_counter()
            state, value = job.step()
            times["control_s"] = times.get("control_s", 0.0) + time.perf_counter() - t
            if state == "done":
                break
            t = time.perf_counter()
            if relay is not None:
                if not serving:
                    task = ray.remote(**_TASK)(_serve)
                    serving = [task.remote(family, plan_args, job_dir, relay[0], relay[1], timeout)
                               for _ in range(workers)]
            else:
                token, peer_workers = job.bucket_token()
                costs += _run_buckets(ray, family, plan_args, job_dir, value, connect, token, tls, retry, timeout,
                                      min(workers, peer_workers))
            times["buckets_s"] = times.get("buckets_s", 0.0) + time.perf_counter() - t
        if serving:
            # The relay told each worker the job is done.
            ray.get(serving, timeout=60)
            serving = []
    finally:
        for s in serving:
            ray.cancel(s, force=True)
    result = dict(value)
    result["cluster"] = {
        "workers": workers,
        "bucket_tasks": len(costs),
        "buckets_run": sum(len(c["buckets"]) for c in costs),
        "bucket_retries": sum(c["retries"] for c in costs),
        "bucket_bytes_sent": sum(c["bytes_sent"] for c in costs),
        "bucket_bytes_received": sum(c["bytes_received"] for c in costs),
        **times,
    }
    return result


#: Runs of buckets per worker and step when several tasks run at once:
#: enough that a slow or restarted worker's share is taken up by the
#: others, few enough that each run overlaps its loads with its buckets
#: over several buckets. Each run costs a task's start, a connection, the
#: first bucket loaded before it runs and the worker's memory faulted in
#: again (about 0.2 s per run with 2^20-item buckets here,
#: docs/benchmarks.md), so one task at a time gets one run: there is no
#: other worker to take up its share, and a rerun task skips what it
#: committed.
RUNS_PER_WORKER = 4


def runs_of(todo: List[int], at_once: int) -> List[List[int]]:
    """The buckets ``todo`` cut into the runs of ``at_once`` tasks."""
    runs = 1 if at_once == 1 else at_once * RUNS_PER_WORKER
    per_run = max(1, -(-len(todo) // runs))
    return [todo[i:i + per_run] for i in range(0, len(todo), per_run)]


def _run_buckets(ray: Any, family: str, plan_args: Dict[str, Any], job_dir: str, todo: List[int], connect: Optional[str],
                 token: bytes, tls: Optional[Dict[str, Any]], retry: float, timeout: float,
                 at_once: int) -> List[Dict[str, Any]]:
    """The connecting party's buckets ``todo`` in runs, ``at_once`` Ray
    tasks at a time (one CPU each; a task whose worker dies runs again
    elsewhere, skipping the buckets it committed)."""
    if connect is None:
        raise InputError("the connecting party's buckets need connect=")
    task = ray.remote(**_TASK)(_run_buckets_task)
    return _in_turn(ray, [lambda r=r: task.remote(family, plan_args, job_dir, r, connect, token, tls, retry, timeout)
                          for r in runs_of(todo, at_once)], at_once)
