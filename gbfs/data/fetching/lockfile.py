"""The checksum lock of files without a published sha256 (trust on first use).

``<root>/<name>/raw/checksums.lock.json`` maps a file name to the sha256 recorded the first
time the file was used, after it passed the content checks of :mod:`gbfs.data.fetching.sanity`.  Later
loads and downloads must match it.  The lock is a trust anchor, so it is read strictly: a
lock file that is not a JSON object of 64-hex-digit strings is an error naming the file,
never treated as empty (which would silently record whatever is on disk now).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from .fsutil import write_json_atomic
from .transfer import ChecksumError

LOCK_FILE = "checksums.lock.json"
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


class LockFileError(ChecksumError):
    """The checksum lock file cannot be read or is malformed."""


def lock_path(folder: Path) -> Path:
    return Path(folder) / LOCK_FILE


def read_lock(folder: Path) -> dict[str, str]:
    """``{file: sha256}`` recorded in ``folder``'s lock file (``{}`` when there is none).

    Raises
    ------
    LockFileError
        The file exists but cannot be read, is not JSON, or is not an object of sha256 strings.
    """
    path = lock_path(folder)
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise LockFileError(f"cannot read the checksum lock file {path}: {exc}") from exc
    try:
        lock = json.loads(text)
    except ValueError as exc:
        raise LockFileError(_corrupt(path, f"not valid JSON ({exc})")) from None
    if not isinstance(lock, dict):
        raise LockFileError(_corrupt(path, f"expected a JSON object, found {type(lock).__name__}"))
    for fname, digest in lock.items():
        if not isinstance(digest, str) or not _SHA256.match(digest):
            raise LockFileError(_corrupt(path, f"the entry {fname!r} must be 64 lowercase hex digits, "
                                               f"found {digest!r}"))
    return lock


def _corrupt(path: Path, why: str) -> str:
    dataset = path.parent.parent.name
    return (f"corrupt checksum lock file {path}: {why}; repair it, or reset it with "
            f"`python -m gbfs.data unlock {dataset}` (the files present are then checked and their "
            f"sha256 recorded again at the next load)")


def record_lock(folder: Path, filename: str, digest: str) -> None:
    """Record the sha256 of a file without a published checksum at its first use (downloaded or
    placed by hand, and already checked for plausibility); later loads are verified against it."""
    lock = read_lock(folder)
    lock[filename] = digest
    write_json_atomic(lock_path(folder), lock)


def remove_lock_entries(folder: Path, filenames: list[str] | None = None) -> list[str]:
    """Forget the recorded sha256 of ``filenames`` (every entry when ``None``); return the names
    removed.  With ``None`` a corrupt lock file is deleted as a whole."""
    path = lock_path(folder)
    if filenames is None:
        try:
            removed = sorted(read_lock(folder))
        except LockFileError:
            removed = ["(the whole corrupt lock file)"]
        path.unlink(missing_ok=True)
        return removed
    lock = read_lock(folder)
    removed = [f for f in filenames if f in lock]
    for fname in removed:
        del lock[fname]
    if removed:
        write_json_atomic(path, lock)
    return removed


def reset_hint(dataset: str, folder: Path, filename: str) -> str:
    """How to accept a file that no longer matches its lock entry (the end of an error message)."""
    return (f"it is checked against the sha256 recorded at its first use in {lock_path(folder)}; if the "
            f"upstream file changed, or the recorded one was bad, reset that entry with "
            f"`python -m gbfs.data unlock {dataset} {filename}` (or delete the entry {filename!r} from the "
            f"lock file) and load again")
