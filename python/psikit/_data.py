"""Inputs of every kind into a native ``Source``, results back into the
caller's kind.

Kinds: a plain list (of ``str``/``bytes`` items, or of tuples of them for a
composite key), a ``dict`` (item -> label, for HE databases), a pandas
DataFrame, a pyarrow Table (or anything exporting the Arrow C stream
interface, ``__arrow_c_stream__``, read through pyarrow), and a CSV path
(``str`` or ``os.PathLike``), which is read by the same reader as the CLI.

Cells of tables become key fields as a CSV file would hold them: ``str``
as UTF-8, ``bytes`` as they are, missing values (``None``, NaN) as empty
(the row is skipped, as the CLI skips a row with an empty key), anything
else through ``str()``.
"""

from __future__ import annotations

import operator
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Optional, Union

from . import _native
from ._native import InputError

__all__ = [
    "Normalize",
    "Columns",
    "Progress",
    "DEFAULT_NORMALIZE",
    "normalize_option",
    "Prepared",
    "prepare",
    "Rows",
    "result",
    "ProgressReporter",
]

Normalize = Union[str, Sequence[str]]
Columns = Union[str, Sequence[str], None]
#: The ``progress=`` argument of long calls: ``callback(stage, done, total)``
#: or ``True`` for tqdm bars (see :class:`ProgressReporter`).
Progress = Union[Callable[[str, int, Optional[int]], None], bool]

#: The CLI's default normalisation (``--normalize trim``).
DEFAULT_NORMALIZE = "trim"


def normalize_option(normalize: Optional[Normalize]) -> str:
    """``("trim", "lower")`` or ``"trim,lower"`` as the CLI's option string."""
    if normalize is None:
        return "none"
    if isinstance(normalize, str):
        return normalize
    try:
        parts = [str(n) for n in normalize]
    except TypeError:
        raise InputError(f"normalize must be a string or a sequence of strings, got {normalize!r}") from None
    return ",".join(parts) if parts else "none"


def _columns(cols: Columns, what: str) -> List[str]:
    if cols is None:
        return []
    if isinstance(cols, str):
        return [cols]
    out = list(cols)
    for c in out:
        if not isinstance(c, str):
            raise InputError(f"{what} columns must be names (str), got {c!r}")
    return out


def _item(value: Any, what: str) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    raise InputError(f"{what} must be str or bytes, got {type(value).__name__}")


def _is_pandas(data: Any) -> bool:
    return type(data).__module__.split(".")[0] == "pandas" and hasattr(data, "iloc") and hasattr(data, "columns")


def _is_arrow_table(data: Any) -> bool:
    return type(data).__module__.split(".")[0] == "pyarrow" and hasattr(data, "column_names")


def _pyarrow():
    try:
        import pyarrow
    except ImportError:  # pragma: no cover - depends on the environment
        raise InputError("this input needs pyarrow: pip install 'psikit[pyarrow]'") from None
    return pyarrow


@dataclass
class Prepared:
    """A caller's data, ready for a native call, and how to give results back."""

    kind: str  # "list", "dict", "pandas", "arrow", "csv"
    source: Any
    data: Any = None
    labels: List[str] = field(default_factory=list)
    keys: List[str] = field(default_factory=list)


