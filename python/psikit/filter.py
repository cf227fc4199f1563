"""Unbalanced PSI with an updatable cuckoo filter (``psikit filter``).

The server holds a large set; it builds a *state directory* once
(:func:`setup`), changes it with :func:`update`, and serves it with
:class:`psikit.Server` (or ``psikit serve --filter-state DIR``). A client
downloads the filter once (about 37 bits per server item), keeps it
current with small deltas (``cache=``), and finds which of its items the
server holds with :func:`query`: one round trip per query.

Example::

    import psikit
    psikit.filter.setup(["a@x.org", "b@x.org"], "srv", normalize=("trim", "lower"))
    with psikit.Server(filter_state="srv") as server:
        psikit.filter.query(server.addr, ["B@x.org ", "c@x.org"], normalize=("trim", "lower"))
    # -> ['B@x.org ']
"""

from __future__ import annotations

import os
from typing import Any, Dict, Optional, Union

from . import _aio, _native
from ._data import DEFAULT_NORMALIZE, Columns, Normalize, Progress, ProgressReporter, prepare, result
from ._steps import Stepped

PathLike = Union[str, "os.PathLike[str]"]

__all__ = ["setup", "update", "query", "query_async", "Client", "Query"]


def setup(
    data: Any,
    state: PathLike,
    *,
    key: Columns = None,
    normalize: Optional[Normalize] = DEFAULT_NORMALIZE,
    fpr_bits: int = 30,
    bucket_size: int = 4,
    load: float = 0.90,
    force: bool = False,
    has_header: bool = True,
    delimiter: str = ",",
    progress: Optional[Progress] = None,
) -> Dict[str, Any]:
    """Builds a server state in the directory ``state`` from ``data``.

    ``data`` is a list of items (``str``/``bytes``, or tuples for a composite
    key), a DataFrame or Arrow table with ``key=`` naming the key column(s),
    or a CSV path (``key=`` a header name or ``"#N"``). A fresh OPRF key is
    made; a directory that holds a state is refused unless ``force=True``
    (then every client downloads the new filter). ``progress`` is called as
    ``progress(stage, done, total)``; ``progress=True`` draws tqdm bars when
    tqdm is installed. Ctrl-C stops the set-up within about a batch of
    OPRF evaluations (``KeyboardInterrupt``), leaving the directory as it
    was.

    Returns counts: ``items``, ``epoch``, ``filter_bytes``, ``bits_per_item``,
    ``fpr`` (per client item), ``rows_read``, ``rows_skipped``, ``duplicates``.

    >>> psikit.filter.setup("server.csv", "./srv", key="email", normalize=("trim", "lower"))  # doctest: +SKIP
    """
    p = prepare(data, key=key, normalize=normalize, has_header=has_header, delimiter=delimiter)
    with ProgressReporter(progress) as bar:
        return _native.filter_setup(
            p.source, os.fspath(state), fpr_bits, bucket_size, load, force, bar.callback
        )


def update(
    state: PathLike,
    *,
    add: Any = None,
    remove: Any = None,
    key: Columns = None,
    normalize: Optional[Normalize] = DEFAULT_NORMALIZE,
    has_header: bool = True,
    delimiter: str = ",",
    progress: Optional[Progress] = None,
) -> Dict[str, Any]:
    """Adds the items of ``add`` and removes those of ``remove`` as one new
    epoch. Running servers pick the change up; clients download only the
    changed slots. Use the key columns and normalisation of :func:`setup`.
    ``progress`` and Ctrl-C as for :func:`setup` (an interrupted update
    changes nothing).

    >>> psikit.filter.update("./srv", add=["new@x.org"], remove=["gone@x.org"])  # doctest: +SKIP
    {'added': 1, 'removed': 1, 'epoch': 1, ...}
    """
    kw: Dict[str, Any] = dict(key=key, normalize=normalize, has_header=has_header, delimiter=delimiter)
    a = prepare(add, **kw).source if add is not None else None
    r = prepare(remove, **kw).source if remove is not None else None
    with ProgressReporter(progress) as bar:
        return _native.filter_update(os.fspath(state), a, r, bar.callback)


