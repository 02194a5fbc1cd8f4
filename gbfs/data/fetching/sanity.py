"""Content checks of raw files that have no published sha256, run before their sha256 is locked.

Trust on first use only works if what is trusted is the real file.  A captive portal's
HTML page answered with 200, a body cut short by a connection closed without a
Content-Length, or a resumed transfer glued onto a partial file of an older version all
reach the disk as "complete" downloads.  :func:`problem` refuses them: the file must not be
empty or smaller than the manifest's ``min_size``, must not be an HTML page, a compressed
file (``.bz2``, ``.gz``, ``.zip``) must decompress to its end, a text file must end with a
newline (a cut transfer ends mid-line), and the formats the manifests name are parsed:
a benchm-ml CSV must have its exact header, ``Y``/``N`` labels, numeric ``DepTime`` and
``Distance`` and, where the manifest knows it, its number of rows (also the line count of
Gisette and LIBSVM files).  Files with a published sha256 skip these checks: the hash
already proves the content.
"""

from __future__ import annotations

import bz2
import gzip
import re
import zipfile
import zlib
from pathlib import Path

import numpy as np
import pandas as pd

from ..formats import FLIGHT_LABEL, FLIGHT_NUMERIC, FormatError, read_flight_csv
from .manifest import Manifest
from .transfer import CHUNK, ContentError

_HEAD = 4096
_HTML = re.compile(rb"<(!doctype\s+html|html[\s>]|head[\s>]|body[\s>]|title[\s>]|meta\s)", re.IGNORECASE)
_TEXT_SUFFIXES = (".csv", ".txt", ".data", ".labels", ".libsvm", ".svm")
_MAGIC = {".bz2": b"BZh", ".gz": b"\x1f\x8b", ".zip": b"PK"}


def problem(manifest: Manifest, fname: str, path: Path) -> str | None:
    """Why ``path`` cannot be the file ``fname`` of ``manifest`` (``None`` when it is plausible).

    The reason does not name ``path`` (it may be a temporary ``.part`` file); callers add it.
    """
    path = Path(path)
    size = path.stat().st_size
    if size == 0:
        return "it is empty"
    want, floor = manifest.size(fname), manifest.min_size(fname)
    if want is not None and size != want:
        return f"it has {size} bytes, the manifest says {want} (files.{fname}.size)"
    if floor is not None and size < floor:
        return (f"it has only {size} bytes, a real copy has at least {floor} "
                f"(files.{fname}.min_size of the manifest): a cut transfer or an error page?")
    with open(path, "rb") as f:
        head = f.read(_HEAD)
    if _looks_like_html(head):
        return "it is an HTML page, not the data file (a captive portal, a login or an error page?)"
    rows = _expected_rows(manifest, fname)
    suffix = Path(fname).suffix.lower()
    if suffix in _MAGIC:
        return _compressed_problem(path, suffix, head, rows if manifest.format == "libsvm_bz2" else None)
    if manifest.format == "benchm_ml_csv" and suffix == ".csv":
        return _trailing_newline_problem(path) or _flight_csv_problem(path, fname, rows)
    if suffix in _TEXT_SUFFIXES:
        return _trailing_newline_problem(path) or (
            _line_count_problem(_count_lines(path), rows) if manifest.format == "gisette" else None)
    return None


def end_checked(manifest: Manifest, fname: str) -> bool:
    """Whether :func:`problem` tells a transfer of ``fname`` cut at a line end from the whole file:
    the manifest gives its size, or a row count that is counted, or the file is compressed (its
    stream has an end marker).  Without any of these only the transfer's own framing (a
    Content-Length) can show that a download is whole (:func:`gbfs.data.fetching.transfer.fetch`'s
    ``need_length``)."""
    suffix = Path(fname).suffix.lower()
    if manifest.size(fname) is not None or suffix in _MAGIC:
        return True
    counted = (manifest.format == "benchm_ml_csv" and suffix == ".csv") or \
        (manifest.format == "gisette" and suffix in _TEXT_SUFFIXES)
    return counted and _expected_rows(manifest, fname) is not None


