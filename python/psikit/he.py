"""Unbalanced labeled PSI with homomorphic encryption (``psikit he``, the
APSI design).

The server builds a database of keys and *labels* (extra columns) with
:func:`build_db`, changes it with :func:`update_db` and serves it with
:class:`psikit.Server` (``he_state=``) or ``psikit serve --he-state``. A
client sends its keys encrypted under its own key and gets back, for the
keys the server holds, their labels (:func:`query`); nothing is downloaded
in advance. Both parties are assumed semi-honest.

Example::

    import psikit
    psikit.he.build_db({"a@x.org": "gold", "b@x.org": "silver"}, "he-srv")
    with psikit.Server(he_state="he-srv") as server:
        psikit.he.query(server.addr, ["b@x.org", "c@x.org"])
    # -> {'b@x.org': 'silver'}
"""

from __future__ import annotations

import os
from typing import Any, Dict, Optional, Sequence, Union

from . import _aio, _native
from ._data import DEFAULT_NORMALIZE, Columns, Normalize, Progress, ProgressReporter, prepare, result
from ._steps import Stepped

PathLike = Union[str, "os.PathLike[str]"]

__all__ = ["build_db", "update_db", "query", "query_async", "Client", "Query"]


def build_db(
    data: Any,
    state: PathLike,
    *,
    key: Columns = None,
    label: Columns = None,
    normalize: Optional[Normalize] = DEFAULT_NORMALIZE,
    params: Optional[PathLike] = None,
    max_label_bytes: Optional[int] = None,
    capacity: Optional[int] = None,
    client_items: int = 1024,
    goal: str = "time",
    fpp_bits: int = 40,
    force: bool = False,
    has_header: bool = True,
    delimiter: str = ",",
    progress: Optional[Progress] = None,
    shards: Optional[int] = None,
) -> Dict[str, Any]:
    """Builds a database (and its OPRF key) in the directory ``state``.

    ``data``: a table or CSV path with ``key=`` and ``label=`` columns, a
    ``dict`` mapping item -> label (a ``str``/``bytes``, or a tuple for
    several label columns), or a list of items (an unlabeled database).
    Parameters come from ``params`` (APSI's JSON format) or are chosen for
    ``capacity`` (default: the rows read), ``client_items`` and the labels
    (``goal``: ``"time"`` or ``"comm"``; at most ``2**-fpp_bits``
    false-positive probability per query). ``progress`` as for
    :func:`psikit.filter.setup` (stages ``"reading"``, ``"choosing
    parameters"``, ``"OPRF"``, ``"filling bin bundles"``); Ctrl-C stops the
    build while it reads or evaluates the OPRF (``KeyboardInterrupt``),
    leaving the directory as it was.

    ``shards=N`` (a power of two) splits the database for several machines:
    ``state/router`` (the OPRF key and the manifest) and ``state/shard-0``
    .. ``shard-{N-1}``, each served by a :class:`psikit.Server`
    (``he_state=``) and all reached through one router server
    (``he_router=``, ``he_shards=[...]``); every query goes to every shard,
    so clients see one database (see docs/he-psi.md, "Sharded databases").

    >>> psikit.he.build_db(df, "./he-srv", key="email", label=["name", "tier"])  # doctest: +SKIP
    {'items': 4096, 'max_label_bytes': 17, ...}
    """
    p = prepare(
        data, key=key, label=label, normalize=normalize, has_header=has_header,
        delimiter=delimiter, allow_dict=True,
    )
    with ProgressReporter(progress) as bar:
        return _native.he_build_db(
            p.source,
            os.fspath(state),
            None if params is None else os.fspath(params),
            max_label_bytes,
            capacity,
            client_items,
            goal,
            fpp_bits,
            force,
            bar.callback,
            shards,
        )


def update_db(
    state: PathLike,
    *,
    add: Any = None,
    remove: Any = None,
    key: Columns = None,
    label: Columns = None,
    normalize: Optional[Normalize] = DEFAULT_NORMALIZE,
    has_header: bool = True,
    delimiter: str = ",",
    progress: Optional[Progress] = None,
) -> Dict[str, Any]:
    """Removes the keys of ``remove``, then adds (or relabels) the rows of
    ``add``; running servers reload the database. A labeled database takes
    labels with every addition (``label=`` columns, or a dict).
    ``progress`` and Ctrl-C as for :func:`build_db` (an interrupted update
    changes nothing). A database built with ``shards=`` is updated through
    its router's key, every shard at the next epoch; routers switch to it
    once every shard has it.

    >>> psikit.he.update_db("./he-srv", add={"new@x.org": "bronze"}, remove=["gone@x.org"])  # doctest: +SKIP
    """
    kw: Dict[str, Any] = dict(key=key, normalize=normalize, has_header=has_header, delimiter=delimiter)
    a = prepare(add, label=label, allow_dict=True, **kw).source if add is not None else None
    r = prepare(remove, **kw).source if remove is not None else None
    with ProgressReporter(progress) as bar:
        return _native.he_update_db(os.fspath(state), a, r, bar.callback)