def prepare(
    data: Any,
    *,
    key: Columns = None,
    normalize: Optional[Normalize] = DEFAULT_NORMALIZE,
    label: Columns = None,
    has_header: bool = True,
    delimiter: str = ",",
    allow_dict: bool = False,
    label_role: str = "label",
) -> Prepared:
    """Turns ``data`` into a :class:`Prepared` (see the module docs).
    ``label_role`` names the extra columns in messages (``"value"`` for
    circuit PSI's value columns)."""
    norm = normalize_option(normalize)
    keys = _columns(key, "key")
    labels = _columns(label, "label")
    if isinstance(data, (str, os.PathLike)):
        if not keys:
            raise InputError("a CSV path needs key= (a column name or '#N', or several)")
        src = _native.Source.csv(os.fspath(data), keys, norm, has_header, delimiter, labels)
        return Prepared("csv", src, data, labels, keys)
    if _is_pandas(data):
        return _table("pandas", data, keys, labels, norm, lambda c: data[c].tolist(), list(map(str, data.columns)),
                      label_role)
    if not _is_arrow_table(data) and hasattr(data, "__arrow_c_stream__"):
        data = _pyarrow().table(data)
    if _is_arrow_table(data):
        return _table("arrow", data, keys, labels, norm, lambda c: data.column(c).to_pylist(), list(data.column_names),
                      label_role)
    if isinstance(data, dict):
        if not allow_dict:
            raise InputError("a dict (item -> label) is an input for HE databases only")
        if keys or labels:
            raise InputError("key= and label= go with tables and CSV paths, not with a dict")
        rows, width = [], None
        for item, lab in data.items():
            fields = list(item) if isinstance(item, tuple) else [item]
            row = [_item(f, "an item") for f in fields]
            labs = list(lab) if isinstance(lab, tuple) else [lab]
            row += [_item(lab_, "a label") for lab_ in labs]
            if width is None:
                width = (len(fields), len(labs))
            elif width != (len(fields), len(labs)):
                raise InputError("every item and every label of a dict must have as many fields as the first")
            rows.append(row)
        nk, nl = width or (1, 1)
        columns = [list(c) for c in zip(*rows)] or [[] for _ in range(nk + nl)]
        return Prepared("dict", _native.Source.columns(columns, nk, norm, nl), list(data.keys()))
    if isinstance(data, (list, tuple)) or (hasattr(data, "__iter__") and not isinstance(data, (bytes, bytearray))):
        items = list(data)
        if keys or labels:
            raise InputError("key= and label= go with tables and CSV paths; a list holds the keys themselves")
        if not (items and isinstance(items[0], tuple)):
            # Items of one field each; their types are checked natively.
            return Prepared("list", _native.Source.columns([items], 1, norm, 0, "a list item"), items)
        width = len(items[0])
        if any(not isinstance(it, tuple) or len(it) != width for it in items):
            raise InputError("every item of a list must have as many fields as the first")
        columns = [list(c) for c in zip(*items)]
        return Prepared("list", _native.Source.columns(columns, width, norm, 0, "a list item"), items)
    raise InputError(
        f"unsupported input {type(data).__name__}: give a list of str/bytes, a pandas DataFrame, "
        "a pyarrow Table (or an object with __arrow_c_stream__), or a CSV path"
    )


def _table(kind: str, data: Any, keys: List[str], labels: List[str], norm: str, column, names: List[str],
           label_role: str) -> Prepared:
    if not keys:
        raise InputError("a table needs key= (one column name or several)")
    for role, wanted in (("key", keys), (label_role, labels)):
        for c in wanted:
            if c not in names:
                raise InputError(f"{role} column {c!r} not found; available columns: {', '.join(map(repr, names))}")
            if names.count(c) > 1:
                raise InputError(f"{role} column {c!r} appears more than once in the table")
    cols = [column(c) for c in keys + labels]
    source = _native.Source.columns(cols, len(keys), norm, len(labels), label_names=[str(c) for c in labels])
    return Prepared(kind, source, data, labels, keys)