def require_plausible(manifest: Manifest, fname: str, path: Path) -> None:
    """:func:`problem` as an exception naming the file (a file placed by hand)."""
    reason = problem(manifest, fname, path)
    if reason:
        raise ContentError(f"{manifest.name}: {path} is not a plausible copy of {fname}: {reason}. It has no "
                           f"published checksum, so it is checked before its sha256 is recorded; replace "
                           f"it with the real file (or delete it to download it again)")


def _looks_like_html(head: bytes) -> bool:
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    return text.startswith(b"<") and _HTML.search(text[:2048]) is not None


def _expected_rows(manifest: Manifest, fname: str) -> int | None:
    """Lines (rows) of ``fname`` where the manifest's splits say: ``n_rows_raw``, else ``n_rows``."""
    for spec in manifest.splits.values():
        if not isinstance(spec, dict):
            continue
        if fname == spec.get("file") or fname in (spec.get("files") or ()):
            rows = spec.get("n_rows_raw", spec.get("n_rows"))
            return rows if isinstance(rows, int) and not isinstance(rows, bool) else None
    return None


def _line_count_problem(lines: int, rows: int | None) -> str | None:
    if rows is not None and lines != rows:
        return f"it has {lines} lines, the manifest says {rows} rows"
    return None


def _count_lines(path: Path) -> int:
    n = 0
    with open(path, "rb") as f:
        while chunk := f.read(4 * CHUNK):
            n += chunk.count(b"\n")
    return n


def _trailing_newline_problem(path: Path) -> str | None:
    with open(path, "rb") as f:
        f.seek(-1, 2)
        last = f.read(1)
    if last != b"\n":
        return "its last line is cut short (no final newline): the transfer ended early?"
    return None


def _compressed_problem(path: Path, suffix: str, head: bytes, rows: int | None) -> str | None:
    """Decompress to the end (a cut archive fails only there); count lines where ``rows`` is known."""
    kind = suffix[1:]
    if not head.startswith(_MAGIC[suffix]):
        return f"it is not a {kind} file (it starts with {head[:8]!r})"
    if suffix == ".zip":
        try:
            with zipfile.ZipFile(path) as zf:
                bad = zf.testzip()
        except (zipfile.BadZipFile, OSError, EOFError, zlib.error) as exc:
            return f"it is not a complete zip archive ({exc})"
        return f"the zip member {bad} is corrupt" if bad else None
    opener = bz2.open if suffix == ".bz2" else gzip.open
    lines, last = 0, b""
    try:
        with opener(path, "rb") as stream:
            while chunk := stream.read(4 * CHUNK):
                lines += chunk.count(b"\n")
                last = chunk[-1:]
    except (OSError, EOFError, zlib.error) as exc:
        return f"it is not a complete {kind} stream ({exc})"
    if rows is not None:
        if last != b"\n":
            return "its decompressed text ends mid-line"
        return _line_count_problem(lines, rows)
    return None


def _flight_csv_problem(path: Path, fname: str, rows: int | None) -> str | None:
    try:
        df = read_flight_csv(path)
    except FormatError as exc:
        return str(exc).replace(str(path), fname)
    if rows is not None and len(df) != rows:
        return f"it has {len(df)} data rows, the manifest says {rows}"
    labels = df[FLIGHT_LABEL].astype(str)
    bad = ~labels.isin(("Y", "N")).to_numpy()
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        return f"{FLIGHT_LABEL} must be 'Y' or 'N', found {labels.iloc[row]!r} (data row {row + 1})"
    for col in FLIGHT_NUMERIC:
        values = pd.to_numeric(df[col], errors="coerce")
        if values.isna().any():
            row = int(np.flatnonzero(values.isna().to_numpy())[0])
            return f"column {col} must be numeric, found {df[col].iloc[row]!r} (data row {row + 1})"
    return None
