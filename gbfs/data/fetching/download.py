"""Whole datasets: every raw file of a manifest from its sources, verified, and locked where
no checksum is published.

:func:`fetch_dataset` gets every file of a manifest from its sources in order (the
primary, then the mirrors; a ``zip`` source is downloaded and its members are
extracted and verified one by one), and fails with one error that lists, for every
missing file, each URL tried and why, and the exact path where the file may be placed
by hand.  Single transfers are :func:`gbfs.data.fetching.transfer.fetch`; a file without a published
sha256 must pass the content checks of :mod:`gbfs.data.fetching.sanity` before it is renamed into
place and its sha256 is recorded in the lock file of :mod:`gbfs.data.fetching.lockfile`.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

from .fsutil import write_json_atomic
from .lockfile import LOCK_FILE, LockFileError, read_lock, record_lock, reset_hint
from .manifest import Manifest, mirror_url, raw_dir
from .sanity import end_checked, require_plausible
from .sanity import problem as content_problem
from .transfer import (
    CHUNK,
    DEFAULT_POLICY,
    USER_AGENT,
    ChecksumError,
    ContentError,
    DownloadError,
    RetryPolicy,
    discard_partial,
    fetch,
    sha256_file,
)

__all__ = ["CHUNK", "DEFAULT_POLICY", "HASH_CACHE", "LOCK_FILE", "USER_AGENT", "ChecksumError",
           "ContentError", "DownloadError", "LockFileError", "RetryPolicy", "cached_sha256", "fetch",
           "fetch_dataset", "file_status", "lock_unlocked", "mismatch_error", "read_lock", "record_lock",
           "remove_partials", "sha256_file"]

HASH_CACHE = ".sha256-cache.json"
#: a hash recorded less than this long after the file's ctime is not trusted (see cached_sha256)
RACY_NS = 1_000_000_000
_STAT_KEY = ("size", "mtime_ns", "ino", "ctime_ns")


# ----------------------------------------------------------------------------- checksums on disk

def cached_sha256(path: Path, fresh: bool = False) -> str:
    """sha256 of ``path``, reusing a stored value while the file is unchanged (``fresh=True``
    always re-reads the file, as ``python -m gbfs.data verify`` does).

    A stored hash is keyed by the file's size, mtime, inode and ctime.  The kernel sets ctime
    on every write (and on ``utime``); users cannot set it, so an edit that restores the size
    and mtime is still noticed.  Timestamps are coarse (a few milliseconds, or seconds on some
    file systems), so an edit within the same tick as the hashing would keep the ctime: a
    hash stored less than :data:`RACY_NS` after the file's ctime is not trusted and is
    computed again at the next use (git treats "racily clean" index entries the same way).
    The cache is best effort: where it cannot be written (a read-only root) the file is
    hashed again next time.
    """
    cache_file = path.parent / HASH_CACHE
    cache = _read_hash_cache(cache_file)
    recorded_ns = time.time_ns()           # before the stat: a later edit changes the ctime
    st = path.stat()
    key = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "ino": st.st_ino, "ctime_ns": st.st_ctime_ns}
    entry = cache.get(path.name)
    if not fresh and _entry_matches(entry, key):
        return entry["sha256"]
    digest = sha256_file(path)
    cache[path.name] = {**key, "sha256": digest, "recorded_ns": recorded_ns}
    try:
        write_json_atomic(cache_file, cache)
    except OSError:                        # only a cache: a read-only root hashes again next time
        pass
    return digest


def _entry_matches(entry, key: dict) -> bool:
    if not isinstance(entry, dict) or any(entry.get(k) != key[k] for k in _STAT_KEY):
        return False
    recorded, digest = entry.get("recorded_ns"), entry.get("sha256")
    return (isinstance(recorded, int) and recorded - key["ctime_ns"] >= RACY_NS
            and isinstance(digest, str) and len(digest) == 64)


def _read_hash_cache(path: Path) -> dict:
    """The hash cache; unreadable or malformed, it is empty (it is only a cache: files are re-hashed)."""
    try:
        cache = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return cache if isinstance(cache, dict) else {}


# ----------------------------------------------------------------------------- whole datasets

def file_status(manifest: Manifest, filename: str, root=None, fresh: bool = False) -> tuple[str, str | None]:
    """(status, sha256) of one raw file: ``"missing"``, ``"verified"`` (published sha256),
    ``"locked"`` (matches the local lock; no published checksum), ``"unlocked"`` (present, no
    checksum anywhere yet) or ``"mismatch"``.  ``fresh`` re-hashes instead of trusting the hash
    cache.  A corrupt lock file raises :class:`~gbfs.data.fetching.lockfile.LockFileError`."""
    path = raw_dir(manifest, root) / filename
    if not path.is_file():
        return "missing", None
    if manifest.size(filename) is not None and path.stat().st_size != manifest.size(filename):
        return "mismatch", None
    digest = cached_sha256(path, fresh)
    expected = manifest.sha256(filename) or read_lock(path.parent).get(filename)
    if expected is None:
        return "unlocked", digest
    if digest != expected:
        return "mismatch", digest
    return ("verified" if manifest.sha256(filename) else "locked"), digest


def mismatch_note(manifest: Manifest, folder: Path, filename: str) -> str:
    """What a file that does not match its checksum was checked against, and how to move on."""
    if manifest.sha256(filename):
        return "it does not match the published checksum of the manifest"
    return "it does not match the local lock: " + reset_hint(manifest.name, folder, filename)


def mismatch_error(manifest: Manifest, root, bad: dict[str, str | None]) -> ChecksumError:
    """The error for local files ``{name: sha256}`` that do not match their checksums."""
    folder = raw_dir(manifest, root)
    parts = []
    for fname, digest in bad.items():
        what = f"sha256 {digest}" if digest else f"{(folder / fname).stat().st_size} bytes, the manifest " \
                                                 f"says {manifest.size(fname)}"
        parts.append(f"{folder / fname} ({what}; {mismatch_note(manifest, folder, fname)})")
    return ChecksumError(f"{manifest.name}: local files do not match their checksums: " + "; ".join(parts)
                         + "; delete them to download again")


def lock_unlocked(manifest: Manifest, root=None) -> None:
    """Record the sha256 of every present raw file that has neither a published checksum nor a
    lock entry yet (a file placed by hand), once it passed the content checks: from now on it is
    verified like a download.  An implausible file is a :class:`ContentError` naming it."""
    folder = raw_dir(manifest, root)
    for fname in manifest.files:
        status, digest = file_status(manifest, fname, root)
        if status == "unlocked":
            require_plausible(manifest, fname, folder / fname)
            record_lock(folder, fname, digest)


def fetch_dataset(manifest: Manifest, root=None, *, mirror: str | None = None,
                  policy: RetryPolicy = DEFAULT_POLICY, progress: bool = True,
                  sleep: Callable[[float], None] = time.sleep) -> dict[str, str]:
    """Download the missing raw files of ``manifest``; return ``{file: status}`` for every file.

    A present file with a wrong checksum is an error (it is never overwritten silently:
    delete it to download again).  Files without a published checksum must pass the content
    checks of :mod:`gbfs.data.fetching.sanity` (a download that fails them is deleted), then get their
    sha256 recorded in ``raw/checksums.lock.json``; a file downloaded again must match its lock
    entry (``python -m gbfs.data unlock NAME FILE`` accepts new upstream content).
    """
    folder = raw_dir(manifest, root)
    folder.mkdir(parents=True, exist_ok=True)
    lock_unlocked(manifest, root)
    checked = {f: file_status(manifest, f, root) for f in manifest.files}
    bad = {f: digest for f, (s, digest) in checked.items() if s == "mismatch"}
    if bad:
        raise mismatch_error(manifest, root, bad)
    missing = [f for f, (s, _) in checked.items() if s == "missing"]
    failures: dict[str, list[str]] = {f: [] for f in missing}
    for source in manifest.sources:
        if not missing:
            break
        if source.type == "zip":
            _fetch_from_zip(manifest, source, missing, folder, mirror, policy, progress, sleep, failures)
        else:
            for fname in [f for f in missing if f in source.urls]:
                url = mirror_url(source.urls[fname], mirror)
                expected = _expected_sha256(manifest, folder, fname)
                try:
                    digest = fetch(url, folder / fname, sha256=expected,
                                   check=_checker(manifest, fname, expected), policy=policy,
                                   progress=progress, sleep=sleep,
                                   need_length=_unchecked_end(manifest, fname, expected))
                except DownloadError as exc:
                    failures[fname].append(_with_lock_note(exc, manifest, folder, fname))
                    continue
                _after_download(manifest, folder, fname, digest)
        missing = [f for f in missing if not (folder / f).is_file()]
    if missing:
        raise DownloadError(_failure_message(manifest, folder, missing, failures))
    return {f: file_status(manifest, f, root)[0] for f in manifest.files}


def _expected_sha256(manifest: Manifest, folder: Path, fname: str) -> str | None:
    """The published sha256, else the one locked at the first use, else None."""
    return manifest.sha256(fname) or read_lock(folder).get(fname)


def _checker(manifest: Manifest, fname: str, expected: str | None):
    """The content check of a file whose sha256 will be locked (none when a sha256 is known)."""
    if expected is not None:
        return None
    return lambda path: content_problem(manifest, fname, path)


def _unchecked_end(manifest: Manifest, fname: str, expected: str | None) -> str | None:
    """Why only a Content-Length can show that a download of ``fname`` is whole (None when its
    sha256 or the manifest's size or row count can): its sha256 is locked at first use, so a
    transfer cut at a line end must never be trusted."""
    if expected is not None or end_checked(manifest, fname):
        return None
    where = manifest.path or f"the manifest of {manifest.name}"
    split = next((k for k, v in manifest.splits.items() if isinstance(v, dict)
                  and (fname == v.get("file") or fname in (v.get("files") or ()))), "<split>")
    return (f"{where} gives nothing else to check it by (files.{fname}.sha256 and files.{fname}.size "
            f"are null and no n_rows of its split is counted): give its row count (splits.{split}.n_rows) "
            f"or its size in bytes (files.{fname}.size) there, or place the file by hand")


def _with_lock_note(exc: DownloadError, manifest: Manifest, folder: Path, fname: str) -> str:
    if isinstance(exc, ChecksumError) and not manifest.sha256(fname):
        return f"{exc}; {reset_hint(manifest.name, folder, fname)}"
    return str(exc)


def _after_download(manifest: Manifest, folder: Path, fname: str, digest: str) -> None:
    if manifest.sha256(fname) is None and fname not in read_lock(folder):
        record_lock(folder, fname, digest)
    cached_sha256(folder / fname)          # store the hash so later loads do not re-read the file


def _fetch_from_zip(manifest, source, missing, folder, mirror, policy, progress, sleep, failures):
    """Download a zip archive and extract the missing files from it, verifying each member."""
    url = mirror_url(source.url, mirror)
    archive = folder / ".archives" / Path(source.url).name
    try:
        # no check of its own: an HTML page or a cut archive fails to open below, and every
        # member is verified (published sha256, or the content checks) before it is used
        fetch(url, archive, policy=policy, progress=progress, sleep=sleep)
    except DownloadError as exc:
        for fname in missing:
            failures[fname].append(str(exc))
        _remove_if_empty(archive.parent)
        return
    try:
        with zipfile.ZipFile(archive) as zf:
            for fname in missing:
                member = _find_member(zf, source.members.get(fname, fname))
                if member is None:
                    failures[fname].append(f"{url}: the archive has no member {fname}")
                    continue
                expected = _expected_sha256(manifest, folder, fname)
                try:
                    digest = _extract_verified(zf, member, folder / fname, expected,
                                               _checker(manifest, fname, expected))
                except DownloadError as exc:
                    failures[fname].append(f"{url}: {_with_lock_note(exc, manifest, folder, fname)}")
                    continue
                _after_download(manifest, folder, fname, digest)
    except zipfile.BadZipFile as exc:
        for fname in missing:
            failures[fname].append(f"{url}: not a valid zip archive ({exc})")
    finally:
        archive.unlink(missing_ok=True)
        _remove_if_empty(archive.parent)


def _remove_if_empty(folder: Path) -> None:
    try:
        folder.rmdir()
    except OSError:                       # not empty (a resumable .part) or already gone
        pass


def _find_member(zf: zipfile.ZipFile, wanted: str) -> str | None:
    """The member at path ``wanted``, else the only member with the same base name."""
    names = zf.namelist()
    if wanted in names:
        return wanted
    base = Path(wanted).name
    hits = [n for n in names if Path(n).name == base]
    return hits[0] if len(hits) == 1 else None


def _extract_verified(zf: zipfile.ZipFile, member: str, dest: Path, sha256: str | None, check) -> str:
    tmp = dest.with_name(dest.name + ".part")
    h = hashlib.sha256()
    with zf.open(member) as src, open(tmp, "wb") as out:
        while chunk := src.read(CHUNK):
            h.update(chunk)
            out.write(chunk)
    digest = h.hexdigest()
    if sha256 and digest != sha256:
        discard_partial(tmp)
        raise ChecksumError(f"member {member}: sha256 {digest}, expected {sha256}")
    reason = check(tmp) if check is not None else None
    if reason:
        discard_partial(tmp)
        raise ContentError(f"member {member}: {reason}")
    tmp.replace(dest)
    return digest


def _failure_message(manifest: Manifest, folder: Path, missing: list[str], failures) -> str:
    lines = [f"could not download dataset {manifest.name!r}:"]
    for fname in missing:
        lines.append(f"  {fname}:")
        lines.extend(f"    - {reason}" for reason in failures.get(fname) or ["no source lists this file"])
        lines.append(f"    place it by hand at: {folder / fname}")
    lines.append(f"then run: python -m gbfs.data verify {manifest.name}")
    return "\n".join(lines)


def remove_partials(folder: Path) -> None:
    """Delete leftover ``.part`` files (with their records) and archives."""
    for p in folder.glob("*.part"):
        discard_partial(p)
    for p in folder.glob("*.part.json"):
        p.unlink(missing_ok=True)
    shutil.rmtree(folder / ".archives", ignore_errors=True)