def query(
    server: str,
    data: Any,
    *,
    key: Columns = None,
    normalize: Optional[Normalize] = DEFAULT_NORMALIZE,
    cache: Optional[PathLike] = None,
    has_header: bool = True,
    delimiter: str = ",",
    timeout: float = 60.0,
    max_filter_mib: int = 4096,
    tls: Optional[Dict[str, Any]] = None,
    details: bool = False,
    progress: Optional[Progress] = None,
    tag_cache: Optional[PathLike] = None,
) -> Any:
    """The rows of ``data`` whose key the server at ``server`` (``host:port``)
    holds, in input order and of the input's kind: a list gives the matching
    items, a DataFrame / Arrow table the matching rows, a CSV path a list of
    dicts (header -> value).

    ``cache`` is a file keeping the filter between calls (only what changed
    is downloaded next time); without it the filter is downloaded each call.
    ``tag_cache`` is an owner-only file keeping this query's items' OPRF
    tags, so the next call asks the server only for items it has not asked
    before (and notices a server key change by itself); it holds a hash of
    each item, so keep it like the data.
    ``tls={"ca": "ca.pem"}`` (and optionally ``server_name``, ``client_cert``,
    ``client_key``) connects with TLS. With ``details=True`` the result is
    ``(matches, info)``, ``info`` holding the syncs, byte counts and counts
    (``cached``: items answered from the tag cache).
    ``progress`` is told the stages (``"sync"``, ``"query"``; again if the
    server updated in between), as for :func:`setup`.

    >>> psikit.filter.query("host:7700", df, key="email", normalize=("trim", "lower"), cache="f.cache")  # doctest: +SKIP
    """
    p = prepare(data, key=key, normalize=normalize, has_header=has_header, delimiter=delimiter)
    with ProgressReporter(progress) as bar:
        out = _native.filter_query(
            server, p.source, None if cache is None else os.fspath(cache), max_filter_mib, timeout, 16, tls,
            bar.callback, None if tag_cache is None else os.fspath(tag_cache),
        )
    matches = result(p, out)
    return (matches, out) if details else matches


async def query_async(server: str, data: Any, **kwargs: Any) -> Any:
    """:func:`query` for asyncio, with the same arguments: the query goes
    on in a worker thread while the event loop runs; cancelling the task
    closes the connection (within 100 ms). A ``progress`` callback is
    called on the loop's thread.

    >>> matches = await psikit.filter.query_async("host:7700", df, key="email")  # doctest: +SKIP
    """
    return await _aio.run(query, server, data, **kwargs)


