"""Server builds spread over a Ray cluster, and sharded HE databases
served on it (``pip install 'psikit[ray]'``): for sets too big for one
machine.

A sharded HE database is split into shards that answer the **same** query
(see docs/he-psi.md, "Sharded databases"); clients query one router and
see one database. :func:`build` runs psikit's build stages on a Ray
cluster (a single-node one on one machine):

1. the driver makes the router's OPRF key;
2. OPRF actors, each loading the key once, read the input as a stream
   (Ray Data, CSV or Parquet, split between them), evaluate it batch by
   batch and spool each shard's OPRF outputs and labels to files of their
   own (``out/.spool``), counting rows and the longest label;
3. the driver chooses the parameters for every row and every shard (the
   input is read once) and makes the plan;
4. one task per shard builds its database from its spooled files into
   ``out/shard-I``;
5. the driver writes the manifest, which makes the database servable.

:func:`filter_setup` builds a filter state (``psikit.filter``) with the
same OPRF stage, then one task that builds the filter.

:func:`serve` then starts one shard server per shard in a Ray actor
(restarted from its files if it dies, on the same address) and the router
in this process. Nothing here is needed to run a sharded database without
Ray: ``psikit he db build --shards N`` and ``psikit serve --he-router``
do the same in plain processes.

Files (see docs/scale-out.md for a cluster of several machines): ``out``
must be on a file system every node can read and write (the OPRF actors
read the key, write the spool; each shard task reads its spool files and
writes its shard), and each shard server runs where its directory can be
read. The key file is owner-only; the spool holds OPRF outputs, which
only the key's holder can compute, and is removed once the shards are
built.

>>> import psikit.scale  # doctest: +SKIP
>>> psikit.scale.build("server.csv", "./he-big", shards=4, key="email", label="tier", workers=2)  # doctest: +SKIP
>>> with psikit.scale.serve("./he-big", listen="0.0.0.0:7700") as deployment:  # doctest: +SKIP
...     psikit.he.query(deployment.addr, ["a@x.org"])
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import socket
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from .. import _native
from .._data import DEFAULT_NORMALIZE, Columns, Normalize, ProgressReporter, normalize_option, prepare
from .._native import InputError

PathLike = Union[str, "os.PathLike[str]"]

__all__ = ["build", "update", "filter_setup", "serve", "Deployment", "psi", "cpsi"]

#: The spool of a build in progress, inside its output directory.
SPOOL = ".spool"
KEY_FILE = "oprf.key"
#: The lock file of a directory being written (as the CLI's).
LOCK_FILE = ".psikit.lock"


def _loopback_node() -> Dict[str, str]:
    """``ray.init``'s node address for a Ray on this machine's loopback: a
    local Ray of its own, or a cluster whose head listens on a loopback
    address (``RAY_ADDRESS=127.0.0.2:PORT``), so that workers and servers
    bind and connect on loopback only. On Linux that is 127.0.0.2, not
    127.0.0.1, which Ray replaces by the machine's interface address
    (elsewhere Ray keeps a local node on 127.0.0.1 by itself). A driver of
    another cluster announces its node's own address."""
    host = os.environ.get("RAY_ADDRESS", "").rsplit(":", 1)[0]
    if host.startswith("127."):
        return {"_node_ip_address": host}
    if not host and sys.platform.startswith("linux"):
        return {"_node_ip_address": "127.0.0.2"}
    return {}


def _ray() -> Any:
    try:
        import ray
    except ImportError:  # pragma: no cover - depends on the environment
        raise InputError("psikit.scale needs Ray: pip install 'psikit[ray]'") from None
    if not ray.is_initialized():
        ray.init(include_dashboard=False, log_to_driver=False, **_loopback_node())
    return ray


def _paths(data: Any) -> List[str]:
    """CSV or Parquet paths: one, or a list."""
    return [os.fspath(p) for p in (data if isinstance(data, (list, tuple)) else [data])]


