"""Where records come from: the errors about them, file paths and their formats, CSV headers and
lines, and SQL queries — which are only ever given explicitly (:class:`SqlQuery`), never guessed
from a string: a path is always a path."""

from __future__ import annotations

import csv
import glob
import gzip
import pathlib
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from .._csv import is_number
from ..errors import BlowfishError

__all__ = ["RecordError", "SqlQuery", "check_unique_columns", "csv_header", "csv_lines", "files_of", "histogram_shape", "kind",
           "read_histogram", "suffix"]

_CSV = (".csv", ".tsv", ".csv.gz", ".tsv.gz")
_PARQUET = (".parquet", ".pq")
_ARROW = (".arrow", ".feather", ".ipc")


class RecordError(BlowfishError, ValueError):
    """Records that cannot be counted: no histogram is built. The message depends on the data
    without noise (counts and example values): it is for the data owner, never for release."""


@dataclass(frozen=True)
class SqlQuery:
    """A SQL query whose result holds the records (run by DuckDB or Spark on the connection).

    Trusted input: the text runs as given, with the calling process's access to files; never
    build it from untrusted text."""

    text: str

    def __post_init__(self):
        if not isinstance(self.text, str) or not self.text.strip():
            raise TypeError(f"sql must be the text of a query, got {self.text!r}")


def suffix(path: str) -> str:
    name = path.lower()
    for suffix in (*_CSV, *_PARQUET, *_ARROW):
        if name.endswith(suffix):
            return suffix
    raise ValueError(f"source {path!r}: records must be CSV ({', '.join(_CSV)}), Parquet ({', '.join(_PARQUET)}) "
                     f"or Arrow IPC ({', '.join(_ARROW)}) files")


def files_of(source: str | pathlib.Path | Iterable[str | pathlib.Path]) -> list[str]:
    """The files of a path, a glob, a folder or a list of them; all of one format.

    A folder holds the files of records directly in it (not in sub-folders): every CSV, Parquet or
    Arrow file, skipping hidden names and names starting with ``_`` (``_SUCCESS`` and the like that
    Spark and Hadoop write beside their output). Any other file in it is refused by name rather
    than skipped, for it may hold records under another suffix."""
    items = [source] if isinstance(source, (str, pathlib.Path)) else list(source)
    files: list[str] = []
    for item in items:
        item = str(item)
        if pathlib.Path(item).is_dir():
            files += _folder_files(item)
            continue
        found = sorted(glob.glob(item)) if glob.has_magic(item) else [item]
        if not found:
            raise ValueError(f"source {item!r}: no file matches")
        for path in found:
            if not pathlib.Path(path).is_file():
                raise ValueError(f"source {path!r}: no such file")
        files += found
    kinds = {kind(suffix(f)) for f in files}
    if len(kinds) > 1:
        raise ValueError(f"source: files of one format only, got {sorted(kinds)}")
    return files


def _folder_files(folder: str) -> list[str]:
    """The files of records in ``folder`` (see :func:`files_of`)."""
    entries = sorted(p for p in pathlib.Path(folder).iterdir() if not p.name.startswith((".", "_")))
    files = [p for p in entries if p.is_file() and p.name.lower().endswith((*_CSV, *_PARQUET, *_ARROW))]
    others = [p.name for p in entries if p.is_file() and p not in files]
    if others:
        raise ValueError(f"source {folder!r}: the folder holds files that are not CSV, Parquet or Arrow records "
                         f"({', '.join(others[:3])}{', ...' if len(others) > 3 else ''}); give a glob such as "
                         f"'{folder.rstrip('/')}/*.csv' to choose the files")
    if not files:
        raise ValueError(f"source {folder!r}: the folder holds no CSV ({', '.join(_CSV)}), Parquet "
                         f"({', '.join(_PARQUET)}) or Arrow IPC ({', '.join(_ARROW)}) file")
    return [str(p) for p in files]


def kind(suffix: str) -> str:
    return "csv" if suffix in _CSV else "parquet" if suffix in _PARQUET else "arrow"


def csv_lines(path: str, blanks: bool = True, chunk: int = 1 << 24) -> tuple[int, int | None]:
    """(records, blank lines) of a CSV file by its lines: every line after the header is one
    record, an empty one ("\\n\\n", "\\n\\r\\n") a record with blank values, as pandas reads it
    with ``skip_blank_lines=False``. CSV readers skip some blank lines; :func:`histogram` compares
    these counts with the rows it read and counts each skipped line as a missing record.
    ``blanks=False`` only counts the lines (a byte count, no numpy pass) and gives None for blanks."""
    opener = gzip.open if path.endswith(".gz") else open
    newlines, empty = 0, 0
    carry, header, last = b"", True, b"\n"
    with opener(path, "rb") as f:
        while block := f.read(chunk):
            if header:  # newlines before the header are not records, nor is the header
                block = (carry + block).lstrip(b"\r\n")
                end = block.find(b"\n")
                if end < 0:
                    carry = block
                    continue
                block, carry, header = block[end:], b"", False
            newlines += block.count(b"\n")
            if blanks:
                a = np.frombuffer(carry + block, dtype=np.uint8)
                lf = a == 10
                pairs = np.flatnonzero(lf[:-1] & lf[1:])
                triples = np.flatnonzero(lf[:-2] & (a[1:-1] == 13) & lf[2:])
                # patterns that lie inside the carried bytes were counted with the previous block
                empty += int((pairs >= len(carry) - 1).sum() + (triples >= len(carry) - 2).sum())
                carry = block[-2:] if len(block) >= 2 else (carry + block)[-2:]
            last = block[-1:]
    if header:
        return 0, 0 if blanks else None
    # the header's newline is not a record's; a last line without a newline is one
    return newlines - 1 + (last != b"\n"), empty if blanks else None


