"""A sharded HE database built and served on Ray (``pip install
'psikit[ray]'``): for databases too big for one machine.

The database is split into shards that answer the **same** query (see
docs/he-psi.md, "Sharded databases"); clients query one router and see one
database. This module runs psikit's four build stages on a Ray cluster
(a single-node one on one machine):

1. the driver scans the input (rows, longest label) and makes the plan:
   parameters for the whole database and the router's OPRF key;
2. OPRF actors, each loading the key once, turn batches of rows into one
   batch of OPRF outputs and labels per shard (Ray Data ``map_batches``);
3. one task per shard builds its database from its batches
   (``groupby("shard").map_groups``) into ``out/shard-I``;
4. the driver writes the manifest, which makes the database servable.

:func:`serve` then starts one shard server per shard in a Ray actor
(restarted from its files if it dies, on the same address) and the router
in this process. Nothing here is needed to run a sharded database without
Ray: ``psikit he db build --shards N`` and ``psikit serve --he-router``
do the same in plain processes.

Files: ``out/router`` holds the OPRF key; the OPRF actors read it, so on a
cluster of several machines run them where the key is (or give every node
the directory over a secure shared file system), and give the shard tasks
an ``out`` every node can write (a shared file system), with each shard
server scheduled where its directory is.

>>> import psikit.scale  # doctest: +SKIP
>>> psikit.scale.build("server.csv", "./he-big", shards=4, key="email", label="tier", workers=2)  # doctest: +SKIP
>>> with psikit.scale.serve("./he-big", listen="0.0.0.0:7700") as deployment:  # doctest: +SKIP
...     psikit.he.query(deployment.addr, ["a@x.org"])
"""

from __future__ import annotations

import csv
import os
import socket
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Union

from . import _native
from ._data import DEFAULT_NORMALIZE, Columns, Normalize, normalize_option, prepare
from ._native import InputError

PathLike = Union[str, "os.PathLike[str]"]

__all__ = ["build", "serve", "Deployment"]


def _ray() -> Any:
    try:
        import ray
    except ImportError:  # pragma: no cover - depends on the environment
        raise InputError("psikit.scale needs Ray: pip install 'psikit[ray]'") from None
    if not ray.is_initialized():
        ray.init(include_dashboard=False, log_to_driver=False)
    return ray


def _dataset(ray: Any, data: Any, delimiter: str) -> Any:
    """``data`` as a Ray Dataset of string columns: CSV or Parquet paths
    (by suffix), or a Dataset as it is. CSV cells are read as strings, as
    the CLI reads them (no type inference turning "007" into 7)."""
    if hasattr(data, "map_batches"):
        return data
    paths = [os.fspath(p) for p in (data if isinstance(data, (list, tuple)) else [data])]
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