class Rows(Sequence):
    """The matching rows of a CSV file: a read-only sequence of dicts
    (header -> value, or ``"#0"``, ``"#1"``, ... without a header, then
    the label columns), each made when it is read, so that a result of
    millions of rows costs one buffer until it is used.

    It compares equal to a list of the same dicts; ``list(rows)`` makes
    the list. ``rows.positions`` are the rows' 0-based data row numbers in
    the file (a ``memoryview`` of ``int64``; ``numpy.asarray`` and
    ``pyarrow.array`` take it without a copy).

    >>> rows = psikit.psi.receive("ours.csv", key="email", listen="0.0.0.0:7702")  # doctest: +SKIP
    >>> len(rows), rows[0]  # doctest: +SKIP
    (524288, {'email': 'ann@x.org', 'name': 'Ann'})
    """

    __slots__ = ("_headers", "_fields", "_labels", "_names", "positions")

    def __init__(self, headers: Optional[List[str]], fields: Any, labels: List[List[str]], names: List[str],
                 positions: memoryview) -> None:
        self._headers = headers
        self._fields = fields
        self._labels = labels
        self._names = names
        self.positions = positions

    def __len__(self) -> int:
        return len(self._fields)

    def _row(self, i: int) -> Dict[str, str]:
        fields = self._fields.row(i)
        cols = self._headers if self._headers is not None else [f"#{k}" for k in range(len(fields))]
        d = dict(zip(cols, fields))
        d.update(zip(self._names, (col[i] for col in self._labels)))
        return d

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self._row(j) for j in range(*i.indices(len(self)))]
        n = len(self)
        at = i + n if i < 0 else i
        if not 0 <= at < n:
            raise IndexError("row index out of range")
        return self._row(at)

    def __iter__(self) -> Iterator[Dict[str, str]]:
        return (self._row(i) for i in range(len(self)))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, (Rows, list, tuple)):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        if len(self) <= 5:
            return f"Rows({list(self)!r})"
        return f"Rows([{self[0]!r}, {self[1]!r}, ... {len(self)} rows])"


def _take_list(data: Sequence[Any], positions: memoryview) -> List[Any]:
    if not positions:
        return []
    taken = operator.itemgetter(*positions)(data)
    return [taken] if len(positions) == 1 else list(taken)


def result(p: Prepared, out: Dict[str, Any], label_names: Sequence[str] = ()) -> Any:
    """The matched rows of ``out`` (a native result) in the kind of ``p``,
    taken from the caller's data by the positions the native side returns
    in one buffer:

    * list: the matching items, in input order (for HE: a dict item -> label,
      a label being a ``str``, or a tuple of ``str`` for several columns);
    * pandas / Arrow: the matching rows (``iloc`` / ``take``), with one column
      per label column;
    * CSV path: :class:`Rows`, dicts of header -> value, then the label
      columns, made as they are read.
    """
    buf: bytes = out["positions"]
    positions = memoryview(buf).cast("q")
    n = len(positions)
    names = list(label_names)
    labels: List[List[str]] = out["labels"]
    columns = [labels[j] if j < len(labels) else [""] * n for j in range(len(names))]
    if p.kind in ("list", "dict"):
        items = _take_list(p.data, positions)
        if not names:
            return items
        return {item: (lab[0] if len(lab) == 1 else tuple(lab)) for item, lab in zip(items, zip(*columns))}
    if p.kind == "pandas":
        import numpy

        df = p.data.iloc[numpy.frombuffer(buf, dtype=numpy.int64)]
        if names:
            df = df.copy()
            for name, col in zip(names, columns):
                df[name] = col
        return df
    if p.kind == "arrow":
        pa = _pyarrow()
        table = p.data.take(pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(buf)]))
        for name, col in zip(names, columns):
            table = table.append_column(name, pa.array(col, type=pa.string()))
        return table
    return Rows(out.get("headers"), out["fields"], columns, names, positions)


class ProgressReporter:
    """The ``progress=`` argument of long calls as a native callback (the
    one place ``progress=True`` becomes tqdm bars): a callable
    ``progress(stage, done, total)`` is called as it is; ``True`` draws a
    tqdm bar per stage when tqdm is installed (nothing otherwise); ``None``
    or ``False`` reports nothing. Use as a context manager so bars are
    closed, also when the call is interrupted."""

    def __init__(self, progress: Any) -> None:
        self._bar: Any = None
        self._stage: Optional[str] = None
        self._tqdm: Any = None
        self.callback: Any = None
        if callable(progress):
            self.callback = progress
        elif progress is True:
            try:
                from tqdm.auto import tqdm
            except ImportError:
                return
            self._tqdm = tqdm
            self.callback = self._update
        elif progress not in (None, False):
            raise InputError("progress must be a callable (stage, done, total), True (tqdm) or None")

    def _update(self, stage: str, done: int, total: Optional[int]) -> None:
        if stage != self._stage:
            self.close()
            self._stage = stage
            self._bar = self._tqdm(desc=stage, total=total, leave=False)
        if self._bar is not None and done > self._bar.n:
            self._bar.update(done - self._bar.n)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __enter__(self) -> "ProgressReporter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