def check_unique_columns(columns: Iterable[object], where: str) -> None:
    """Refuse a source with two columns of one name: which one a reader keeps (or renames) differs
    between engines, so the count could silently come from the wrong column."""
    repeated = sorted(name for name, n in Counter(map(str, columns)).items() if n > 1)
    if repeated:
        raise RecordError(f"{where}: the column name(s) {', '.join(map(repr, repeated))} appear more than once; "
                          "rename the columns so that each name is unique")


def csv_header(path: str) -> list[str]:
    """The column names on the first line of a CSV or TSV file (the byte-order mark removed)."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8-sig", newline="") as f:
        return next(csv.reader(f, delimiter="\t" if ".tsv" in path.lower() else ","), [])


#: Field texts that mean "no value", as in the records' rule: an empty field and NaN (any case).
MISSING_TEXTS = ("", "nan", "-nan")


_CSV_HISTOGRAM = "a histogram CSV holds one count per field, one row of cells per line"


def histogram_shape(path: str | pathlib.Path) -> tuple[int, ...]:
    """The shape :func:`read_histogram` gives ``path``, without reading a count: a ``.npy`` file's
    header, or a ``.csv`` file's numbers of lines and of fields on its first line. Planning needs
    no more (the counts are validated when they are read)."""
    path = pathlib.Path(path)
    if path.suffix == ".npy":
        return tuple(int(n) for n in np.load(path, mmap_mode="r", allow_pickle=False).shape)  # maps, reads no count
    if path.suffix != ".csv":
        raise ValueError(f"{path}: a histogram must be a .npy or .csv file; for a file of records pass --column")
    lines, counts = 0, set()
    with open(path, encoding="utf-8-sig", newline="") as f:
        for lines, row in enumerate(csv.reader(f), start=1):
            if not row:
                raise RecordError(f"{path}: line {lines} is blank; {_CSV_HISTOGRAM}")
            if lines == 1:
                _refuse_header(path, row)
            counts.add(len(row))
    if len(counts) > 1:
        raise RecordError(f"{path}: the lines hold different numbers of fields {sorted(counts)}")
    fields = counts.pop() if counts else 0
    if not lines:
        raise RecordError(f"{path}: no counts (an empty histogram file)")
    return (lines,) if fields == 1 else ((fields,) if lines == 1 else (lines, fields))


def _refuse_header(path, fields: list[str]) -> None:
    """Refuse a histogram CSV whose first line names columns: it is a file of records, whose
    columns must be named to be counted (a histogram holds numbers only)."""
    texts = [field.strip() for field in fields]
    names = [t for t in texts if t.lower() not in MISSING_TEXTS and not is_number(t)]
    if names:
        raise RecordError(f"{path}: its first line names columns ({', '.join(texts[:5])}{', ...' if len(texts) > 5 else ''}), "
                          f"so it holds records, not a histogram: count one with --column (in Python, "
                          f"blowfish_te.io.histogram); {_CSV_HISTOGRAM}")


def read_histogram(path: str | pathlib.Path) -> np.ndarray:
    """The counts of a histogram file: ``.npy``, or ``.csv`` with one row of cells per line.

    The rule for missing values is the records' (see :func:`blowfish_te.io.histogram`): a blank
    line, an empty field or NaN is a missing count and refused with its line number (a
    histogram with a cell missing cannot be released); a byte-order mark at the start of the file
    is removed. Counts are validated as histograms where they are used."""
    path = pathlib.Path(path)
    if path.suffix == ".npy":
        return np.load(path, allow_pickle=False)
    if path.suffix != ".csv":
        raise ValueError(f"{path}: a histogram must be a .npy or .csv file; for a file of records pass --column")
    rows = []
    with open(path, encoding="utf-8-sig", newline="") as f:
        for number, fields in enumerate(csv.reader(f), start=1):
            texts = [field.strip() for field in fields]
            missing = [i for i, text in enumerate(texts) if text.lower() in MISSING_TEXTS] if texts else [0]
            if missing:
                what = "is blank" if not texts else f"has a missing count in field {missing[0] + 1} ({fields[missing[0]]!r})"
                raise RecordError(f"{path}: line {number} {what}; {_CSV_HISTOGRAM}")
            if number == 1:
                _refuse_header(path, fields)
            try:
                rows.append([float(text) for text in texts])
            except ValueError:
                raise RecordError(f"{path}: line {number} holds a field that is not a number: {fields}") from None
    if not rows:
        raise RecordError(f"{path}: no counts (an empty histogram file)")
    if len({len(row) for row in rows}) > 1:
        raise RecordError(f"{path}: the lines hold different numbers of fields {sorted({len(r) for r in rows})}")
    values = np.array(rows, dtype=np.float64)
    return values[:, 0] if values.shape[1] == 1 else (values[0] if values.shape[0] == 1 else values)
