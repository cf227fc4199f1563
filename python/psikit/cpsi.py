"""Circuit PSI (``psikit cpsi``): compute on the intersection without
learning it.

Both parties end the protocol with secret shares of "this item is in the
intersection" and compute an application on them; by default the
``receive`` party learns its result and the ``send`` party nothing.

Applications (:data:`APPLICATIONS`):

* ``"cardinality"``: ``|X ∩ Y|``;
* ``"sum"``: ``|X ∩ Y|`` and the sums (mod 2^64) over the intersection of
  each party's ``value_columns`` (rows with the same key add up), revealed
  only if the intersection has at least ``min_intersection`` items; with
  ``inner_product=True`` also ``Σ x·y`` over the intersection (the send
  party's first value column ``x`` times the receive party's first ``y``);
* ``"threshold"``: one bit, whether ``|X ∩ Y| >= threshold``;
* ``"union"``: the learner gets the peer's keys outside the intersection,
  hence the union (``reveal_to`` picks the learner, one party only);
* ``"shares"``: each party gets its XOR shares of membership per bin (and
  additive shares of the send party's values), as a table, for its own
  further computation.

One party listens, the other connects; either may send or receive. Both
must give the same application, ``threshold``, ``reveal_to``,
``min_intersection``, ``ot`` and ``epc``, the same number of key columns
and the same normalisation (checked at the start). The ``receive`` party
holds the cuckoo table: make it the smaller set.

Example (two processes, or two threads)::

    # receiver: learns the size of the intersection and the sum of the
    # sender's "spend" over it
    r = psikit.cpsi.receive("sum", customers, key="email", listen="0.0.0.0:7703")
    r.intersection_size, r.sender_sums          # -> 1234, [567890]
    # sender
    psikit.cpsi.send("sum", purchases, key="email", value_columns=["spend"],
                     connect="host:7703")       # -> CpsiResult(learned=False, ...)
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

from . import _aio, _native
from ._data import DEFAULT_NORMALIZE, Columns, InputError, Normalize, Prepared, _pyarrow, prepare, result
from ._data import Progress, ProgressReporter
from ._jobs import _job
from ._steps import Stepped

__all__ = ["send", "receive", "send_async", "receive_async", "Party", "CpsiResult", "APPLICATIONS"]

#: What circuit PSI computes on the intersection.
APPLICATIONS = ("cardinality", "sum", "threshold", "union", "shares")


@dataclass(frozen=True)
class CpsiResult:
    """What one party learned from a circuit PSI run. Fields of results
    this party did not learn (not revealed to it, or of another
    application) are ``None``.

    * ``learned``: whether the result was revealed to this party;
    * ``intersection_size``: cardinality and sum;
    * ``sender_sums`` / ``receiver_sums``: sum, one per value column of the
      ``send`` / ``receive`` party (empty lists when it gave none);
    * ``inner_product``: sum with ``inner_product=True``: ``Σ x·y`` mod
      2^64 over the intersection of the send party's first value column
      ``x`` and the receive party's first ``y``;
    * ``withheld``: sum with ``min_intersection``: ``True`` when the
      intersection was smaller and no sum was revealed (both parties learn
      this), ``False`` when it was reached;
    * ``threshold_reached``: threshold;
    * ``union``: union, at its learner: this party's rows (those with a key)
      followed by one row per key of the peer outside the intersection, in
      the input's kind (a list: items; a DataFrame, fresh index, or a
      pyarrow Table: rows whose key columns hold the peer's normalised key
      and the other columns missing; a CSV path: dicts);
    * ``shares``: shares, a table with one row per bin of the receive
      party's cuckoo table: ``bin``, ``share`` (0/1; XOR both parties'
      shares for membership), ``value_share_1..`` (shares mod 2^64 of the
      send party's values, meaningful where the bin is a member; add both
      parties'), and at the ``receive`` party ``key`` (its normalised key
      in the bin, ``None`` for an empty bin) and ``row`` (the 0-based
      position in the input of the first row with that key). A pandas
      DataFrame or pyarrow Table for those inputs, else a list of dicts;
    * ``bytes_sent``, ``bytes_received``: this party's traffic.
    """

    application: str
    learned: bool
    intersection_size: Optional[int] = None
    sender_sums: Optional[List[int]] = None
    receiver_sums: Optional[List[int]] = None
    inner_product: Optional[int] = None
    withheld: Optional[bool] = None
    threshold_reached: Optional[bool] = None
    union: Any = None
    shares: Any = None
    bytes_sent: int = 0
    bytes_received: int = 0


def _text_fields(p: Prepared, fields: List[bytes]) -> Any:
    """A key's fields as the input's items hold them: ``bytes`` for a list
    of bytes items, else ``str``; a tuple for a composite key."""
    as_bytes = p.kind == "list" and any(isinstance(f, bytes) for f in _first_item(p))
    vals = [f if as_bytes else f.decode("utf-8", errors="replace") for f in fields]
    return vals[0] if len(vals) == 1 else tuple(vals)


def _first_item(p: Prepared) -> List[Any]:
    if not p.data:
        return []
    first = p.data[0]
    return list(first) if isinstance(first, tuple) else [first]


def _key_names(p: Prepared, headers: Optional[List[str]]) -> List[str]:
    """The key columns' names in a CSV result's dicts (``#N`` resolved
    through the header when there is one)."""
    names = []
    for k in p.keys:
        spec = k.strip()
        at = int(spec[1:]) if spec.startswith("#") and spec[1:].isdigit() else None
        names.append(headers[at] if at is not None and headers is not None and at < len(headers) else spec)
    return names


def _union(p: Prepared, own_out: Dict[str, Any], peer_keys: List[List[bytes]]) -> Any:
    own = result(p, own_out)
    peer = [_text_fields(p, k) for k in peer_keys]
    if p.kind == "list":
        return own + peer
    cols = [[(v if isinstance(v, tuple) else (v,))[j] for v in peer] for j in range(len(p.keys))]
    if p.kind == "pandas":
        import pandas as pd

        extra = pd.DataFrame({name: col for name, col in zip(p.keys, cols)}, columns=list(own.columns))
        return pd.concat([own, extra], ignore_index=True)
    if p.kind == "arrow":
        pa = _pyarrow()
        arrays = []
        for f in own.schema:
            if f.name in p.keys:
                arr = pa.array(cols[p.keys.index(f.name)], type=pa.string())
                try:
                    arr = arr.cast(f.type)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                    raise InputError(
                        f"the peer's keys do not fit the type {f.type} of key column {f.name!r}; "
                        "give the key columns as strings"
                    ) from None
                arrays.append(arr)
            else:
                arrays.append(pa.nulls(len(peer), type=f.type))
        return pa.concat_tables([own, pa.Table.from_arrays(arrays, schema=own.schema)])
    names = _key_names(p, own_out.get("headers"))
    return list(own) + [dict(zip(names, col)) for col in zip(*cols)]


def _shares(p: Prepared, columns: Dict[str, List[Any]]) -> Any:
    if "key" in columns:
        columns = dict(columns)
        columns["key"] = [None if k is None else _text_fields(p, k) for k in columns["key"]]
    if p.kind == "pandas":
        import pandas as pd

        return pd.DataFrame(columns)
    if p.kind == "arrow":
        pa = _pyarrow()
        if "key" in columns:
            columns["key"] = [list(k) if isinstance(k, tuple) else k for k in columns["key"]]
        return pa.table({name: pa.array(col, type=pa.uint64() if name.startswith("value_share") else None)
                         for name, col in columns.items()})
    names = list(columns)
    return [dict(zip(names, row)) for row in zip(*columns.values())]


def _prepare(data: Any, key: Columns, normalize: Optional[Normalize], value_columns: Columns,
             has_header: bool, delimiter: str) -> Tuple[Prepared, List[str]]:
    """The party's input and its value columns' names."""
    values: List[str] = [value_columns] if isinstance(value_columns, str) else list(value_columns or [])
    path = isinstance(data, (str, os.PathLike))
    if values and isinstance(data, (list, tuple, dict)):
        raise InputError("value_columns go with tables and CSV paths; a list holds the keys only")
    # Tables carry their value columns as extra columns; in a CSV file the
    # native side finds them by name, as the CLI does.
    p = prepare(data, key=key, normalize=normalize, label=None if path else values, label_role="value",
                has_header=has_header, delimiter=delimiter)
    return p, values


def _result(p: Prepared, out: Dict[str, Any]) -> CpsiResult:
    return CpsiResult(
        application=out["application"],
        learned=out["learned"],
        intersection_size=out.get("intersection_size"),
        sender_sums=out.get("sender_sums"),
        receiver_sums=out.get("receiver_sums"),
        inner_product=out.get("inner_product"),
        withheld=out.get("withheld"),
        threshold_reached=out.get("threshold_reached"),
        union=_union(p, out["own"], out["peer_keys"]) if "own" in out else None,
        shares=_shares(p, out["shares"]) if "shares" in out else None,
        bytes_sent=out["bytes_sent"],
        bytes_received=out["bytes_received"],
    )


def _run(role: str, application: str, data: Any, key: Columns, normalize: Optional[Normalize],
         value_columns: Columns, threshold: Optional[int], reveal_to: str, min_intersection: int,
         inner_product: bool, product_bits: int, ot: str,
         epc: Union[str, int], listen: Optional[str], connect: Optional[str], max_peer_items: int,
         accept_timeout: Optional[float], timeout: float, tls: Optional[Dict[str, Any]],
         on_listening: Optional[Callable[[str], None]], has_header: bool, delimiter: str,
         progress: Optional[Progress], job: Optional[Dict[str, Any]]) -> CpsiResult:
    p, values = _prepare(data, key, normalize, value_columns, has_header, delimiter)
    if job is not None:
        with ProgressReporter(progress) as bar:
            out = _native.cpsi_job(
                application, role, p.source, value_columns=values, threshold=threshold, reveal_to=reveal_to,
                min_intersection=min_intersection, inner_product=inner_product, product_bits=product_bits,
                ot=ot, epc=str(epc), listen=listen, connect=connect, accept_timeout=accept_timeout, tls=tls,
                on_listening=on_listening, progress=bar.callback, **job,
            )
        return _result(p, out)
    with ProgressReporter(progress) as bar:
        out = _native.cpsi_run(
            application, role, p.source, values, threshold, reveal_to, min_intersection, inner_product,
            product_bits, ot, str(epc),
            listen, connect, max_peer_items, accept_timeout, 60.0 if timeout is None else timeout, 16, tls,
            on_listening, bar.callback,
        )
    return _result(p, out)


def receive(
    application: str,
    data: Any,
    *,
    listen: Optional[str] = None,
    connect: Optional[str] = None,
    key: Columns = None,
    normalize: Optional[Normalize] = DEFAULT_NORMALIZE,
    value_columns: Columns = None,
    threshold: Optional[int] = None,
    reveal_to: str = "receiver",
    min_intersection: int = 0,
    inner_product: bool = False,
    product_bits: int = 32,
    ot: str = "silent",
    epc: Union[str, int] = "auto",
    max_peer_items: int = 1 << 24,
    accept_timeout: Optional[float] = None,
    timeout: Optional[float] = None,
    tls: Optional[Dict[str, Any]] = None,
    on_listening: Optional[Callable[[str], None]] = None,
    has_header: bool = True,
    delimiter: str = ",",
    progress: Optional[Progress] = None,
    job_dir: Optional[str] = None,
    resume: bool = False,
    memory: Union[int, str] = "4G",
    bucket_items: Optional[int] = None,
    lanes: Optional[int] = None,
    retry: float = 600.0,
    output: Optional[str] = None,
) -> CpsiResult:
    """The ``receive`` party's run of ``application`` on ``data`` (it holds
    the cuckoo table; best the smaller set). Give ``listen="host:port"`` or
    ``connect="host:port"``. Returns a :class:`CpsiResult`.

    * ``value_columns``: sum only, columns of unsigned integers (tables and
      CSV paths; rows with the same key add up mod 2^64);
    * ``threshold``: threshold only, required;
    * ``reveal_to``: who learns the result, ``"receiver"`` (default),
      ``"sender"`` or ``"both"`` (the union: one of the first two);
    * ``min_intersection``: sum only, reveal the sums only if the
      intersection has at least this many items;
    * ``inner_product``: sum only, also reveal ``Σ x·y`` over the
      intersection of the send party's first value column ``x`` and the
      receive party's first ``y`` (both parties give it, each with a value
      column); ``product_bits`` (1 to 64, default 32, both parties alike)
      bounds ``y``: every per-key sum of the receive party's first value
      column must be below ``2^product_bits``. It costs ``product_bits``
      OTs and about ``6.5·product_bits`` bytes per bin (at 32 bits about
      doubling the run);
    * ``ot``: ``"silent"`` (little traffic), ``"iknp"`` (fast links) or
      ``"kk13"`` (KK13 1-out-of-16 OTs and the CGS equality);
      ``epc``: ``"auto"``, ``"off"`` or 16 to 31 bits;
    * ``on_listening(addr)``, ``accept_timeout``, ``timeout``, ``tls``: as
      in :func:`psikit.psi.receive`;
    * ``job_dir``, ``resume``, ``memory``, ``bucket_items``, ``lanes``, ``retry``,
      ``output``: every application as a
      bucketed, resumable job for big
      inputs, as in :func:`psikit.psi.receive` and ``psikit cpsi ...``
      (a job by default; ``--one-shot`` to meet a Python party without
      ``job_dir``): each bucket's result stays in secret shares and only
      the whole job's result is opened; the shares application writes
      each bucket's shares to ``output`` (a CSV path, required:
      ``bucket,bin,share,value_share_1..`` and at the receive party ``row``,
      the 1-based input row of the bin's key) and returns
      ``shares=None``; the union's learner writes the union's keys there
      (one column, ``key``) and returns ``union=None``;
    * ``progress``: ``progress(stage, done, total)`` is told the run's
      stages (waiting for the peer, ``"hashing"``, ``"OPPRF"``,
      ``"comparing"``, ``"computing the result"``), or ``True`` draws tqdm
      bars when tqdm is installed.

    Raises :class:`psikit.InputError` for bad input (a missing key or value
    column, a value that is not an unsigned integer, an option of another
    application, no threshold, an inner product without value columns or
    with a receive party's value of ``2^product_bits`` or more) and :class:`psikit.ProtocolError` when the
    peer fails or runs other settings.

    >>> r = psikit.cpsi.receive("cardinality", ["a", "b", "c"], listen="0.0.0.0:7703")  # doctest: +SKIP
    >>> r.intersection_size  # doctest: +SKIP
    2
    >>> r = psikit.cpsi.receive("sum", df, key="email", value_columns="price", inner_product=True,
    ...                         listen="0.0.0.0:7703")  # doctest: +SKIP
    >>> r.inner_product  # Σ quantity·price over the common keys  # doctest: +SKIP
    91250
    >>> psikit.cpsi.receive("threshold", df, key="email", threshold=100,
    ...                     connect="peer:7703").threshold_reached  # doctest: +SKIP
    True
    """
    return _run("receive", application, data, key, normalize, value_columns, threshold, reveal_to,
                min_intersection, inner_product, product_bits, ot, epc, listen, connect, max_peer_items,
                accept_timeout, timeout, tls, on_listening, has_header, delimiter, progress,
                _job(job_dir, resume, memory, bucket_items, lanes, retry, timeout, output))


def send(
    application: str,
    data: Any,
    *,
    listen: Optional[str] = None,
    connect: Optional[str] = None,
    key: Columns = None,
    normalize: Optional[Normalize] = DEFAULT_NORMALIZE,
    value_columns: Columns = None,
    threshold: Optional[int] = None,
    reveal_to: str = "receiver",
    min_intersection: int = 0,
    inner_product: bool = False,
    product_bits: int = 32,
    ot: str = "silent",
    epc: Union[str, int] = "auto",
    max_peer_items: int = 1 << 24,
    accept_timeout: Optional[float] = None,
    timeout: Optional[float] = None,
    tls: Optional[Dict[str, Any]] = None,
    on_listening: Optional[Callable[[str], None]] = None,
    has_header: bool = True,
    delimiter: str = ",",
    progress: Optional[Progress] = None,
    job_dir: Optional[str] = None,
    resume: bool = False,
    memory: Union[int, str] = "4G",
    bucket_items: Optional[int] = None,
    lanes: Optional[int] = None,
    retry: float = 600.0,
    output: Optional[str] = None,
) -> CpsiResult:
    """The ``send`` party's run of ``application`` on ``data``: the
    counterpart of :func:`receive`, with the same options. It learns
    nothing unless ``reveal_to`` is ``"sender"`` or ``"both"``; in the
    shares application its ``value_columns`` are shared with the receiver.

    >>> psikit.cpsi.send("sum", "purchases.csv", key="email", value_columns="spend",
    ...                  connect="peer:7703")  # doctest: +SKIP
    CpsiResult(application='sum', learned=False, ...)
    >>> u = psikit.cpsi.send("union", ["a", "b"], reveal_to="sender", listen="0.0.0.0:7703")  # doctest: +SKIP
    >>> u.union  # doctest: +SKIP
    ['a', 'b', 'c']
    """
    return _run("send", application, data, key, normalize, value_columns, threshold, reveal_to,
                min_intersection, inner_product, product_bits, ot, epc, listen, connect, max_peer_items,
                accept_timeout, timeout, tls, on_listening, has_header, delimiter, progress,
                _job(job_dir, resume, memory, bucket_items, lanes, retry, timeout, output))


async def send_async(application: str, data: Any, **kwargs: Any) -> CpsiResult:
    """:func:`send` for asyncio, with the same arguments: the run goes on
    in a worker thread while the event loop runs; cancelling the task
    closes the connection (within 100 ms). ``on_listening`` and a
    ``progress`` callback are called on the loop's thread.

    >>> r = await psikit.cpsi.send_async("cardinality", df, key="email", connect="host:7703")  # doctest: +SKIP
    """
    return await _aio.run(send, application, data, **kwargs)


async def receive_async(application: str, data: Any, **kwargs: Any) -> CpsiResult:
    """:func:`receive` for asyncio (see :func:`send_async`).

    >>> r = await psikit.cpsi.receive_async("threshold", df, key="email", threshold=100,
    ...                                     listen="0.0.0.0:7703")  # doctest: +SKIP
    """
    return await _aio.run(receive, application, data, **kwargs)


class Party(Stepped):
    """One party of circuit PSI at the message level: bytes in, bytes out,
    over whatever transport the caller has (a message queue, HTTP, a
    distributed engine's shuffle). No sockets, threads or timeouts. The
    same API as every family's message level (:class:`psikit.psi.Party`,
    :class:`psikit.he.Query`, :class:`psikit.filter.Query`).

    ``role`` is ``"send"`` or ``"receive"``; ``application``, ``data`` and
    the options are those of :func:`receive` and :func:`send` (checked the
    same way), without the network ones.

    Drive it with :meth:`step`: the peer's bytes in (none to start; any
    split: messages delimit themselves), the bytes to deliver to the peer
    out (possibly empty); ``peer_closed=True`` says the peer hung up. Keep
    exchanging until :attr:`done`; then :meth:`result` gives the
    :class:`CpsiResult` (as :func:`receive` returns it) or raises the
    party's error: :class:`psikit.ProtocolError` for malformed or
    unexpected bytes, a peer that hung up or one running other settings.

    >>> a = psikit.cpsi.Party("receive", "cardinality", ["x", "y"])
    >>> b = psikit.cpsi.Party("send", "cardinality", ["y", "z"])
    >>> to_b, to_a = a.step(), b.step()
    >>> while not (a.done and b.done):
    ...     to_b, to_a = a.step(to_a), b.step(to_b)
    >>> a.result().intersection_size
    1

    :meth:`push`, :meth:`peer_closed`, :meth:`advance` and
    :meth:`take_outgoing` (this class's first API) still work and are
    deprecated: :meth:`step` does the three.
    """

    def __init__(
        self,
        role: str,
        application: str,
        data: Any,
        *,
        key: Columns = None,
        normalize: Optional[Normalize] = DEFAULT_NORMALIZE,
        value_columns: Columns = None,
        threshold: Optional[int] = None,
        reveal_to: str = "receiver",
        min_intersection: int = 0,
        inner_product: bool = False,
        product_bits: int = 32,
        ot: str = "silent",
        epc: Union[str, int] = "auto",
        max_peer_items: int = 1 << 24,
        has_header: bool = True,
        delimiter: str = ",",
    ) -> None:
        self._prepared, values = _prepare(data, key, normalize, value_columns, has_header, delimiter)
        self._native = _native.cpsi_party(
            application, role, self._prepared.source, values, threshold, reveal_to, min_intersection,
            inner_product, product_bits, ot, str(epc), max_peer_items, 16,
        )
        self._pushed: List[bytes] = []
        self._closed = False
        self._written = b""

    def result(self) -> CpsiResult:
        """The finished party's :class:`CpsiResult`; raises its error if it
        failed, :class:`psikit.InputError` if it has not finished."""
        return _result(self._prepared, self._finished())

    def push(self, incoming: bytes) -> None:
        """Deprecated: pass the bytes to :meth:`step`. Keeps the peer's
        bytes for the next :meth:`advance`."""
        _deprecated("push")
        self._pushed.append(bytes(incoming))

    def peer_closed(self) -> None:
        """Deprecated: ``step(peer_closed=True)``. Says the peer hung up."""
        _deprecated("peer_closed")
        self._closed = True

    def advance(self) -> bool:
        """Deprecated: use :meth:`step`. Runs the party on the bytes pushed
        as far as it can go; returns whether it has finished."""
        _deprecated("advance")
        incoming, self._pushed = b"".join(self._pushed), []
        self._written += self.step(incoming, peer_closed=self._closed)
        return self.done

    def take_outgoing(self) -> bytes:
        """Deprecated: :meth:`step` returns these bytes. The bytes written
        since the last call, to deliver to the peer in order."""
        _deprecated("take_outgoing")
        out, self._written = self._written, b""
        return out


def _deprecated(method: str) -> None:
    warnings.warn(
        f"psikit.cpsi.Party.{method} is deprecated: use step(incoming, peer_closed=...)",
        DeprecationWarning,
        stacklevel=3,
    )