def _source(batch: Any, key: Columns, label: Columns, normalize: Optional[Normalize]) -> Any:
    return prepare(batch, key=key, label=label, normalize=normalize).source


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
    client_items: int = 1024,
    goal: str = "time",
    fpp_bits: int = 40,
    delimiter: str = ",",
    batch_rows: int = 1 << 16,
) -> Dict[str, Any]:
    """Builds a database of ``shards`` shards (a power of two) from ``data``
    (CSV or Parquet paths, or a Ray Dataset) into the new directory ``out``
    on Ray, with ``workers`` OPRF actors. Keys, labels and parameters as
    :func:`psikit.he.build_db` (parameters chosen for every row). Returns
    the manifest (items per shard, epoch, ...) and the time of each stage.
    """
    ray = _ray()
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise InputError(f"{out} is not empty: give a new directory for the shards")
    router_dir = out / "router"
    keys = [key] if isinstance(key, str) else list(key)
    labels = [] if label is None else [label] if isinstance(label, str) else list(label)
    ds = _dataset(ray, data, delimiter)
    times: Dict[str, float] = {}

    t = time.perf_counter()

    def scan(batch: Any) -> Dict[str, List[int]]:
        rows, longest = _native.he_shard_scan(_source(batch, key, label, normalize))
        return {"rows": [rows], "longest": [longest]}

    scanned = ds.map_batches(scan, batch_format="pyarrow", batch_size=batch_rows).to_pandas()
    rows, longest = int(scanned["rows"].sum()), int(scanned["longest"].max() if len(scanned) else 0)
    key_format = _native.Source.columns([[] for _ in keys + labels], len(keys), normalize_option(normalize),
                                        len(labels)).key_format
    plan = _native.he_shard_plan(
        os.fspath(router_dir), shards, rows, longest, key_format,
        None if params is None else os.fspath(params), client_items, goal, fpp_bits,
    )
    times["scan_and_plan_s"] = time.perf_counter() - t

    t = time.perf_counter()

    class Oprf:
        """Loads the router's key once; each batch comes out as one batch
        of OPRF outputs and labels per shard."""

        def __init__(self) -> None:
            self.worker = _native.ShardOprfWorker(os.fspath(router_dir), plan)

        def __call__(self, batch: Any) -> Dict[str, List[Any]]:
            per_shard = self.worker.evaluate(_source(batch, key, label, normalize))
            return {"shard": list(range(len(per_shard))), "batch": per_shard}

    evaluated = ds.map_batches(Oprf, batch_format="pyarrow", batch_size=batch_rows,
                               concurrency=workers).materialize()
    times["oprf_s"] = time.perf_counter() - t

    t = time.perf_counter()

    def build_group(group: Any) -> Dict[str, List[Any]]:
        index = int(group["shard"][0])
        built = _native.he_build_shard(plan, index, list(group["batch"]), os.fspath(out / f"shard-{index}"))
        return {"shard": [index], "built": [built]}

    built = evaluated.groupby("shard").map_groups(build_group, batch_format="pandas").to_pandas()
    by_shard = dict(zip(built["shard"], built["built"]))
    missing = [i for i in range(shards) if i not in by_shard]
    if missing:  # a shard no row fell into (tiny inputs): built empty
        for i in missing:
            by_shard[i] = _native.he_build_shard(plan, i, [], os.fspath(out / f"shard-{i}"))
    times["shards_s"] = time.perf_counter() - t

    import json

    manifest = json.loads(_native.he_shard_finish(os.fspath(router_dir), plan,
                                                  [by_shard[i] for i in range(shards)]))
    return {
        "items": sum(manifest["items"]),
        "items_per_shard": manifest["items"],
        "shards": shards,
        "epoch": manifest["epoch"],
        "rows_read": rows,
        **times,
    }


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


def serve(
    out: PathLike,
    *,
    listen: str = "127.0.0.1:0",
    shard_host: str = "127.0.0.1",
    he_cache: bool = True,
    reload_secs: float = 2.0,
) -> Deployment:
    """Serves the sharded database in ``out``: each shard in a Ray actor
    on ``shard_host`` (a fixed port, so a restarted actor comes back where
    the router expects it), the router on ``listen`` in this process."""
    ray = _ray()
    out = Path(out)
    manifest_path = out / "router" / "manifest.json"
    if not manifest_path.exists():
        raise InputError(f"{out} holds no sharded database (no router/manifest.json)")
    import json

    shards = len(json.loads(manifest_path.read_text())["items"])

    @ray.remote(max_restarts=-1, max_task_retries=-1, num_cpus=0)
    class ShardServer:
        def __init__(self, directory: str, addr: str) -> None:
            import psikit

            self.server = psikit.Server(listen=addr, he_state=directory, he_cache=he_cache,
                                        reload_secs=reload_secs)

        def addr(self) -> str:
            return self.server.addr

    addrs = [f"{shard_host}:{_free_port(shard_host)}" for _ in range(shards)]
    actors = [ShardServer.remote(os.fspath(out / f"shard-{i}"), a) for i, a in enumerate(addrs)]
    ray.get([a.addr.remote() for a in actors])
    import psikit

    router = psikit.Server(listen=listen, he_router=os.fspath(out / "router"), he_shards=addrs,
                           reload_secs=reload_secs)
    return Deployment(router, actors, addrs)


def _main(argv: Optional[Sequence[str]] = None) -> None:
    """``python -m psikit.scale build|serve ...``: the one-command local
    deployment."""
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
    s = sub.add_parser("serve", help="serve a sharded database: shard actors and the router")
    s.add_argument("out")
    s.add_argument("--listen", default="127.0.0.1:7700")
    a = ap.parse_args(argv)
    if a.command == "build":
        report = build(a.input, a.out, shards=a.shards, key=a.key.split(","),
                       label=a.label.split(",") if a.label else None, normalize=a.normalize,
                       workers=a.workers, client_items=a.client_items)
        print(report)
        return
    with serve(a.out, listen=a.listen) as deployment:
        print(f"psikit: serving the sharded database {a.out} on {deployment.addr} "
              f"(shards at {', '.join(deployment.shard_addrs)}); Ctrl-C stops", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    _main()