def _dataset(ray: Any, data: Any, delimiter: str) -> Any:
    """``data`` as a Ray Dataset of string columns: CSV or Parquet paths
    (by suffix), or a Dataset as it is. CSV cells are read as strings, as
    the CLI reads them (no type inference turning "007" into 7)."""
    if hasattr(data, "map_batches"):
        return data
    paths = _paths(data)
    # Reading takes no CPU slot of its own: the OPRF actors hold one each,
    # and reads that waited for a slot would stall them.
    if all(p.endswith(".parquet") for p in paths):
        return ray.data.read_parquet(paths, num_cpus=0)
    import pyarrow as pa
    import pyarrow.csv as pacsv

    with open(paths[0], newline="", encoding="utf-8") as f:
        header = next(csv.reader(f, delimiter=delimiter))
    return ray.data.read_csv(
        paths,
        parse_options=pacsv.ParseOptions(delimiter=delimiter),
        convert_options=pacsv.ConvertOptions(column_types={h: pa.string() for h in header}),
        num_cpus=0,
    )


def _columns(columns: Columns) -> List[str]:
    return [] if columns is None else [columns] if isinstance(columns, str) else list(columns)


def _key_format(key: Columns, label: Columns, normalize: Optional[Normalize]) -> str:
    """The key encoding rows of these columns get, as a build records it."""
    keys, labels = _columns(key), _columns(label)
    empty = [[] for _ in keys + labels]
    return _native.Source.columns(empty, len(keys), normalize_option(normalize), len(labels)).key_format


class _OprfActor:
    """An OPRF worker (a Ray actor): loads the key once, evaluates its part
    of the input batch by batch into its spool files."""

    def __init__(self, key_dir: str, shards: int, spool: str, name: str, manifest: Optional[str]) -> None:
        self.worker = _native.OprfWorker(key_dir, shards, spool, name, manifest)
        self.rows = 0

    def run(self, split: Any, key: Columns, label: Columns, normalize: Optional[Normalize],
            batch_rows: int) -> Tuple[int, int]:
        longest = 0
        for batch in split.iter_batches(batch_size=batch_rows, batch_format="pyarrow"):
            source = prepare(batch, key=key, label=label, normalize=normalize).source
            rows, batch_longest = self.worker.evaluate(source)
            self.rows += rows
            longest = max(longest, batch_longest)
        self.worker.flush()
        return self.rows, longest

    def done(self) -> int:
        return self.rows


def _oprf_stage(ray: Any, ds: Any, key_dir: Path, shards: int, spool: Path, workers: int, key: Columns,
                label: Columns, normalize: Optional[Normalize], batch_rows: int,
                progress: ProgressReporter, manifest: Optional[str] = None) -> Tuple[int, int]:
    """Stage 2 of both builds (and of updates): ``workers`` OPRF actors,
    each reading a part of ``ds``; returns the rows evaluated and the
    longest label. With ``manifest``, the key is checked against it."""
    if workers < 1:
        raise InputError(f"workers must be at least 1, got {workers}")
    # Each actor runs a thread pool over all of its node's cores, which
    # Ray's CPU slots cannot describe; holding slots would only starve the
    # reads feeding the actors (a Parquet read waiting for a slot deadlocks
    # the stream), so they hold none and SPREAD puts them on distinct
    # nodes. Two calls at once per actor: `done` answers while `run` works.
    actor = ray.remote(num_cpus=0, max_concurrency=2, scheduling_strategy="SPREAD")(_OprfActor)
    run = uuid.uuid4().hex[:12]
    actors = [actor.remote(os.fspath(key_dir), shards, os.fspath(spool), f"{run}-{i}", manifest)
              for i in range(workers)]
    splits = ds.streaming_split(workers, equal=False)
    pending = [a.run.remote(s, key, label, normalize, batch_rows) for a, s in zip(actors, splits)]
    refs = list(pending)
    try:
        while pending:
            _, pending = ray.wait(pending, num_returns=len(pending), timeout=0.5)
            if progress.callback is not None:
                progress.callback("OPRF", sum(ray.get([a.done.remote() for a in actors])), None)
        results = ray.get(refs)
    finally:
        for a in actors:
            ray.kill(a)
    return sum(r for r, _ in results), max((lg for _, lg in results), default=0)


def _build_shard(plan: str, index: int, spool: str, out: str) -> str:
    """HE stage 4 as a Ray task (a module function, so workers import it)."""
    return _native.he_build_shard(plan, index, spool, out)


def _update_shard(*args: Any) -> str:
    """An update's stage per shard as a Ray task."""
    return _native.he_update_shard(*args)