class Client:
    """A filter client that keeps its copy of the server's filter between
    queries: in memory, and in ``cache`` (a file) if given, so that each
    query downloads only what changed on the server since the last one.
    With ``tag_cache`` (a file, see :func:`query`) each query also asks the
    server only for the items that were not in the previous query.
    Thread-safe (calls take turns).

    >>> client = psikit.filter.Client("host:7700", cache="filter.cache")  # doctest: +SKIP
    >>> client.sync()  # doctest: +SKIP
    {'kind': 'full', 'epoch': 3, 'bytes': 4718592}
    >>> client.query(df, key="email", normalize=("trim", "lower"))  # doctest: +SKIP
    """

    def __init__(
        self,
        server: str,
        *,
        cache: Optional[PathLike] = None,
        timeout: float = 60.0,
        max_filter_mib: int = 4096,
        tls: Optional[Dict[str, Any]] = None,
        tag_cache: Optional[PathLike] = None,
    ) -> None:
        self._native = _native.FilterClient(
            server, None if cache is None else os.fspath(cache), max_filter_mib, timeout, 16, tls,
            None if tag_cache is None else os.fspath(tag_cache),
        )

    @property
    def server(self) -> str:
        """The server's ``host:port``."""
        return self._native.server

    @property
    def discarded_cache(self) -> Optional[str]:
        """Why the cache file could not be used (it is replaced by the next
        sync), if it was damaged."""
        return self._native.discarded_cache

    @property
    def discarded_tag_cache(self) -> Optional[str]:
        """Why the tag cache file could not be used (it is rewritten by the
        next query), if it was damaged."""
        return self._native.discarded_tag_cache

    def sync(self) -> Dict[str, Any]:
        """Brings the filter up to date: ``kind`` is ``"full"``, ``"delta"``
        or ``"up_to_date"``; ``epoch`` the server's epoch; ``bytes`` the
        filter data received."""
        return self._native.sync()

    def query(
        self,
        data: Any,
        *,
        key: Columns = None,
        normalize: Optional[Normalize] = DEFAULT_NORMALIZE,
        has_header: bool = True,
        delimiter: str = ",",
        details: bool = False,
        progress: Optional[Progress] = None,
    ) -> Any:
        """Syncs, then returns the rows of ``data`` the server holds, as
        :func:`query` does (``progress`` too)."""
        p = prepare(data, key=key, normalize=normalize, has_header=has_header, delimiter=delimiter)
        with ProgressReporter(progress) as bar:
            out = self._native.query(p.source, bar.callback)
        matches = result(p, out)
        return (matches, out) if details else matches

    async def sync_async(self) -> Dict[str, Any]:
        """:meth:`sync` for asyncio; cancelling the task closes the
        connection (within 100 ms)."""
        return await _aio.run(self.sync)

    async def query_async(self, data: Any, **kwargs: Any) -> Any:
        """:meth:`query` for asyncio, with the same arguments; cancelling
        the task closes the connection (within 100 ms).

        >>> rows = await client.query_async(df, key="email")  # doctest: +SKIP
        """
        return await _aio.run(self.query, data, **kwargs)

    def __repr__(self) -> str:
        return f"psikit.filter.Client({self.server!r})"


class Query(Stepped):
    """A query at the message level: bytes in, bytes out, over whatever
    transport the caller has (HTTP, a message queue). No sockets, threads
    or timeouts. The server's side is :meth:`psikit.Server.respond`, which
    needs no port (``psikit.Server(listen=None, filter_state=...)``).

    Start with ``request = query.step()``, carry ``request`` to the server,
    give its answer to ``query.step(answer)`` and carry what that returns,
    until ``query.done`` (two exchanges: the filter sync, then the query;
    one more when the server updated in between); then ``query.result()``
    gives what :func:`query` returns, or raises the query's error. With
    ``cache`` (a file) the filter is kept between queries and each sync
    downloads only what changed.

    >>> server = psikit.Server(listen=None, filter_state="srv")  # doctest: +SKIP
    >>> q = psikit.filter.Query(["b", "c"], cache="f.cache")  # doctest: +SKIP
    >>> request = q.step()  # doctest: +SKIP
    >>> while not q.done:  # doctest: +SKIP
    ...     request = q.step(server.respond(request))
    >>> q.result()  # doctest: +SKIP
    ['b']
    """

    def __init__(
        self,
        data: Any,
        *,
        key: Columns = None,
        normalize: Optional[Normalize] = DEFAULT_NORMALIZE,
        cache: Optional[PathLike] = None,
        max_filter_mib: int = 4096,
        has_header: bool = True,
        delimiter: str = ",",
    ) -> None:
        self._prepared = prepare(data, key=key, normalize=normalize, has_header=has_header, delimiter=delimiter)
        self._native = _native.filter_query_party(
            self._prepared.source, None if cache is None else os.fspath(cache), max_filter_mib, 16
        )

    def result(self, *, details: bool = False) -> Any:
        """The matching rows, as :func:`query` returns them (``(matches,
        info)`` with ``details=True``)."""
        out = self._finished()
        matches = result(self._prepared, out)
        return (matches, out) if details else matches
