"""Downloads: streaming, resumable (HTTP Range), retried with backoff, sha256-verified, atomic.

:func:`fetch` gets one URL into one file.  The bytes go to ``<dest>.part``; an
interrupted transfer is resumed from there with a ``Range`` request (by the next
attempt, or by the next call after a crash).  Only a complete transfer whose sha256
matches is renamed to ``dest`` (an atomic ``os.replace`` on the same file system),
so a file at ``dest`` is always whole and verified; a mismatch deletes the
``.part`` file, so nothing that looks valid is left behind.

:func:`fetch_dataset` gets every file of a manifest from its sources in order (the
primary, then the mirrors; a ``zip`` source is downloaded and its members are
extracted and verified one by one), and fails with one error that lists, for every
missing file, each URL tried and why, and the exact path where the file may be placed
by hand.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import shutil
import socket
import tempfile
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.error import HTTPError, URLError
from urllib.request import Request, urlopen

from tqdm.auto import tqdm

from .manifest import Manifest, mirror_url, raw_dir

CHUNK = 1 << 20
LOCK_FILE = "checksums.lock.json"
HASH_CACHE = ".sha256-cache.json"
USER_AGENT = "gbfs-data/1 (+https://github.com/; python urllib)"


class DownloadError(RuntimeError):
    """A file could not be downloaded (the message names the URLs and where to put the file by hand)."""


class ChecksumError(DownloadError):
    """A downloaded or local file does not have the expected sha256."""


class _Permanent(Exception):
    """A failure that retrying the same URL cannot fix (404, 403, an unknown host)."""


@dataclass(frozen=True)
class RetryPolicy:
    """How hard :func:`fetch` tries one URL.

    ``retries`` extra attempts after the first, sleeping ``backoff * 2**k`` seconds
    (at most ``max_backoff``) before attempt ``k + 1``; ``timeout`` seconds for the
    connection and for every read.
    """

    retries: int = 4
    backoff: float = 1.0
    max_backoff: float = 30.0
    timeout: float = 60.0


DEFAULT_POLICY = RetryPolicy()


def sha256_file(path: str | os.PathLike) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(4 * CHUNK):
            h.update(chunk)
    return h.hexdigest()


def fetch(url: str, dest: str | os.PathLike, *, sha256: str | None = None,
          policy: RetryPolicy = DEFAULT_POLICY, progress: bool = True,
          sleep: Callable[[float], None] = time.sleep) -> str:
    """Download ``url`` to ``dest`` and return the file's sha256.

    Parameters
    ----------
    url : str
        http(s) or file URL.
    dest : path
        Final location; the transfer is written to ``dest + ".part"`` and renamed
        only when complete and verified.
    sha256 : str or None
        Expected checksum; ``None`` accepts any content (the caller records it).
    policy : RetryPolicy
        Retries, backoff and timeouts.  Transient failures (connection refused or
        dropped, timeouts, 5xx, 408, 429, a body shorter than its Content-Length)
        are retried and resume from the bytes already on disk; 4xx and unknown
        hosts are not.

    Raises
    ------
    DownloadError
        The URL failed (after the retries, or at once for a permanent failure).
    ChecksumError
        The complete transfer has another sha256 (the partial file is deleted).
    """
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    resumed = part.exists() and part.stat().st_size > 0
    _transfer_with_retries(url, part, policy, progress, sleep)
    digest = sha256_file(part)
    if sha256 and digest != sha256 and resumed:
        # The stale partial file may come from another version of the file: start over once.
        part.unlink()
        _transfer_with_retries(url, part, policy, progress, sleep)
        digest = sha256_file(part)
    if sha256 and digest != sha256:
        part.unlink()
        raise ChecksumError(f"sha256 mismatch for {url}: expected {sha256}, got {digest}; "
                            f"the download was deleted")
    os.replace(part, dest)
    return digest


def _transfer_with_retries(url, part, policy, progress, sleep):
    attempt = 0
    while True:
        try:
            _transfer(url, part, policy.timeout, progress)
            return
        except _Permanent as exc:
            raise DownloadError(f"{url}: {exc}") from None
        except (URLError, OSError, http.client.HTTPException, _Incomplete) as exc:
            attempt += 1
            if attempt > policy.retries:
                raise DownloadError(f"{url}: {_describe(exc)} (gave up after {attempt} attempts)") from exc
            sleep(min(policy.backoff * 2 ** (attempt - 1), policy.max_backoff))


class _Incomplete(Exception):
    pass


def _describe(exc: BaseException) -> str:
    if isinstance(exc, HTTPError):
        return f"HTTP {exc.code} {exc.reason}"
    if isinstance(exc, URLError):
        return f"{exc.reason}"
    return f"{type(exc).__name__}: {exc}"


def _open(url: str, offset: int, timeout: float):
    headers = {"User-Agent": USER_AGENT}
    if offset:
        headers["Range"] = f"bytes={offset}-"
    try:
        return urlopen(Request(url, headers=headers), timeout=timeout)
    except HTTPError as exc:
        if exc.code == 416 and offset:
            return None                    # the partial file already holds every byte
        if 400 <= exc.code < 500 and exc.code not in (408, 429):
            raise _Permanent(_describe(exc)) from None
        raise
    except URLError as exc:
        if isinstance(exc.reason, socket.gaierror):
            raise _Permanent(f"cannot resolve the host ({exc.reason}); is this machine offline?") from None
        raise


def _transfer(url: str, part: Path, timeout: float, progress: bool) -> None:
    """One attempt: append to ``part`` from where it ends (or restart if the server ignores Range)."""
    offset = part.stat().st_size if part.exists() else 0
    resp = _open(url, offset, timeout)
    if resp is None:
        return
    with resp:
        status = getattr(resp, "status", 200)
        if offset and not (status == 206 and _range_start(resp) == offset):
            offset = 0                     # no resume support: start over
        length = resp.headers.get("Content-Length")
        expected = int(length) if length is not None and status in (200, 206) else None
        got = 0
        with open(part, "ab" if offset else "wb") as f, \
                tqdm(total=None if expected is None else offset + expected, initial=offset, unit="B",
                     unit_scale=True, unit_divisor=1024, desc=part.name[:-5], disable=not progress,
                     leave=False) as bar:
            while chunk := resp.read(CHUNK):
                f.write(chunk)
                got += len(chunk)
                bar.update(len(chunk))
        if expected is not None and got < expected:
            raise _Incomplete(f"connection closed after {got} of {expected} bytes")


def _range_start(resp) -> int | None:
    value = resp.headers.get("Content-Range", "")        # "bytes 100-199/200"
    try:
        return int(value.split()[1].split("-")[0])
    except (IndexError, ValueError):
        return None


# ----------------------------------------------------------------------------- checksums on disk

def cached_sha256(path: Path, fresh: bool = False) -> str:
    """sha256 of ``path``, reusing a stored value while the file's size and mtime are unchanged
    (``fresh=True`` always re-reads the file, as ``python -m gbfs.data verify`` does)."""
    cache_file = path.parent / HASH_CACHE
    cache = _read_json(cache_file)
    st = path.stat()
    entry = cache.get(path.name)
    if not fresh and entry and entry.get("size") == st.st_size and entry.get("mtime_ns") == st.st_mtime_ns:
        return entry["sha256"]
    digest = sha256_file(path)
    cache[path.name] = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": digest}
    _write_json_atomic(cache_file, cache)
    return digest


def read_lock(folder: Path) -> dict[str, str]:
    return _read_json(folder / LOCK_FILE)


def record_lock(folder: Path, filename: str, digest: str) -> None:
    """Record the sha256 of a file without a published checksum at its first use (downloaded or
    placed by hand); later loads are verified against it."""
    lock = read_lock(folder)
    lock[filename] = digest
    _write_json_atomic(folder / LOCK_FILE, lock)


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _write_json_atomic(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1, sort_keys=True)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# ----------------------------------------------------------------------------- whole datasets

def file_status(manifest: Manifest, filename: str, root=None, fresh: bool = False) -> tuple[str, str | None]:
    """(status, sha256) of one raw file: ``"missing"``, ``"verified"`` (published sha256),
    ``"locked"`` (matches the local lock; no published checksum), ``"unlocked"`` (present, no
    checksum anywhere yet) or ``"mismatch"``.  ``fresh`` re-hashes instead of trusting the hash
    cache."""
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


def lock_unlocked(manifest: Manifest, root=None) -> None:
    """Record the sha256 of every present raw file that has neither a published checksum nor a
    lock entry yet (a file placed by hand): from now on it is verified like a download."""
    folder = raw_dir(manifest, root)
    for fname in manifest.files:
        status, digest = file_status(manifest, fname, root)
        if status == "unlocked":
            record_lock(folder, fname, digest)


def fetch_dataset(manifest: Manifest, root=None, *, mirror: str | None = None,
                  policy: RetryPolicy = DEFAULT_POLICY, progress: bool = True,
                  sleep: Callable[[float], None] = time.sleep) -> dict[str, str]:
    """Download the missing raw files of ``manifest``; return ``{file: status}`` for every file.

    A present file with a wrong checksum is an error (it is never overwritten silently:
    delete it to download again).  Files without a published checksum get their sha256
    recorded in ``raw/checksums.lock.json`` at their first download or first use; a file
    downloaded again must match its lock entry (delete the entry to accept new upstream content).
    """
    folder = raw_dir(manifest, root)
    folder.mkdir(parents=True, exist_ok=True)
    lock_unlocked(manifest, root)
    status = {f: file_status(manifest, f, root)[0] for f in manifest.files}
    bad = [f for f, s in status.items() if s == "mismatch"]
    if bad:
        raise ChecksumError(f"{manifest.name}: local files do not match their checksums: "
                            + ", ".join(str(folder / f) for f in bad) + "; delete them to download again")
    missing = [f for f, s in status.items() if s == "missing"]
    failures: dict[str, list[str]] = {f: [] for f in missing}
    for source in manifest.sources:
        if not missing:
            break
        if source.type == "zip":
            _fetch_from_zip(manifest, source, missing, folder, mirror, policy, progress, sleep, failures)
        else:
            for fname in [f for f in missing if f in source.urls]:
                url = mirror_url(source.urls[fname], mirror)
                try:
                    digest = fetch(url, folder / fname, sha256=_expected_sha256(manifest, folder, fname),
                                   policy=policy, progress=progress, sleep=sleep)
                except DownloadError as exc:
                    failures[fname].append(str(exc))
                    continue
                _after_download(manifest, folder, fname, digest)
        missing = [f for f in missing if not (folder / f).is_file()]
    if missing:
        raise DownloadError(_failure_message(manifest, folder, missing, failures))
    return {f: file_status(manifest, f, root)[0] for f in manifest.files}


def _expected_sha256(manifest: Manifest, folder: Path, fname: str) -> str | None:
    """The published sha256, else the one locked at the first download, else None."""
    return manifest.sha256(fname) or read_lock(folder).get(fname)


def _after_download(manifest: Manifest, folder: Path, fname: str, digest: str) -> None:
    if manifest.sha256(fname) is None:
        record_lock(folder, fname, digest)
    cached_sha256(folder / fname)          # store the hash so later loads do not re-read the file


def _fetch_from_zip(manifest, source, missing, folder, mirror, policy, progress, sleep, failures):
    """Download a zip archive and extract the missing files from it, verifying each member."""
    url = mirror_url(source.url, mirror)
    archive = folder / ".archives" / Path(source.url).name
    try:
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
                try:
                    digest = _extract_verified(zf, member, folder / fname,
                                               _expected_sha256(manifest, folder, fname))
                except ChecksumError as exc:
                    failures[fname].append(f"{url}: {exc}")
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


def _extract_verified(zf: zipfile.ZipFile, member: str, dest: Path, sha256: str | None) -> str:
    tmp = dest.with_name(dest.name + ".part")
    h = hashlib.sha256()
    with zf.open(member) as src, open(tmp, "wb") as out:
        while chunk := src.read(CHUNK):
            h.update(chunk)
            out.write(chunk)
    digest = h.hexdigest()
    if sha256 and digest != sha256:
        tmp.unlink()
        raise ChecksumError(f"member {member}: sha256 {digest}, expected {sha256}")
    os.replace(tmp, dest)
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
    """Delete leftover ``.part`` files and archives (``python -m gbfs.data download --clean``)."""
    for p in folder.glob("*.part"):
        p.unlink()
    shutil.rmtree(folder / ".archives", ignore_errors=True)