def _filter_from_spool(*args: Any) -> Dict[str, Any]:
    """The filter's last stage as a Ray task."""
    return _native.filter_setup_from_spool(*args)


def _fresh(out: Path) -> Any:
    """Locks the new directory ``out`` (see :class:`_native.StateLock`),
    refusing one that holds anything."""
    lock = _native.StateLock(os.fspath(out))
    if any(p.name != LOCK_FILE for p in out.iterdir()):
        lock.release()
        raise InputError(f"{out} is not empty: give a new directory")
    return lock


def _clear(out: Path) -> None:
    """Removes what a build wrote in ``out`` (all but the lock file)."""
    for entry in out.iterdir():
        if entry.name != LOCK_FILE:
            shutil.rmtree(entry) if entry.is_dir() else entry.unlink()


def _shard_tasks(ray: Any, function: Any, args: List[Tuple[Any, ...]], reporter: ProgressReporter,
                 stage: str) -> List[Any]:
    """``function`` as one Ray task per shard (one CPU each), reporting the
    shards done; returns their results in shard order."""
    task = ray.remote(num_cpus=1)(function)
    pending = [task.remote(*a) for a in args]
    refs = list(pending)
    while pending:
        _, pending = ray.wait(pending, num_returns=len(pending), timeout=0.5)
        if reporter.callback is not None:
            reporter.callback(stage, len(refs) - len(pending), len(refs))
    return ray.get(refs)


def build(
    data: Any,
    out: PathLike,
    *,
    shards: int,
    key: Columns,
    label: Columns = None,
    normalize: Optional[Normalize] = DEFAULT_NORMALIZE,
    workers: int = 2,
    params: Optional[PathLike] = None,
    max_label_bytes: Optional[int] = None,
    client_items: int = 1024,
    goal: str = "time",
    fpp_bits: int = 40,
    delimiter: str = ",",
    batch_rows: int = 1 << 16,
    progress: Any = None,
) -> Dict[str, Any]:
    """Builds a database of ``shards`` shards (a power of two) from ``data``
    (CSV or Parquet paths, or a Ray Dataset) into the new directory ``out``
    on Ray, with ``workers`` OPRF actors. Keys, labels and parameters as
    :func:`psikit.he.build_db` (parameters chosen for every row of every
    shard). ``progress(stage, done, total)`` hears the rows evaluated and
    the shards built (``True``: tqdm bars).

    Returns the manifest's counts (``items``, ``items_per_shard``,
    ``epoch``), the time of each stage (``key_s``, ``oprf_s``, ``plan_s``,
    ``shards_s``, ``finish_s``) and the throughput of the OPRF stage
    (``oprf_rows_per_sec``) and of the whole build (``rows_per_sec``).
    """
    ray = _ray()
    out = Path(out)
    ds = _dataset(ray, data, delimiter)
    lock = _fresh(out)
    times: Dict[str, float] = {}
    started = t = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal t
        now = time.perf_counter()
        times[name] = now - t
        t = now

    with ProgressReporter(progress) as reporter:
        try:
            manifest = _build_stages(ray, ds, out, shards, key, label, normalize, workers, params, max_label_bytes,
                                     client_items, goal, fpp_bits, batch_rows, reporter, lap)
        except BaseException:
            _clear(out)  # it was empty: a failed build leaves nothing behind
            raise
        finally:
            lock.release()
    total = time.perf_counter() - started
    rows = manifest.pop("rows")
    return {
        "items": sum(manifest["items"]),
        "items_per_shard": manifest["items"],
        "shards": shards,
        "epoch": manifest["epoch"],
        "rows_read": rows,
        **times,
        "total_s": total,
        "oprf_rows_per_sec": rows / times["oprf_s"] if times["oprf_s"] else 0.0,
        "rows_per_sec": rows / total if total else 0.0,
    }


