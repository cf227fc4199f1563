"""psikit: private set intersection you can deploy.

Families (one-shot functions, tables in and tables out of the same kind):

* :mod:`psikit.filter` -- unbalanced PSI with an updatable cuckoo filter
  (``setup``, ``update``, ``query``);
* :mod:`psikit.he` -- unbalanced labeled PSI with homomorphic encryption
  (``build_db``, ``update_db``, ``query``);
* :mod:`psikit.psi` -- balanced two-party PSI, VOLE-PSI or RR16
  (``send``, ``receive``);
* :mod:`psikit.cpsi` -- circuit PSI: the intersection's size, sums over
  it, a threshold, the union or shares, without the intersection itself
  (``send``, ``receive``).

:class:`Server` serves filter and HE state directories on one port (or
answers requests' bytes: ``Server.respond``). :mod:`psikit.scale` builds
and serves a sharded HE database on Ray (optional: ``psikit[ray]``; import
it explicitly).
Errors are :class:`PsikitError` or a subclass. Keys are encoded exactly as
the ``psikit`` command line encodes them (``key_format``, ``encode_keys``).

>>> import psikit
>>> psikit.filter.setup(["a", "b"], "srv")  # doctest: +SKIP
>>> with psikit.Server(filter_state="srv") as s:  # doctest: +SKIP
...     psikit.filter.query(s.addr, ["b", "c"])
['b']
"""

from __future__ import annotations

from typing import Any, List, Optional

from . import _native
from ._native import (
    InputError,
    ParametersError,
    ProtocolError,
    PsikitError,
    Server,
    StaleFilterError,
)
from . import cpsi, filter, he, psi  # noqa: A004 - the family is called filter, as in the CLI
from ._data import DEFAULT_NORMALIZE, Columns, Normalize, Rows, prepare

__version__: str = _native.__version__

__all__ = [
    "cpsi",
    "filter",
    "he",
    "psi",
    "Server",
    "Rows",
    "PsikitError",
    "InputError",
    "ProtocolError",
    "StaleFilterError",
    "ParametersError",
    "encode_keys",
    "key_format",
    "reuse_freed_memory",
]


def encode_keys(
    data: Any,
    *,
    key: Columns = None,
    normalize: Optional[Normalize] = DEFAULT_NORMALIZE,
    has_header: bool = True,
    delimiter: str = ",",
) -> List[Optional[bytes]]:
    """The item bytes of each row of ``data`` (``None`` for a row skipped for
    an empty key), exactly as the CLI computes them from a CSV file with the
    same ``--key`` and ``--normalize``.

    >>> psikit.encode_keys([" A@x.org"], normalize=("trim", "lower"))
    [b'a@x.org']
    >>> psikit.encode_keys([("Ann", "Lee")], normalize="trim")
    [b'\\x03\\x00\\x00\\x00Ann\\x03\\x00\\x00\\x00Lee']
    """
    p = prepare(data, key=key, normalize=normalize, has_header=has_header, delimiter=delimiter)
    return _native.encode_keys(p.source)


def key_format(
    data: Any,
    *,
    key: Columns = None,
    normalize: Optional[Normalize] = DEFAULT_NORMALIZE,
) -> str:
    """What two parties must share for their keys to match, e.g.
    ``"psikit-key-v1;columns=1;normalize=trim,lower"``.
    """
    return prepare(data, key=key, normalize=normalize).source.key_format


def reuse_freed_memory() -> None:
    """Makes the allocator keep freed memory for later allocations instead of
    returning it to the kernel, as the CLI's one-shot commands do: big runs
    (VOLE-PSI, RR16, circuit PSI at 2^20 and more) then reuse pages instead
    of having the kernel zero fresh ones for every big vector (VOLE-PSI at
    2^20: 0.3-0.7 s less at the receiver on the development VM, of 2.7-3.6 s).

    :func:`psikit.psi.send`/``receive`` and :func:`psikit.cpsi.send`/``receive``
    already keep freed memory while they run and restore glibc's settings
    afterwards (returning the kept memory to the kernel); this keeps it for
    good, for scripts that run several big jobs and exit: the process's
    resident memory stays at its high-water mark until it exits, which a
    long-running service should not do. It cannot be undone. A no-op
    outside Linux with glibc.
    """
    _native.reuse_freed_memory()
