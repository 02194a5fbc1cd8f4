"""One URL into one file: streaming, resumable (HTTP Range), retried with backoff, verified, atomic.

The bytes go to ``<dest>.part``; an interrupted transfer is resumed from there with a
``Range`` request (by the next attempt, or by the next call after a crash).  Only a complete
transfer that passes verification (its sha256 where one is known, else a content ``check``)
is renamed to ``dest`` (an atomic ``os.replace`` on the same file system), so a file at
``dest`` is always whole; a failed verification deletes the ``.part`` file, so nothing that
looks valid is left behind.

Resuming appends new bytes to old ones, which is only safe when something proves that both
come from the same version of the file.  With a published sha256 the final hash does.
Without one, ``<dest>.part.json`` records the server's validators (``ETag``,
``Last-Modified``) and the length of the transfer that wrote the partial file; the resume
asks for the rest with ``If-Range``, so a changed upstream file answers with all of its
bytes, and a 206 answer of another length or ``ETag`` restarts from zero.  A partial file
without that record (an older version of this code, a copy by hand) is not resumed, and a
``416 Range Not Satisfiable`` only counts as "already complete" when the record says the
partial file holds the whole transfer.

A body sent without a ``Content-Length`` (and without chunked encoding) ends when the server
closes the connection, so a transfer cut short looks complete, even at a line end.  A caller that
has nothing else to tell (no sha256, no known size or row count) passes ``need_length``: such a
transfer is then refused rather than trusted.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.error import HTTPError, URLError
from urllib.request import Request, urlopen

from tqdm.auto import tqdm

from .fsutil import write_json_atomic

CHUNK = 1 << 20
USER_AGENT = "gbfs-data/1 (+https://github.com/; python urllib)"
#: suffix of the record of where a partial file comes from (next to ``<dest>.part``)
PART_STATE = ".json"


class DownloadError(RuntimeError):
    """A file could not be downloaded (the message names the URLs and where to put the file by hand)."""


class ChecksumError(DownloadError):
    """A downloaded or local file does not have the expected sha256."""


class ContentError(DownloadError):
    """A file is not plausibly the dataset's file: an HTML page, a cut transfer, another format."""


class _Permanent(Exception):
    """A failure that retrying the same URL cannot fix (404, 403, an unknown host)."""


class _Incomplete(Exception):
    pass


class _RangeNotSatisfiable(Exception):
    """A 416 answer to a Range request; ``total`` is the length the server reports, if any."""

    def __init__(self, total: int | None, etag: str | None):
        super().__init__(total)
        self.total, self.etag = total, etag


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
          check: Callable[[Path], str | None] | None = None, policy: RetryPolicy = DEFAULT_POLICY,
          progress: bool = True, sleep: Callable[[float], None] = time.sleep,
          need_length: str | None = None) -> str:
    """Download ``url`` to ``dest`` and return the file's sha256.

    Parameters
    ----------
    url : str
        http(s) or file URL.
    dest : path
        Final location; the transfer is written to ``dest + ".part"`` and renamed
        only when complete and verified.
    sha256 : str or None
        Expected checksum; ``None`` accepts any content that passes ``check``.
    check : callable, optional
        ``check(path)`` returns ``None`` when the complete transfer at ``path`` is plausibly
        the file (parses, has the expected header and size, ...), else the reason why not.
        A refused transfer is deleted and downloaded once more from zero (it may have been
        cut short by a connection closed without a Content-Length).
    policy : RetryPolicy
        Retries, backoff and timeouts.  Transient failures (connection refused or
        dropped, timeouts, 5xx, 408, 429, a body shorter than its Content-Length)
        are retried and resume from the bytes already on disk; 4xx and unknown
        hosts are not.
    need_length : str, optional
        Refuse a transfer whose end the HTTP framing does not prove (no ``Content-Length``, no
        chunked encoding), like a failed ``check``; the text says why nothing else can (e.g. what
        the manifest lacks) and ends the error.  For files without a sha256 whose content checks
        cannot tell a cut transfer from the whole file.

    Raises
    ------
    DownloadError
        The URL failed (after the retries, or at once for a permanent failure).
    ChecksumError
        The complete transfer has another sha256 (the partial file is deleted).
    ContentError
        ``check`` refused the complete transfer twice (the partial file is deleted).
    """
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    trusted = sha256 is not None
    if part.exists() and not _may_resume(part, url, trusted):
        discard_partial(part)
    resumed = part.exists() and part.stat().st_size > 0
    framed = _transfer_with_retries(url, part, policy, progress, sleep, trusted)
    digest, problem = _verify(url, part, sha256, check, None if framed else need_length)
    if problem is not None and (resumed or isinstance(problem, ContentError)):
        # A stale partial file of another version, or a transfer cut short: start over once.
        discard_partial(part)
        framed = _transfer_with_retries(url, part, policy, progress, sleep, trusted)
        digest, problem = _verify(url, part, sha256, check, None if framed else need_length)
    if problem is not None:
        discard_partial(part)
        raise problem
    os.replace(part, dest)
    _state_path(part).unlink(missing_ok=True)
    return digest