def _build_stages(ray: Any, ds: Any, out: Path, shards: int, key: Columns, label: Columns,
                  normalize: Optional[Normalize], workers: int, params: Optional[PathLike],
                  max_label_bytes: Optional[int], client_items: int, goal: str, fpp_bits: int, batch_rows: int,
                  reporter: ProgressReporter, lap: Any) -> Dict[str, Any]:
    """:func:`build`'s stages, each timed by ``lap``; returns the manifest
    and the rows read (``rows``)."""
    router_dir, spool = out / "router", out / SPOOL
    _native.oprf_stage_key(os.fspath(router_dir / KEY_FILE))
    lap("key_s")
    rows, longest = _oprf_stage(ray, ds, router_dir, shards, spool, workers, key, label, normalize, batch_rows,
                                reporter)
    lap("oprf_s")
    plan = _native.he_shard_plan(
        os.fspath(router_dir), shards, rows, longest, bool(_columns(label)), _key_format(key, label, normalize),
        max_label_bytes, None if params is None else os.fspath(params), client_items, goal, fpp_bits,
        _columns(label),
    )
    lap("plan_s")
    built = _shard_tasks(ray, _build_shard,
                         [(plan, i, os.fspath(spool), os.fspath(out / f"shard-{i}")) for i in range(shards)],
                         reporter, "building shards")
    shutil.rmtree(spool)
    lap("shards_s")
    manifest = json.loads(_native.he_shard_finish(os.fspath(router_dir), plan, built))
    lap("finish_s")
    return {**manifest, "rows": rows}


def update(
    out: PathLike,
    *,
    add: Any = None,
    remove: Any = None,
    key: Columns,
    label: Columns = None,
    normalize: Optional[Normalize] = DEFAULT_NORMALIZE,
    workers: int = 2,
    delimiter: str = ",",
    batch_rows: int = 1 << 16,
    progress: Any = None,
) -> Dict[str, Any]:
    """Updates the sharded database in ``out`` (built by :func:`build`,
    ``psikit.he.build_db(shards=)`` or ``psikit he db build --shards``) on
    Ray: the rows of ``remove`` leave it, those of ``add`` join it or get
    their new label (CSV or Parquet paths, or Ray Datasets; the same key
    columns and normalisation as the build). Both go through the OPRF
    stage of :func:`build` under the router's key, one task per shard
    applies its changes and saves the shard at the next epoch (its server
    keeps answering the old one), and only then the manifest is written,
    which makes routers switch: no query ever mixes two epochs.

    Returns the new manifest's counts, the summed changes (``inserted``,
    ``relabelled``, ``removed``, ...) and the time of each stage.
    """
    if add is None and remove is None:
        raise InputError("nothing to do: give add= and/or remove=")
    ray = _ray()
    out = Path(out)
    router_dir, spool = out / "router", out / SPOOL
    manifest_path = router_dir / "manifest.json"
    if not manifest_path.exists():
        raise InputError(f"{out} holds no sharded database (no router/manifest.json)")
    times: Dict[str, float] = {}
    lock = _native.StateLock(os.fspath(out))
    try:
        manifest = manifest_path.read_text()
        described = json.loads(manifest)
        shards, room = len(described["items"]), described["max_label_bytes"]
        theirs, ours = described["key_format"], _key_format(key, None, normalize)
        if theirs and ours and theirs != ours:
            raise InputError(f'the server\'s keys are encoded as "{theirs}" but this update encodes them as '
                             f'"{ours}": use the same number of key columns and the same normalize')
        if add is not None and bool(_columns(label)) != (room > 0):
            raise InputError("the database has labels: give label= for the additions" if room
                             else "the database has no labels: give no label=")
        shutil.rmtree(spool, ignore_errors=True)  # of an update that died: this one holds the lock
        with ProgressReporter(progress) as reporter:
            t = time.perf_counter()
            spools: Dict[str, Optional[str]] = {"remove": None, "add": None}
            for name, data, columns in (("remove", remove, None), ("add", add, label)):
                if data is None:
                    continue
                ds = _dataset(ray, data, delimiter)
                _, longest = _oprf_stage(ray, ds, router_dir, shards, spool / name, workers, key, columns,
                                         normalize, batch_rows, reporter, manifest)
                if longest > room:
                    raise InputError(f"a label has {longest} bytes, but the database allows at most {room} "
                                     "(fixed when it was built)")
                spools[name] = os.fspath(spool / name)
            times["oprf_s"] = time.perf_counter() - t
            t = time.perf_counter()
            built = _shard_tasks(ray, _update_shard, [(manifest, i, spools["remove"], spools["add"],
                                                       os.fspath(out / f"shard-{i}")) for i in range(shards)],
                                 reporter, "updating shards")
            times["shards_s"] = time.perf_counter() - t
            new = json.loads(_native.he_shard_finish_update(os.fspath(router_dir), manifest, built))
    finally:
        shutil.rmtree(spool, ignore_errors=True)
        lock.release()
    changes: Dict[str, int] = {}
    for shard in built:
        for name, count in json.loads(shard)["stats"].items():
            changes[name] = changes.get(name, 0) + count
    return {"items": sum(new["items"]), "items_per_shard": new["items"], "epoch": new["epoch"], **changes,
            **times}