def query(
    server: str,
    data: Any,
    *,
    key: Columns = None,
    normalize: Optional[Normalize] = DEFAULT_NORMALIZE,
    pad_to: Optional[int] = None,
    label_names: Sequence[str] = (),
    has_header: bool = True,
    delimiter: str = ",",
    timeout: float = 60.0,
    tls: Optional[Dict[str, Any]] = None,
    details: bool = False,
    progress: Optional[Progress] = None,
) -> Any:
    """The rows of ``data`` whose key the HE server at ``server`` holds, with
    their labels, in the input's kind: a list gives a dict item -> label
    (a ``str``, or a tuple for several label columns; a plain list of items
    for an unlabeled database), a DataFrame / Arrow table the matching rows
    with the label columns appended, a CSV path a list of dicts.

    Label columns are named by ``label_names``, else as the server's
    database names them, else ``label`` / ``label_1..label_k``, as the CLI
    names them. ``pad_to`` adds random
    dummies so the server learns that size instead of the number of items.
    ``progress`` is told the stages (``"parameters and keys"``,
    ``"query"``), as for :func:`build_db`.

    >>> psikit.he.query("host:7700", ["a@x.org"], normalize=("trim", "lower"))  # doctest: +SKIP
    {'a@x.org': 'gold'}
    """
    p = prepare(data, key=key, normalize=normalize, has_header=has_header, delimiter=delimiter)
    with ProgressReporter(progress) as bar:
        out = _native.he_query(server, p.source, pad_to, list(label_names), timeout, 16, tls, bar.callback)
    matches = result(p, out, out["label_names"])
    return (matches, out) if details else matches


async def query_async(server: str, data: Any, **kwargs: Any) -> Any:
    """:func:`query` for asyncio, with the same arguments: the query goes
    on in a worker thread while the event loop runs; cancelling the task
    closes the connection (within 100 ms). A ``progress`` callback is
    called on the loop's thread.

    >>> rows = await psikit.he.query_async("host:7700", df, key="email")  # doctest: +SKIP
    """
    return await _aio.run(query, server, data, **kwargs)



class Client:
    """A client of one HE server that keeps the database's parameters and
    its own keys between queries: each query after the first skips the
    parameter round trip and key generation. When the server's database
    changes parameters or OPRF key, the client fetches them again and
    retries once, by itself. Thread-safe (calls take turns).

    >>> client = psikit.he.Client("host:7700")  # doctest: +SKIP
    >>> client.query(["a@x.org"], normalize=("trim", "lower"))  # doctest: +SKIP
    {'a@x.org': 'gold'}
    >>> rows = await client.query_async(df, key="email")  # doctest: +SKIP
    """

    def __init__(
        self,
        server: str,
        *,
        timeout: float = 60.0,
        tls: Optional[Dict[str, Any]] = None,
    ) -> None:
        self._native = _native.HeClient(server, timeout, 16, tls)

    @property
    def server(self) -> str:
        """The server's ``host:port``."""
        return self._native.server

    def query(
        self,
        data: Any,
        *,
        key: Columns = None,
        normalize: Optional[Normalize] = DEFAULT_NORMALIZE,
        pad_to: Optional[int] = None,
        label_names: Sequence[str] = (),
        has_header: bool = True,
        delimiter: str = ",",
        details: bool = False,
        progress: Optional[Progress] = None,
    ) -> Any:
        """The rows of ``data`` the server holds, with their labels, as
        :func:`query` returns them; ``info["setup_secs"]`` (with
        ``details=True``) is 0 when the kept keys were used."""
        p = prepare(data, key=key, normalize=normalize, has_header=has_header, delimiter=delimiter)
        with ProgressReporter(progress) as bar:
            out = self._native.query(p.source, pad_to, list(label_names), bar.callback)
        matches = result(p, out, out["label_names"])
        return (matches, out) if details else matches

    async def query_async(self, data: Any, **kwargs: Any) -> Any:
        """:meth:`query` for asyncio, with the same arguments; cancelling
        the task closes the connection (within 100 ms)."""
        return await _aio.run(self.query, data, **kwargs)

    def __repr__(self) -> str:
        return f"psikit.he.Client({self.server!r})"

class Query(Stepped):
    """A query at the message level: bytes in, bytes out, over whatever
    transport the caller has (HTTP, a message queue). No sockets, threads
    or timeouts. The server's side is :meth:`psikit.Server.respond`, which
    needs no port (``psikit.Server(listen=None, he_state=...)``).

    Start with ``request = query.step()``, carry ``request`` to the server,
    give its answer to ``query.step(answer)`` and carry what that returns,
    until ``query.done`` (three exchanges: parameters, OPRF, the encrypted
    query; more when the query needs several rounds); then
    ``query.result()`` gives what :func:`query` returns, or raises the
    query's error (the server's, for a bad request). Each exchange stands
    alone, so the requests may go to different processes serving the same
    database.

    >>> server = psikit.Server(listen=None, he_state="he-srv")  # doctest: +SKIP
    >>> q = psikit.he.Query(["a@x.org", "c@x.org"])  # doctest: +SKIP
    >>> request = q.step()  # doctest: +SKIP
    >>> while not q.done:  # doctest: +SKIP
    ...     request = q.step(server.respond(request))
    >>> q.result()  # doctest: +SKIP
    {'a@x.org': 'gold'}
    """

    def __init__(
        self,
        data: Any,
        *,
        key: Columns = None,
        normalize: Optional[Normalize] = DEFAULT_NORMALIZE,
        pad_to: Optional[int] = None,
        label_names: Sequence[str] = (),
        has_header: bool = True,
        delimiter: str = ",",
    ) -> None:
        self._prepared = prepare(data, key=key, normalize=normalize, has_header=has_header, delimiter=delimiter)
        self._native = _native.he_query_party(self._prepared.source, pad_to, list(label_names), 16)

    def result(self, *, details: bool = False) -> Any:
        """The matching rows with their labels, as :func:`query` returns
        them (``(matches, info)`` with ``details=True``)."""
        out = self._finished()
        matches = result(self._prepared, out, out["label_names"])
        return (matches, out) if details else matches
