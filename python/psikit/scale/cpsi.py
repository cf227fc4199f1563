"""Circuit PSI jobs (cardinality, sums or a threshold) whose buckets run on
each party's own Ray cluster: the one-machine job of
:func:`psikit.cpsi.send` with ``job_dir=`` spread over ``workers`` workers
per party. Each bucket leaves its result in shares in the job directory;
the shares are added up over every bucket and opened once over the
control connection, so a party learns the job's aggregate only, as on one
machine (see :mod:`psikit.scale.psi` for the layout and
docs/scale-out.md, "Balanced jobs across machines").

>>> import psikit.scale.cpsi  # doctest: +SKIP
>>> psikit.scale.cpsi.receive("sum", "orders.parquet", key="email", value_columns="amount",  # doctest: +SKIP
...                           job_dir="/shared/job", listen="0.0.0.0:7801", workers=8)
"""

from __future__ import annotations

import os
from typing import Any, Callable, Dict, Optional, Union

from .._data import DEFAULT_NORMALIZE, Columns, Normalize, normalize_option
from .._jobs import _bytes
from . import _cluster, _columns, _ray

__all__ = ["send", "receive"]


def _run(role: str, application: str, data: Any, *, key: Columns, normalize: Optional[Normalize],
         value_columns: Columns, threshold: Optional[int], reveal_to: str, min_intersection: int, ot: str,
         epc: Union[str, int], job_dir: Union[str, "os.PathLike[str]"], listen: Optional[str],
         connect: Optional[str], tls: Optional[Dict[str, Any]], relay_listen: str, workers: int, resume: bool,
         memory: Union[int, str], bucket_items: Optional[int], max_peer_rows: int, retry: float, timeout: float,
         on_listening: Optional[Callable[[str], None]], delimiter: str,
         batch_rows: int) -> Dict[str, Any]:
    ray = _ray()
    plan_args = {"application": application, "role": role, "key": _columns(key),
                 "normalize": normalize_option(normalize), "value_columns": _columns(value_columns),
                 "threshold": threshold, "reveal_to": reveal_to, "min_intersection": min_intersection,
                 "ot": ot, "epc": str(epc)}
    return _cluster.run(
        ray, "cpsi", plan_args, job_dir, listen=listen, connect=connect, tls=tls, relay_listen=relay_listen,
        workers=workers, resume=resume, memory=_bytes(memory), bucket_items=bucket_items,
        max_peer_rows=max_peer_rows, retry=retry, timeout=timeout, output=None,
        on_listening=on_listening, data=data, delimiter=delimiter, batch_rows=batch_rows,
    )


def receive(application: str, data: Any, *, key: Columns, job_dir: Union[str, "os.PathLike[str]"],
            listen: Optional[str] = None, connect: Optional[str] = None,
            normalize: Optional[Normalize] = DEFAULT_NORMALIZE, value_columns: Columns = None,
            threshold: Optional[int] = None, reveal_to: str = "receiver", min_intersection: int = 0,
            ot: str = "silent", epc: Union[str, int] = "auto", tls: Optional[Dict[str, Any]] = None,
            relay_listen: str = "127.0.0.1:0", workers: int = 2, resume: bool = False,
            memory: Union[int, str] = "4G", bucket_items: Optional[int] = None, max_peer_rows: int = 1 << 40,
            retry: float = 600.0, timeout: float = 600.0, on_listening: Optional[Callable[[str], None]] = None, delimiter: str = ",",
            batch_rows: int = 1 << 20) -> Dict[str, Any]:
    """The receiver's job of ``application`` (``"cardinality"``, ``"sum"``
    or ``"threshold"``) on ``data``: options as :func:`psikit.cpsi.receive`
    and :func:`psikit.scale.psi.receive`. Returns the dict a one-machine
    job returns (``intersection_size``, the sums, ...), the job's details
    under ``"job"`` and the cluster's under ``"cluster"``."""
    return _run("receive", application, data, key=key, normalize=normalize, value_columns=value_columns,
                threshold=threshold, reveal_to=reveal_to, min_intersection=min_intersection, ot=ot, epc=epc,
                job_dir=job_dir, listen=listen, connect=connect, tls=tls, relay_listen=relay_listen,
                workers=workers, resume=resume, memory=memory, bucket_items=bucket_items,
                max_peer_rows=max_peer_rows, retry=retry, timeout=timeout, on_listening=on_listening, delimiter=delimiter, batch_rows=batch_rows)


def send(application: str, data: Any, *, key: Columns, job_dir: Union[str, "os.PathLike[str]"],
         listen: Optional[str] = None, connect: Optional[str] = None,
         normalize: Optional[Normalize] = DEFAULT_NORMALIZE, value_columns: Columns = None,
         threshold: Optional[int] = None, reveal_to: str = "receiver", min_intersection: int = 0,
         ot: str = "silent", epc: Union[str, int] = "auto", tls: Optional[Dict[str, Any]] = None,
         relay_listen: str = "127.0.0.1:0", workers: int = 2, resume: bool = False,
         memory: Union[int, str] = "4G", bucket_items: Optional[int] = None, max_peer_rows: int = 1 << 40,
         retry: float = 600.0, timeout: float = 600.0, on_listening: Optional[Callable[[str], None]] = None, delimiter: str = ",",
         batch_rows: int = 1 << 20) -> Dict[str, Any]:
    """The sender's job of ``application`` on ``data``: as :func:`receive`."""
    return _run("send", application, data, key=key, normalize=normalize, value_columns=value_columns,
                threshold=threshold, reveal_to=reveal_to, min_intersection=min_intersection, ot=ot, epc=epc,
                job_dir=job_dir, listen=listen, connect=connect, tls=tls, relay_listen=relay_listen,
                workers=workers, resume=resume, memory=memory, bucket_items=bucket_items,
                max_peer_rows=max_peer_rows, retry=retry, timeout=timeout, on_listening=on_listening, delimiter=delimiter, batch_rows=batch_rows)