def filter_setup(
    data: Any,
    state: PathLike,
    *,
    key: Columns,
    normalize: Optional[Normalize] = DEFAULT_NORMALIZE,
    workers: int = 2,
    fpr_bits: int = 30,
    bucket_size: int = 4,
    load: float = 0.90,
    delimiter: str = ",",
    batch_rows: int = 1 << 16,
    progress: Any = None,
) -> Dict[str, Any]:
    """Builds a filter state (as :func:`psikit.filter.setup`, which it
    equals for the same rows) in the new directory ``state`` from ``data``
    (CSV or Parquet paths, or a Ray Dataset) on Ray: the OPRF stage of
    :func:`build` with ``workers`` actors, then one task that builds the
    filter. The key and the spool wait in ``state``'s sibling
    ``.<name>.staging`` until the state (which holds the key) is saved.

    Returns the state's counts as :func:`psikit.filter.setup` does, the
    time of each stage (``oprf_s``, ``filter_s``) and ``oprf_rows_per_sec``.
    """
    ray = _ray()
    state = Path(state)
    ds = _dataset(ray, data, delimiter)
    if state.exists() and any(state.iterdir()):
        raise InputError(f"{state} is not empty: give a new directory")
    # The last stage locks the state itself; until then the staging
    # directory's lock keeps a second set-up of the same state out.
    staging = state.parent / f".{state.name}.staging"
    lock = _native.StateLock(os.fspath(staging))
    try:
        _clear(staging)  # of a set-up that died: this one holds the lock now
        with ProgressReporter(progress) as reporter:
            t = time.perf_counter()
            _native.oprf_stage_key(os.fspath(staging / KEY_FILE))
            rows, _ = _oprf_stage(ray, ds, staging, 1, staging / SPOOL, workers, key, None, normalize,
                                  batch_rows, reporter)
            oprf_s = time.perf_counter() - t
            t = time.perf_counter()
            [report] = _shard_tasks(ray, _filter_from_spool, [(
                os.fspath(staging / SPOOL), os.fspath(staging / KEY_FILE), rows, _key_format(key, None, normalize),
                os.fspath(state), fpr_bits, bucket_size, load)], reporter, "building the filter")
    finally:
        lock.release()
        shutil.rmtree(staging, ignore_errors=True)
    filter_s = time.perf_counter() - t
    return {**report, "oprf_s": oprf_s, "filter_s": filter_s,
            "oprf_rows_per_sec": rows / oprf_s if oprf_s else 0.0}


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class Deployment:
    """A served sharded database: one shard server per shard in Ray actors
    and the router in this process. ``addr`` is the router's address;
    ``close()`` (or leaving the ``with`` block) stops them all."""

    def __init__(self, router: Any, shards: List[Any], shard_addrs: List[str]) -> None:
        self._router = router
        self.shards = shards
        self.shard_addrs = shard_addrs

    @property
    def addr(self) -> str:
        """The router's ``host:port``: what clients query."""
        return self._router.addr

    def close(self) -> None:
        ray = _ray()
        self._router.close()
        for actor in self.shards:
            ray.kill(actor, no_restart=True)

    def __enter__(self) -> "Deployment":
        return self

    def __exit__(self, *args: object) -> None:
        self.close()


class _ShardServer:
    """A shard server (a Ray actor): psikit's server on one shard's
    directory, at a fixed address so that a restarted actor comes back
    where the router expects it."""

    def __init__(self, directory: str, addr: str, he_cache: bool, reload_secs: float,
                 tls: Optional[Dict[str, Any]]) -> None:
        import psikit

        self.server = psikit.Server(listen=addr, he_state=directory, he_cache=he_cache,
                                    reload_secs=reload_secs, tls=tls)

    def addr(self) -> str:
        return self.server.addr