def _verify(url: str, part: Path, sha256: str | None, check,
            unframed: str | None = None) -> tuple[str, DownloadError | None]:
    """The sha256 of the complete transfer ``part``, and why it is refused (or None); ``unframed``
    is set when the transfer's end is not proven and nothing else may vouch for it."""
    digest = sha256_file(part)
    if sha256 and digest != sha256:
        return digest, ChecksumError(f"sha256 mismatch for {url}: expected {sha256}, got {digest}; "
                                     f"the download was deleted")
    reason = check(part) if check is not None else None   # its reasons are the more specific
    if reason:
        return digest, ContentError(f"{url}: {reason}; the download was deleted")
    if unframed:
        return digest, ContentError(f"{url}: the server sent no Content-Length (nor chunked encoding), so a "
                                    f"connection closed early would look like the end of the file "
                                    f"({part.stat().st_size} bytes arrived), and {unframed}; the download "
                                    f"was deleted")
    return digest, None


def discard_partial(part: Path) -> None:
    """Delete a partial file and the record of where it comes from."""
    part.unlink(missing_ok=True)
    _state_path(part).unlink(missing_ok=True)


def _transfer_with_retries(url, part, policy, progress, sleep, trusted) -> bool:
    """Transfer ``url`` into ``part``, retrying; whether the HTTP framing proved the body's end."""
    attempt = 0
    while True:
        try:
            return _transfer(url, part, policy.timeout, progress, trusted)
        except _Permanent as exc:
            raise DownloadError(f"{url}: {exc}") from None
        except (URLError, OSError, http.client.HTTPException, _Incomplete) as exc:
            attempt += 1
            if attempt > policy.retries:
                raise DownloadError(f"{url}: {_describe(exc)} (gave up after {attempt} attempts)") from exc
            sleep(min(policy.backoff * 2 ** (attempt - 1), policy.max_backoff))


def _describe(exc: BaseException) -> str:
    if isinstance(exc, HTTPError):
        return f"HTTP {exc.code} {exc.reason}"
    if isinstance(exc, URLError):
        return f"{exc.reason}"
    return f"{type(exc).__name__}: {exc}"


# ----------------------------------------------------------------------------- the record of a .part

def _state_path(part: Path) -> Path:
    return part.with_name(part.name + PART_STATE)


def _read_state(part: Path) -> dict | None:
    try:
        state = json.loads(_state_path(part).read_text())
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) else None


def _write_state(part: Path, url: str, resp) -> None:
    length = resp.headers.get("Content-Length")
    write_json_atomic(_state_path(part), {
        "url": url, "etag": resp.headers.get("ETag"), "last_modified": resp.headers.get("Last-Modified"),
        "length": int(length) if length is not None and length.isdigit() else None})


def _validator(state: dict | None) -> str | None:
    """The If-Range value: a strong ETag, else Last-Modified (weak ETags are not allowed there)."""
    if not state:
        return None
    etag = state.get("etag")
    if isinstance(etag, str) and etag and not etag.startswith("W/"):
        return etag
    modified = state.get("last_modified")
    return modified if isinstance(modified, str) and modified else None


