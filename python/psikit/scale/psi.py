"""Balanced PSI jobs (VOLE-PSI or RR16) whose buckets run on each party's
own Ray cluster: the one-machine job of :func:`psikit.psi.send` with
``job_dir=`` spread over ``workers`` workers per party (see
``psikit.scale._cluster`` and docs/scale-out.md, "Balanced jobs across
machines").

The two parties are two organisations with a cluster each; only psikit's
own connections cross between them: the listening party exposes one
address (give it TLS with ``tls=``), the connecting party's bucket tasks
dial it, and the listening party's driver relays each of their connections
to one of its workers. What each party learns is what a one-machine job
reveals: the receiver its matched rows (written to ``output``, one CSV
file), the sender nothing unless ``reveal=True``; both the row counts,
the buckets and their capacities.

>>> import psikit.scale.psi  # doctest: +SKIP
>>> psikit.scale.psi.receive("customers/*.parquet", key="email", job_dir="/shared/job",  # doctest: +SKIP
...                          listen="0.0.0.0:7800", workers=8, output="/shared/matched.csv")
"""

from __future__ import annotations

import os
from typing import Any, Callable, Dict, Optional, Union

from .._data import DEFAULT_NORMALIZE, Columns, Normalize, normalize_option
from .._jobs import _bytes
from . import _cluster, _columns, _ray

__all__ = ["send", "receive"]


def _run(role: str, data: Any, *, key: Columns, normalize: Optional[Normalize], protocol: str, malicious: bool,
         reveal: bool, job_dir: Union[str, "os.PathLike[str]"], listen: Optional[str], connect: Optional[str],
         tls: Optional[Dict[str, Any]], relay_listen: str, workers: int, resume: bool, memory: Union[int, str],
         bucket_items: Optional[int], max_peer_rows: int, retry: float, timeout: float, output: Optional[str],
         on_listening: Optional[Callable[[str], None]], delimiter: str,
         batch_rows: int, low_comm: bool) -> Dict[str, Any]:
    ray = _ray()
    plan_args = {"role": role, "key": _columns(key), "normalize": normalize_option(normalize),
                 "protocol": protocol, "malicious": malicious, "reveal": reveal, "low_comm": low_comm}
    return _cluster.run(
        ray, "psi", plan_args, job_dir, listen=listen, connect=connect, tls=tls, relay_listen=relay_listen,
        workers=workers, resume=resume, memory=_bytes(memory), bucket_items=bucket_items,
        max_peer_rows=max_peer_rows, retry=retry, timeout=timeout,
        output=None if output is None else os.fspath(output),
        on_listening=on_listening, data=data, delimiter=delimiter, batch_rows=batch_rows,
    )


def receive(data: Any, *, key: Columns, job_dir: Union[str, "os.PathLike[str]"], listen: Optional[str] = None,
            connect: Optional[str] = None, normalize: Optional[Normalize] = DEFAULT_NORMALIZE,
            protocol: str = "vole", malicious: bool = False, low_comm: bool = False, reveal: bool = False,
            tls: Optional[Dict[str, Any]] = None, relay_listen: str = "127.0.0.1:0", workers: int = 2,
            resume: bool = False, memory: Union[int, str] = "4G", bucket_items: Optional[int] = None,
            max_peer_rows: int = 1 << 40, retry: float = 600.0, timeout: float = 600.0,
            output: Optional[str] = None, on_listening: Optional[Callable[[str], None]] = None, delimiter: str = ",",
            batch_rows: int = 1 << 20) -> Dict[str, Any]:
    """The receiver's job on ``data``: CSV (with a header) or Parquet
    paths on storage every worker reads, each file a part keyed by a Ray
    task, or a Ray Dataset, streamed through Ray Data (``batch_rows`` rows
    at a time) into parts. Give ``listen="host:port"`` or
    ``connect="host:port"``; ``job_dir`` on storage every node of this
    party's cluster shares; ``workers`` bucket workers (and tasks keying
    the input). A listening party's workers reach its driver's relay on
    ``relay_listen`` (an address of the cluster's private network). The matched rows go to ``output`` (one CSV file);
    the result holds ``matched_rows``, the job's id, shape and costs, and
    under ``"cluster"`` the buckets this side's tasks ran and the time of
    each stage. ``resume=True`` continues a job whose driver stopped."""
    return _run("receive", data, key=key, normalize=normalize, protocol=protocol, malicious=malicious,
                reveal=reveal, job_dir=job_dir, listen=listen, connect=connect, tls=tls, relay_listen=relay_listen,
                workers=workers, resume=resume, memory=memory, bucket_items=bucket_items,
                max_peer_rows=max_peer_rows, retry=retry, timeout=timeout, output=output,
                on_listening=on_listening, delimiter=delimiter,
                batch_rows=batch_rows, low_comm=low_comm)


def send(data: Any, *, key: Columns, job_dir: Union[str, "os.PathLike[str]"], listen: Optional[str] = None,
         connect: Optional[str] = None, normalize: Optional[Normalize] = DEFAULT_NORMALIZE,
         protocol: str = "vole", malicious: bool = False, low_comm: bool = False, reveal: bool = False,
         tls: Optional[Dict[str, Any]] = None, relay_listen: str = "127.0.0.1:0", workers: int = 2,
         resume: bool = False, memory: Union[int, str] = "4G", bucket_items: Optional[int] = None,
         max_peer_rows: int = 1 << 40, retry: float = 600.0, timeout: float = 600.0,
         output: Optional[str] = None, on_listening: Optional[Callable[[str], None]] = None, delimiter: str = ",",
         batch_rows: int = 1 << 20) -> Dict[str, Any]:
    """The sender's job on ``data``: as :func:`receive`; with
    ``reveal=True`` its matched rows go to ``output``."""
    return _run("send", data, key=key, normalize=normalize, protocol=protocol, malicious=malicious,
                reveal=reveal, job_dir=job_dir, listen=listen, connect=connect, tls=tls, relay_listen=relay_listen,
                workers=workers, resume=resume, memory=memory, bucket_items=bucket_items,
                max_peer_rows=max_peer_rows, retry=retry, timeout=timeout, output=output,
                on_listening=on_listening, delimiter=delimiter,
                batch_rows=batch_rows, low_comm=low_comm)