def serve(
    out: PathLike,
    *,
    listen: str = "127.0.0.1:0",
    shard_port: Optional[int] = None,
    he_cache: bool = True,
    reload_secs: float = 2.0,
    shard_tls: Optional[Dict[str, Any]] = None,
    router_tls: Optional[Dict[str, Any]] = None,
) -> Deployment:
    """Serves the sharded database in ``out``: each shard in a Ray actor,
    the router on ``listen`` in this process.

    Shard ``I`` runs on the cluster's ``I mod n``-th alive node, pinned
    there (Ray restarts a dead actor in place, from its files) and listens
    on that node's address at port ``shard_port + I``; on a one-node
    cluster ``shard_port`` may be left out (free ports are taken). The
    shard's directory must be readable on its node (a shared file system,
    or the directory copied there). ``shard_tls`` is the shard servers'
    ``tls=`` (``{"cert", "key", "client_ca"}``: give ``client_ca`` so only
    the router gets in) and ``router_tls`` the router's ``he_shards_tls=``
    (``{"ca", "cert", "key"}``), as in :class:`psikit.Server`.
    """
    ray = _ray()
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    out = Path(out)
    manifest_path = out / "router" / "manifest.json"
    if not manifest_path.exists():
        raise InputError(f"{out} holds no sharded database (no router/manifest.json)")
    shards = len(json.loads(manifest_path.read_text())["items"])
    nodes = sorted((n for n in ray.nodes() if n["Alive"]), key=lambda n: n["NodeID"])
    if shard_port is None and len(nodes) > 1:
        raise InputError("give shard_port= on a cluster of several nodes: shard I listens on "
                         "port shard_port + I of its node")
    actor = ray.remote(max_restarts=-1, max_task_retries=-1, num_cpus=0)(_ShardServer)
    actors, addrs = [], []
    for i in range(shards):
        node = nodes[i % len(nodes)]
        host = node["NodeManagerAddress"]
        port = _free_port(host) if shard_port is None else shard_port + i
        addrs.append(f"{host}:{port}")
        pinned = NodeAffinitySchedulingStrategy(node_id=node["NodeID"], soft=False)
        actors.append(actor.options(scheduling_strategy=pinned).remote(
            os.fspath(out / f"shard-{i}"), addrs[-1], he_cache, reload_secs, shard_tls))
    ray.get([a.addr.remote() for a in actors])
    import psikit

    router = psikit.Server(listen=listen, he_router=os.fspath(out / "router"), he_shards=addrs,
                           reload_secs=reload_secs, he_shards_tls=router_tls)
    return Deployment(router, actors, addrs)


def _job_parser(sub: Any, family: str) -> None:
    """``python -m psikit.scale psi|cpsi send|receive ...``: a party of a
    job whose buckets run on this party's Ray cluster."""
    what = "a balanced PSI (VOLE-PSI or RR16)" if family == "psi" else "circuit PSI's cardinality, sum or threshold"
    p = sub.add_parser(family, help=f"one party of {what} as a job over this party's Ray cluster")
    p.add_argument("role", choices=["send", "receive"])
    if family == "cpsi":
        p.add_argument("application", choices=["cardinality", "sum", "threshold"])
    p.add_argument("input", nargs="+", help="CSV (with a header) or Parquet files")
    p.add_argument("--key", required=True, help="key column(s), comma-separated")
    p.add_argument("--normalize", default=DEFAULT_NORMALIZE)
    p.add_argument("--job-dir", required=True, help="on storage every node of this cluster shares")
    peer = p.add_mutually_exclusive_group(required=True)
    peer.add_argument("--listen", help="this party's one address for the peer")
    peer.add_argument("--connect", help="the peer's address")
    p.add_argument("--tls-cert", help="listening: this party's certificate (PEM)")
    p.add_argument("--tls-key", help="listening: its key (PEM)")
    p.add_argument("--tls-ca", help="connecting: the peer's CA (PEM)")
    p.add_argument("--relay-listen", default="127.0.0.1:0",
                   help="listening: where this party's workers reach its driver (a private address)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--resume", action="store_true")
    p.add_argument("--memory", default="4G", help="per worker")
    p.add_argument("--bucket-items", type=int)
    if family == "psi":
        p.add_argument("--protocol", default="vole", choices=["vole", "rr16"])
        p.add_argument("--malicious", action="store_true")
        p.add_argument("--low-comm", action="store_true", help="VOLE-PSI's low-communication mode")
        p.add_argument("--reveal", action="store_true")
        p.add_argument("--output", help="the matched rows (CSV)")
    else:
        p.add_argument("--value-columns", help="sum: value column(s), comma-separated")
        p.add_argument("--threshold", type=int)
        p.add_argument("--reveal-to", default="receiver", choices=["receiver", "sender", "both"])