def _may_resume(part: Path, url: str, trusted: bool) -> bool:
    """Resume a partial file only when its bytes can be shown to belong to the file we get now."""
    if trusted:
        return True                       # the final sha256 decides (and restarts once if wrong)
    state = _read_state(part)
    return state is not None and state.get("url") == url and _validator(state) is not None


def _known_complete(part: Path, state: dict | None, err: _RangeNotSatisfiable) -> bool:
    if not state or not isinstance(state.get("length"), int):
        return False
    if err.etag and state.get("etag") and err.etag != state["etag"]:
        return False
    size = part.stat().st_size
    return size == state["length"] and (err.total is None or err.total == size)


def _resume_matches(resp, offset: int, state: dict | None) -> bool:
    """A 206 answer continuing exactly the version of the file the partial file holds."""
    if getattr(resp, "status", None) != 206 or _range_start(resp) != offset:
        return False
    if not state:
        return True
    etag, modified, total = resp.headers.get("ETag"), resp.headers.get("Last-Modified"), _range_total(resp)
    return not ((state.get("etag") and etag and etag != state["etag"])
                or (state.get("last_modified") and modified and modified != state["last_modified"])
                or (isinstance(state.get("length"), int) and total is not None and total != state["length"]))


# ----------------------------------------------------------------------------- one attempt

def _open(url: str, offset: int, timeout: float, if_range: str | None):
    headers = {"User-Agent": USER_AGENT}
    if offset:
        headers["Range"] = f"bytes={offset}-"
        if if_range:
            headers["If-Range"] = if_range
    try:
        return urlopen(Request(url, headers=headers), timeout=timeout)
    except HTTPError as exc:
        if exc.code == 416 and offset:
            total = _content_range_total(exc.headers.get("Content-Range", ""))
            raise _RangeNotSatisfiable(total, exc.headers.get("ETag")) from None
        if 400 <= exc.code < 500 and exc.code not in (408, 429):
            raise _Permanent(_describe(exc)) from None
        raise
    except URLError as exc:
        if isinstance(exc.reason, socket.gaierror):
            raise _Permanent(f"cannot resolve the host ({exc.reason}); is this machine offline?") from None
        raise


def _transfer(url: str, part: Path, timeout: float, progress: bool, trusted: bool) -> bool:
    """One attempt: append to ``part`` from where it ends, or start over when the server ignores
    the Range, answers for another version of the file, or refuses a range we cannot vouch for.
    Returns whether the answer's framing (a Content-Length, or chunked encoding, whose end
    ``http.client`` checks) proved that the body arrived whole."""
    offset = part.stat().st_size if part.exists() else 0
    state = _read_state(part) if offset else None
    try:
        resp = _open(url, offset, timeout, _validator(state))
    except _RangeNotSatisfiable as err:
        if _known_complete(part, state, err):
            return True                   # a complete transfer, killed before its rename
        discard_partial(part)             # the partial file is not a prefix of this file
        offset, resp = 0, _open(url, 0, timeout, None)
    with resp:
        status = getattr(resp, "status", None) or 200
        if offset and not _resume_matches(resp, offset, state):
            if status == 206:             # the rest of another version: ask for the whole file
                resp.close()
                discard_partial(part)
                return _transfer(url, part, timeout, progress, trusted)
            offset = 0                    # a 200 answer carries the whole file: start over
        if offset == 0:
            _write_state(part, url, resp)
        length = resp.headers.get("Content-Length")
        expected = int(length) if length is not None and status in (200, 206) else None
        chunked = "chunked" in (resp.headers.get("Transfer-Encoding") or "").lower()
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
    return expected is not None or chunked


def _range_start(resp) -> int | None:
    value = resp.headers.get("Content-Range", "")        # "bytes 100-199/200"
    try:
        return int(value.split()[1].split("-")[0])
    except (IndexError, ValueError):
        return None


def _range_total(resp) -> int | None:
    return _content_range_total(resp.headers.get("Content-Range", ""))


def _content_range_total(value: str) -> int | None:
    """The complete length of "bytes 100-199/200" or "bytes */200" (None when unknown: "*")."""
    try:
        return int(value.rsplit("/", 1)[1])
    except (IndexError, ValueError):
        return None
