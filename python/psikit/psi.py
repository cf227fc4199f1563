"""Balanced two-party PSI (``psikit psi``): VOLE-PSI (default) or RR16.

One party listens, the other connects; either may be the sender or the
receiver. The receiver learns which of its rows the sender holds; the
sender learns nothing, unless both pass ``reveal=True`` (then the receiver
sends it the intersection, and the sender must trust that report). Both
parties must use the same protocol, ``malicious`` and ``low_comm``
settings, number of key columns and normalisation (checked at the start).
``low_comm=True`` is VOLE-PSI's low-communication mode (semi-honest): about
150 bits per item in all instead of 245 at a million items, at about the
same speed.

Example (two processes, or two threads)::

    # receiver
    psikit.psi.receive(["a", "b", "c"], listen="0.0.0.0:7702")      # -> ['b', 'c']
    # sender
    psikit.psi.send(["b", "c", "d"], connect="host:7702")           # -> None
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Union

from . import _aio, _native
from ._steps import Stepped
from ._data import DEFAULT_NORMALIZE, Columns, Normalize, Progress, ProgressReporter, prepare, result
from ._jobs import _job

__all__ = ["send", "receive", "send_async", "receive_async", "Party", "PROTOCOLS"]

#: The balanced PSIs: ``"vole"`` (VOLE-PSI, fastest, least traffic) and
#: ``"rr16"`` (Rindal-Rosulek, OT extension and garbled Bloom filters), as
#: the native chooser names them. Circuit PSI, which computes on the
#: intersection instead of returning it, is :mod:`psikit.cpsi`.
PROTOCOLS = tuple(_native.PSI_PROTOCOLS)


def _run(
    role: str,
    data: Any,
    key: Columns,
    normalize: Optional[Normalize],
    listen: Optional[str],
    connect: Optional[str],
    protocol: str,
    malicious: bool,
    reveal: bool,
    max_peer_items: int,
    accept_timeout: Optional[float],
    timeout: Optional[float],
    tls: Optional[Dict[str, Any]],
    on_listening: Optional[Callable[[str], None]],
    has_header: bool,
    delimiter: str,
    details: bool,
    progress: Optional[Progress],
    job: Optional[Dict[str, Any]] = None,
    low_comm: bool = False,
) -> Any:
    p = prepare(data, key=key, normalize=normalize, has_header=has_header, delimiter=delimiter)
    if job is not None:
        # Without ``output`` the matched rows come back as a one-shot run's.
        return_rows = job["output"] is None
        with ProgressReporter(progress) as bar:
            out = _native.psi_job(
                role, p.source, protocol=protocol, listen=listen, connect=connect, malicious=malicious,
                reveal=reveal, accept_timeout=accept_timeout, tls=tls, on_listening=on_listening,
                return_rows=return_rows, progress=bar.callback, low_comm=low_comm, **job,
            )
        matches = result(p, out) if "positions" in out else out["matched_rows"]
        return (matches, out) if details else matches
    with ProgressReporter(progress) as bar:
        out = _native.psi_run(
            role, p.source, protocol, listen, connect, malicious, reveal, max_peer_items,
            accept_timeout, 60.0 if timeout is None else timeout, 16, tls, on_listening, bar.callback,
            low_comm=low_comm,
        )
    matches = None if out["output"] is None else result(p, out["output"])
    return (matches, out) if details else matches


def send(
    data: Any,
    *,
    listen: Optional[str] = None,
    connect: Optional[str] = None,
    key: Columns = None,
    normalize: Optional[Normalize] = DEFAULT_NORMALIZE,
    protocol: str = "vole",
    malicious: bool = False,
    low_comm: bool = False,
    reveal: bool = False,
    max_peer_items: int = 1 << 24,
    accept_timeout: Optional[float] = None,
    timeout: Optional[float] = None,
    tls: Optional[Dict[str, Any]] = None,
    on_listening: Optional[Callable[[str], None]] = None,
    has_header: bool = True,
    delimiter: str = ",",
    details: bool = False,
    progress: Optional[Progress] = None,
    job_dir: Optional[str] = None,
    resume: bool = False,
    memory: Union[int, str] = "4G",
    bucket_items: Optional[int] = None,
    lanes: Optional[int] = None,
    retry: float = 600.0,
    output: Optional[str] = None,
) -> Any:
    """The sender's run on ``data``: give ``listen="host:port"`` or
    ``connect="host:port"``. Returns ``None``, or with ``reveal=True`` the
    rows of ``data`` the receiver reported in the intersection (same kind as
    ``data``). ``on_listening(addr)`` is called with the bound address once
    listening (useful with port 0); ``accept_timeout`` bounds the wait.
    ``progress``: ``progress(stage, done, total)`` is told the run's stages
    (waiting for the peer, then the protocol's phases: for VOLE-PSI
    ``"silent VOLE"``, ``"OKVS"``, ``"comparing summaries"``; for RR16
    ``"base OTs"``, ``"OT extension"`` chunk by chunk, ``"comparing
    summaries"``), or ``True`` draws tqdm bars when tqdm is installed.
    ``timeout``: seconds to wait for the peer's next message (default 60,
    600 for a job).

    **Big inputs** (``job_dir=``): the run becomes a bucketed job kept in
    that directory, as ``psikit psi`` runs by default: the input (best a
    CSV or Parquet path) is read once and split into buckets padded to one
    public size, memory stays within ``memory`` (bytes, or ``"4G"``,
    ``"512M"``), and after a crash or a dropped link (retried for
    ``retry`` seconds) the same call with ``resume=True`` continues from
    the buckets both sides committed. Both parties must run jobs (the CLI
    does by default), or both one-shot (Python without ``job_dir``, the
    CLI with ``--one-shot``). With ``output`` (a CSV path) the matched
    rows are written there and the call returns how many there are;
    without, they are returned as a one-shot run returns them (``None``
    when this side learns nothing; a path's rows are read from it again
    once the job has ended). ``lanes``: buckets run at once, each over a
    connection of its own and sharing ``memory`` (default one per 8 cores,
    at most 4; the peer's count caps it). ``progress`` is told ``"reading
    the input"``, ``"splitting into buckets"`` and ``"buckets"``.

    >>> psikit.psi.send(df, key="email", connect="host:7702", normalize=("trim", "lower"))  # doctest: +SKIP
    """
    return _run("send", data, key, normalize, listen, connect, protocol, malicious, reveal,
                max_peer_items, accept_timeout, timeout, tls, on_listening, has_header, delimiter, details,
                progress, _job(job_dir, resume, memory, bucket_items, lanes, retry, timeout, output),
                low_comm=low_comm)


def receive(
    data: Any,
    *,
    listen: Optional[str] = None,
    connect: Optional[str] = None,
    key: Columns = None,
    normalize: Optional[Normalize] = DEFAULT_NORMALIZE,
    protocol: str = "vole",
    malicious: bool = False,
    low_comm: bool = False,
    reveal: bool = False,
    max_peer_items: int = 1 << 24,
    accept_timeout: Optional[float] = None,
    timeout: Optional[float] = None,
    tls: Optional[Dict[str, Any]] = None,
    on_listening: Optional[Callable[[str], None]] = None,
    has_header: bool = True,
    delimiter: str = ",",
    details: bool = False,
    progress: Optional[Progress] = None,
    job_dir: Optional[str] = None,
    resume: bool = False,
    memory: Union[int, str] = "4G",
    bucket_items: Optional[int] = None,
    lanes: Optional[int] = None,
    retry: float = 600.0,
    output: Optional[str] = None,
) -> Any:
    """The receiver's run on ``data``: the rows of ``data`` whose key the
    sender holds, in input order and of the input's kind (a list gives the
    matching items, a table the matching rows, a CSV path a list of dicts).
    ``progress``, ``timeout`` and the job options (``job_dir=`` and the
    rest) as for :func:`send`.

    >>> psikit.psi.receive(["a", "b"], listen="0.0.0.0:7702", protocol="rr16", malicious=True)  # doctest: +SKIP
    ['b']
    """
    return _run("receive", data, key, normalize, listen, connect, protocol, malicious, reveal,
                max_peer_items, accept_timeout, timeout, tls, on_listening, has_header, delimiter, details,
                progress, _job(job_dir, resume, memory, bucket_items, lanes, retry, timeout, output),
                low_comm=low_comm)


async def send_async(data: Any, **kwargs: Any) -> Any:
    """:func:`send` for asyncio, with the same arguments: the run goes on
    in a worker thread while the event loop runs; cancelling the task
    closes the connection (within 100 ms). ``on_listening`` and a
    ``progress`` callback are called on the loop's thread.

    >>> await psikit.psi.send_async(df, key="email", connect="host:7702")  # doctest: +SKIP
    """
    return await _aio.run(send, data, **kwargs)


async def receive_async(data: Any, **kwargs: Any) -> Any:
    """:func:`receive` for asyncio (see :func:`send_async`).

    >>> matches = await psikit.psi.receive_async(["a", "b"], listen="0.0.0.0:7702")  # doctest: +SKIP
    """
    return await _aio.run(receive, data, **kwargs)


class Party(Stepped):
    """One party of a balanced PSI at the message level: bytes in, bytes
    out, over whatever transport the caller has (a message queue, HTTP, a
    distributed engine's shuffle). No sockets, threads or timeouts.

    Start with ``out = party.step()``, deliver ``out`` to the peer (when not
    empty), feed each chunk of the peer's bytes to ``party.step(chunk)``
    (any split: messages delimit themselves), and deliver what it returns,
    until ``party.done``; then ``party.result()`` gives the matching rows
    (as :func:`receive` returns them; for a sender ``None``, or its rows in
    the intersection with ``reveal=True``) or raises the party's error.

    >>> a = psikit.psi.Party("receive", ["x", "y"])
    >>> b = psikit.psi.Party("send", ["y", "z"])
    >>> to_b, to_a = a.step(), b.step()
    >>> while not (a.done and b.done):
    ...     to_b, to_a = a.step(to_a), b.step(to_b)
    >>> a.result()
    ['y']
    """

    def __init__(
        self,
        role: str,
        data: Any,
        *,
        key: Columns = None,
        normalize: Optional[Normalize] = DEFAULT_NORMALIZE,
        protocol: str = "vole",
        malicious: bool = False,
        low_comm: bool = False,
        reveal: bool = False,
        max_peer_items: int = 1 << 24,
        has_header: bool = True,
        delimiter: str = ",",
    ) -> None:
        self._prepared = prepare(data, key=key, normalize=normalize, has_header=has_header, delimiter=delimiter)
        self._native = _native.psi_party(
            role, self._prepared.source, protocol, malicious, reveal, max_peer_items, 16, low_comm
        )

    def result(self) -> Any:
        """The finished party's matching rows, of the input's kind (``None``
        for a sender without reveal); raises its error if it failed."""
        out = self._finished()["output"]
        return None if out is None else result(self._prepared, out)