def _run_job(a: Any) -> Dict[str, Any]:
    """The job ``_job_parser``'s arguments ask for."""
    tls = ({"cert": a.tls_cert, "key": a.tls_key} if a.listen and a.tls_cert else
           {"ca": a.tls_ca} if a.connect and a.tls_ca else None)
    common = dict(key=a.key.split(","), normalize=a.normalize, job_dir=a.job_dir, listen=a.listen,
                  connect=a.connect, tls=tls, relay_listen=a.relay_listen, workers=a.workers, resume=a.resume,
                  memory=a.memory, bucket_items=a.bucket_items,
                  on_listening=lambda addr: print(f"psikit: listening on {addr}", flush=True))
    if a.command == "psi":
        run = psi.send if a.role == "send" else psi.receive
        return run(a.input, protocol=a.protocol, malicious=a.malicious, low_comm=a.low_comm, reveal=a.reveal,
                   output=a.output, **common)
    run = cpsi.send if a.role == "send" else cpsi.receive
    values = a.value_columns.split(",") if a.value_columns else None
    return run(a.application, a.input, value_columns=values, threshold=a.threshold, reveal_to=a.reveal_to,
               **common)


def _main(argv: Optional[Sequence[str]] = None) -> None:
    """``python -m psikit.scale build|filter|serve|psi|cpsi ...``."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m psikit.scale", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build a sharded database on Ray")
    b.add_argument("input", nargs="+", help="CSV or Parquet files")
    b.add_argument("--out", required=True)
    b.add_argument("--shards", type=int, required=True)
    b.add_argument("--key", required=True, help="key column(s), comma-separated")
    b.add_argument("--label", help="label column(s), comma-separated")
    b.add_argument("--normalize", default=DEFAULT_NORMALIZE)
    b.add_argument("--workers", type=int, default=2)
    b.add_argument("--client-items", type=int, default=1024)
    f = sub.add_parser("filter", help="set up a filter state on Ray")
    f.add_argument("input", nargs="+", help="CSV or Parquet files")
    f.add_argument("--state", required=True)
    f.add_argument("--key", required=True, help="key column(s), comma-separated")
    f.add_argument("--normalize", default=DEFAULT_NORMALIZE)
    f.add_argument("--workers", type=int, default=2)
    s = sub.add_parser("serve", help="serve a sharded database: shard actors and the router")
    s.add_argument("out")
    s.add_argument("--listen", default="127.0.0.1:7700")
    s.add_argument("--shard-port", type=int, help="shard I listens on this port + I of its node "
                   "(needed on a cluster of several nodes)")
    _job_parser(sub, "psi")
    _job_parser(sub, "cpsi")
    a = ap.parse_args(argv)
    if a.command in ("psi", "cpsi"):
        print(json.dumps(_run_job(a)))
        return
    if a.command == "build":
        report = build(a.input, a.out, shards=a.shards, key=a.key.split(","),
                       label=a.label.split(",") if a.label else None, normalize=a.normalize,
                       workers=a.workers, client_items=a.client_items, progress=True)
        print(json.dumps(report))
        return
    if a.command == "filter":
        report = filter_setup(a.input, a.state, key=a.key.split(","), normalize=a.normalize,
                              workers=a.workers, progress=True)
        print(json.dumps(report))
        return
    with serve(a.out, listen=a.listen, shard_port=a.shard_port) as deployment:
        print(f"psikit: serving the sharded database {a.out} on {deployment.addr} "
              f"(shards at {', '.join(deployment.shard_addrs)}); Ctrl-C stops", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass


# The job front ends use the helpers above.
from . import cpsi, psi  # noqa: E402
