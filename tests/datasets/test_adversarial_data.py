"""The data layer under adversarial conditions: what a hostile network, a shared cluster file
system and a flipped bit do to trust-on-first-use checksums, read-only roots and caches.

Downloads go through a real HTTP server on 127.0.0.1 (tests/http_fixture.py) serving Flight's
exact benchm-ml CSV format at the committed manifest's URL paths.
"""

from __future__ import annotations

import bz2
import gzip
import hashlib
import io
import json
import lzma
import math
import os
import shutil
import stat
import tempfile
import traceback
import zipfile
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np
import pytest
from http_fixture import FileServer, validators
from test_data_formats import FLIGHT_HEADER, FLIGHT_TEST, FLIGHT_TRAIN

import gbfs.data.fetching.download as D
import gbfs.data.prepare as P
from gbfs.data import (
    CacheError,
    ContentError,
    DownloadError,
    LockFileError,
    load_dataset,
)
from gbfs.data.__main__ import main as cli
from gbfs.data.fetching.download import (
    ChecksumError,
    RetryPolicy,
    fetch,
    fetch_dataset,
    file_status,
    read_lock,
)
from gbfs.data.fetching.manifest import REPO_DATASETS, parse_manifest, raw_dir, read_manifest
from gbfs.data.fetching.sanity import problem

FAST = RetryPolicy(retries=2, backoff=0.0, timeout=5.0)
#: the single-stream compressions of a downloaded or own data file, by its suffix
STREAMS = {"gz": gzip.compress, "bz2": bz2.compress, "xz": lzma.compress}
COMMITTED = json.loads((REPO_DATASETS / "flight.json").read_text())
URL_PATH = {f: urlsplit(u).path for f, u in COMMITTED["sources"][0]["urls"].items()}
TRAIN, TEST = "train-0.1m.csv", "test.csv"


def _csv(rows) -> bytes:
    body = "".join(f'"{m}","{dm}","{dw}",{dep},"{car}","{o}","{d}",{dist},"{lab}"\n'
                   for m, dm, dw, dep, car, o, d, dist, lab in rows)
    return (FLIGHT_HEADER + "\n" + body).encode()


CONTENTS = {TRAIN: _csv(FLIGHT_TRAIN * 5), TEST: _csv(FLIGHT_TEST * 5)}
# "upstream" a year later: other rows, the same format
NEWER = {TRAIN: _csv(FLIGHT_TRAIN[::-1] * 5), TEST: _csv(FLIGHT_TEST[::-1] * 5)}


def _sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def _write_manifest(root: Path, n_rows=(20, 15), **file_meta) -> None:
    """The committed Flight manifest with the tiny files' row counts (``None``: unknown)."""
    m = json.loads(json.dumps(COMMITTED))
    m["splits"] = {"train": {"file": TRAIN, "n_rows": n_rows[0]}, "test": {"file": TEST, "n_rows": n_rows[1]}}
    for fname, meta in file_meta.items():
        m["files"][fname].update(meta)
    root.mkdir(parents=True, exist_ok=True)
    (root / "flight.json").write_text(json.dumps(m))


@pytest.fixture
def server():
    with FileServer() as srv:
        for fname, body in CONTENTS.items():
            srv.files[URL_PATH[fname]] = body
        yield srv


@pytest.fixture
def root(tmp_path):
    r = tmp_path / "root"
    _write_manifest(r)
    return r


def _download(root, server, **kw):
    return fetch_dataset(read_manifest("flight", root), root, mirror=server.base, policy=FAST,
                         progress=False, sleep=lambda s: None, **kw)


def _raw(root) -> Path:
    return root / "flight" / "raw"


def _place(root, contents=CONTENTS) -> None:
    _raw(root).mkdir(parents=True, exist_ok=True)
    for fname, body in contents.items():
        (_raw(root) / fname).write_bytes(body)


def _interrupt(root, server) -> None:
    """A download of test.csv killed after 200 bytes (no retries: the process died)."""
    server.faults[URL_PATH[TEST]] = [("drop", 200)]
    with pytest.raises(DownloadError, match="connection closed after 200"):
        fetch_dataset(read_manifest("flight", root), root, mirror=server.base, policy=RetryPolicy(retries=0),
                      progress=False)


def _requests(server, fname):
    return [rng for path, rng in server.requests if path == URL_PATH[fname]]


# ----------------------------------------------------------------------------- trust on first use

def test_body_cut_short_without_content_length_is_downloaded_again(root, server):
    server.faults[URL_PATH[TEST]] = [("truncate", 300)]
    assert _download(root, server) == {TRAIN: "locked", TEST: "locked"}
    assert _requests(server, TEST) == [None, None]                  # started over, not resumed
    assert read_lock(_raw(root)) == {f: _sha(b) for f, b in CONTENTS.items()}


@pytest.mark.parametrize("n_rows, cut", [((20, 15), "mid_line"), ((20, 15), "line_end"),
                                         ((None, None), "mid_line")])
def test_body_cut_short_every_time_is_never_locked(tmp_path, server, n_rows, cut):
    root = tmp_path / "root"
    _write_manifest(root, n_rows=n_rows)
    body = CONTENTS[TEST]
    end = body.index(b"\n", 200) + 1
    n = end if cut == "line_end" else end + 7
    server.faults[URL_PATH[TEST]] = [("truncate", n)] * 2
    with pytest.raises(DownloadError) as err:
        _download(root, server)
    assert "the download was deleted" in str(err.value)
    assert ("data rows, the manifest says 15" if cut == "line_end" else "cut short") in str(err.value)
    assert TEST not in read_lock(_raw(root)) and not (_raw(root) / TEST).exists()
    assert not list(_raw(root).glob("*.part*"))
    # the network recovers: the real file is accepted and locked
    assert _download(root, server)[TEST] == "locked"
    assert read_lock(_raw(root))[TEST] == _sha(body)


def test_min_size_refuses_a_body_cut_at_a_line_end_when_rows_are_unknown(tmp_path, server):
    root = tmp_path / "root"
    _write_manifest(root, n_rows=(None, None), **{TEST: {"min_size": len(CONTENTS[TEST]) - 50}})
    server.faults[URL_PATH[TEST]] = [("truncate", CONTENTS[TEST].index(b"\n", 200) + 1)] * 2
    with pytest.raises(DownloadError, match=r"a real copy has at least \d+ .*min_size"):
        _download(root, server)
    assert TEST not in read_lock(_raw(root))


def test_captive_portal_page_is_never_locked(root, server):
    server.faults[URL_PATH[TRAIN]] = ["html", "html"]
    with pytest.raises(DownloadError, match="HTML page, not the data file") as err:
        _download(root, server)
    assert "place it by hand at" in str(err.value)
    assert TRAIN not in read_lock(_raw(root))
    assert read_lock(_raw(root)) == {TEST: _sha(CONTENTS[TEST])}    # the good file was kept
    assert _download(root, server)[TRAIN] == "locked"
    ds = load_dataset("flight", root=root, download=False, progress=False)
    assert len(ds.y_train) + len(ds.y_val) == 20


def test_stale_partial_of_an_older_upstream_version_is_not_resumed(root, server):
    """A .part without the record of where it came from cannot be trusted: start from zero."""
    _raw(root).mkdir(parents=True)
    (_raw(root) / (TEST + ".part")).write_bytes(NEWER[TEST][:250])  # a different version's prefix
    _download(root, server)
    assert _requests(server, TEST) == [None]
    assert (_raw(root) / TEST).read_bytes() == CONTENTS[TEST]
    assert read_lock(_raw(root))[TEST] == _sha(CONTENTS[TEST])


@pytest.mark.parametrize("server_behaviour", [None, "ignore_if_range"])
def test_resume_after_upstream_changed_gets_the_new_file_whole(root, server, server_behaviour):
    """An interrupted download resumed after upstream changed: If-Range (or, for a server that
    ignores it, the ETag and length of the 206 answer) shows that the partial file is stale."""
    server.faults[URL_PATH[TEST]] = [("drop", 200)]
    _interrupt(root, server)
    assert (_raw(root) / (TEST + ".part")).stat().st_size == 200
    newer = NEWER[TEST] + _csv(FLIGHT_TEST)[len(FLIGHT_HEADER) + 1:]  # another length too
    server.files[URL_PATH[TEST]] = newer
    _write_manifest(root, n_rows=(20, 18))
    if server_behaviour:
        server.faults[URL_PATH[TEST]] = [server_behaviour]
    _download(root, server)
    assert (_raw(root) / TEST).read_bytes() == newer
    assert read_lock(_raw(root))[TEST] == _sha(newer)
    assert server.if_ranges[-1 if server_behaviour is None else -2] == validators(CONTENTS[TEST])[0]


def test_resume_of_the_same_version_only_fetches_the_rest(root, server):
    _interrupt(root, server)
    sent = server.bytes_sent
    _download(root, server)
    assert _requests(server, TEST)[-1] == "bytes=200-"
    assert server.bytes_sent - sent == len(CONTENTS[TEST]) - 200
    assert read_lock(_raw(root))[TEST] == _sha(CONTENTS[TEST])


def test_416_on_resume_of_an_incomplete_partial_restarts_from_zero(root, server):
    _interrupt(root, server)
    server.faults[URL_PATH[TEST]] = ["416"]
    _download(root, server)
    assert _requests(server, TEST)[-2:] == ["bytes=200-", None]
    assert read_lock(_raw(root))[TEST] == _sha(CONTENTS[TEST])


def test_416_for_a_partial_known_complete_is_accepted(tmp_path, server):
    """Killed after the last byte but before the rename: the record shows the .part is whole."""
    url = server.url(URL_PATH[TEST])
    part = tmp_path / (TEST + ".part")
    part.write_bytes(CONTENTS[TEST])
    etag, modified = validators(CONTENTS[TEST])
    Path(str(part) + ".json").write_text(json.dumps({"url": url, "etag": etag, "last_modified": modified,
                                                     "length": len(CONTENTS[TEST])}))
    assert fetch(url, tmp_path / TEST, policy=FAST, progress=False) == _sha(CONTENTS[TEST])
    assert server.bytes_sent == 0 and sorted(p.name for p in tmp_path.iterdir()) == [TEST]


def test_416_for_a_stale_partial_with_a_published_checksum_restarts(tmp_path, server):
    url, body = server.url(URL_PATH[TEST]), CONTENTS[TEST]
    (tmp_path / (TEST + ".part")).write_bytes(b"z" * len(body))       # as long, other bytes
    assert fetch(url, tmp_path / TEST, sha256=_sha(body), policy=FAST, progress=False) == _sha(body)
    assert _requests(server, TEST) == [f"bytes={len(body)}-", None]


def test_file_refused_by_the_lock_names_the_lock_and_how_to_reset_it(root, server, capsys):
    _download(root, server)
    lock = _raw(root) / "checksums.lock.json"
    (_raw(root) / TEST).unlink()
    server.files[URL_PATH[TEST]] = NEWER[TEST]                       # upstream changed
    with pytest.raises(DownloadError) as err:
        _download(root, server)
    msg = str(err.value)
    assert f"expected {_sha(CONTENTS[TEST])}" in msg and str(lock) in msg
    assert "python -m gbfs.data unlock flight test.csv" in msg
    assert cli(["unlock", "flight", TEST, "--root", str(root)]) == 0
    assert f"removed from {lock}: test.csv" in capsys.readouterr().out
    assert read_lock(_raw(root)) == {TRAIN: _sha(CONTENTS[TRAIN])}
    assert _download(root, server)[TEST] == "locked"
    assert read_lock(_raw(root))[TEST] == _sha(NEWER[TEST])
    # a local copy changed behind our back: the error says the same
    (_raw(root) / TEST).write_bytes(CONTENTS[TEST])
    with pytest.raises(ChecksumError, match=r"does not match the local lock.*unlock flight test.csv"):
        load_dataset("flight", root=root, download=False, progress=False)
    assert cli(["unlock", "flight", "gisette_train.data", "--root", str(root)]) == 1


@pytest.mark.parametrize("text", ["{not json", "[]", '{"test.csv": 5}', '{"test.csv": "abc"}', ""])
def test_corrupt_lock_file_is_an_error_naming_it(root, text):
    _place(root)
    load_dataset("flight", root=root, download=False, progress=False)
    lock = _raw(root) / "checksums.lock.json"
    lock.write_text(text)
    with pytest.raises(LockFileError) as err:
        load_dataset("flight", root=root, download=False, progress=False)
    assert str(lock) in str(err.value) and "python -m gbfs.data unlock flight" in str(err.value)
    assert lock.read_text() == text                                  # never re-locked silently
    assert cli(["info", "flight", "--root", str(root)]) == 1
    assert cli(["unlock", "flight", "--root", str(root)]) == 0       # the explicit reset
    load_dataset("flight", root=root, download=False, progress=False)
    assert read_lock(_raw(root)) == {f: _sha(b) for f, b in CONTENTS.items()}


def test_file_placed_by_hand_must_be_plausible_before_it_is_locked(root):
    _place(root, {TRAIN: CONTENTS[TRAIN], TEST: b"<html><body>Access denied</body></html>\n"})
    with pytest.raises(ContentError, match=rf"{_raw(root) / TEST} is not a plausible copy.*HTML page"):
        load_dataset("flight", root=root, download=False, progress=False)
    assert TEST not in read_lock(_raw(root))


def compressed(kind: str, data: bytes, member: str = "member.txt") -> bytes:
    """``data`` compressed as a ``kind`` file (``gz``, ``bz2``, ``xz``; ``zip``: one ``member``)."""
    if kind in STREAMS:
        return STREAMS[kind](data)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(member, data)
    return buf.getvalue()


@pytest.mark.parametrize("kind", ["bz2", "gz", "zip"])
def test_compressed_file_without_checksum_must_decompress_to_its_end(tmp_path, server, kind):
    body = compressed(kind, np.random.default_rng(0).bytes(50_000).hex().encode())
    fname = f"a.{kind}"
    server.files[f"/pub/{fname}"] = body
    m = parse_manifest({"name": "toy", "version": 1, "format": "gisette", "splits": {},
                        "files": {fname: {"sha256": None}},
                        "sources": [{"type": "files", "urls": {fname: server.url(f"/pub/{fname}")}}]})
    server.faults[f"/pub/{fname}"] = [("truncate", len(body) * 2 // 3)] * 2
    with pytest.raises(DownloadError, match=f"not a complete {kind}"):
        fetch_dataset(m, tmp_path, policy=FAST, progress=False)
    assert read_lock(raw_dir(m, tmp_path)) == {}
    assert fetch_dataset(m, tmp_path, policy=FAST, progress=False) == {fname: "locked"}


def test_content_checks_of_a_flight_csv(tmp_path):
    m = read_manifest("flight", None)
    path = tmp_path / "x.csv"

    def check(data: bytes, fname=TEST):
        path.write_bytes(data)
        return problem(m, fname, path)

    assert "100000" in check(CONTENTS[TEST])                         # the manifest's row count
    assert check(b"") == "it is empty"
    assert "HTML page" in check(b"\xef\xbb\xbf  <!doctype html><title>x</title>\n")
    assert "expected columns" in check(b'"Month","Dest"\n"c-1","ATL"\n')
    assert "cut short" in check(CONTENTS[TEST][:-3])
    bad = CONTENTS[TEST].replace(b'"N"\n', b'"maybe"\n', 1)
    m_small = parse_manifest({**COMMITTED, "splits": {"train": {"file": TRAIN, "n_rows": None},
                                                       "test": {"file": TEST, "n_rows": None}}})
    path.write_bytes(bad)
    assert "'Y' or 'N', found 'maybe'" in problem(m_small, TEST, path)
    path.write_bytes(CONTENTS[TEST].replace(b",615,", b",NA,"))
    assert "DepTime must be numeric" in problem(m_small, TEST, path)
    path.write_bytes(CONTENTS[TEST])
    assert problem(m_small, TEST, path) is None


# ----------------------------------------------------------------------------- shared, read-only roots

def _as_another_user(fn) -> tuple[int, str]:
    """Run ``fn()`` in a forked child that cannot write the data root: as root, the child becomes
    ``nobody`` (root's chmod would not stop root's writes); otherwise the caller made the folders
    read-only.  Returns (exit status, fn's result or the child's traceback)."""
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:                                                   # pragma: no cover - the child
        code = 1
        try:
            os.close(rfd)
            if os.geteuid() == 0:
                os.setgroups([])
                os.setgid(65534)
                os.setuid(65534)
            out, code = str(fn()), 0
        except BaseException:
            out = traceback.format_exc()
        finally:
            os.write(wfd, out.encode())
            os._exit(code)
    os.close(wfd)
    with os.fdopen(rfd, "rb") as r:
        out = r.read().decode()
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), out


@pytest.fixture
def shared_root():
    """A data root a second user can read but not write (outside pytest's 0700 temp folders)."""
    base = Path(tempfile.mkdtemp(prefix="gbfs-shared-"))
    base.chmod(0o755)
    old = os.umask(0o022)
    try:
        yield base / "root"
    finally:
        os.umask(old)
        for folder, dirs, _ in os.walk(base):
            for d in dirs:
                (Path(folder) / d).chmod(0o755)
        shutil.rmtree(base)


def _read_only(root: Path) -> None:
    if os.geteuid() != 0:                                          # as root the child drops privileges
        for folder, dirs, _ in os.walk(root):
            for d in dirs:
                (Path(folder) / d).chmod(0o555)
        root.chmod(0o555)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_reading_a_prepared_dataset_needs_no_write_access(shared_root):
    root = shared_root
    _write_manifest(root)
    _place(root)
    mine = load_dataset("flight", root=root, download=False, progress=False)
    npz = Path(mine.source)
    _read_only(root)

    def load():
        ds = load_dataset("flight", root=root, download=False, progress=False)
        return f"{ds.X_train.sum():.3f} {ds.checksum}"

    code, out = _as_another_user(load)
    assert code == 0, out
    assert out == f"{mine.X_train.sum():.3f} {mine.checksum}"
    # nothing prepared yet: the error says the root is not writable and what needed writing
    if os.geteuid() != 0:
        npz.parent.chmod(0o755)
    npz.unlink()
    P.sidecar_path(npz).unlink()
    _read_only(root)
    code, out = _as_another_user(load)
    assert code == 1 and "DataRootError" in out and "is not writable" in out
    assert f"needs to parse its raw files into {npz}" in out


def test_prepared_dataset_is_read_without_the_lock(root, monkeypatch):
    _place(root)
    first = load_dataset("flight", root=root, download=False, progress=False)

    def no_lock(*a, **k):
        raise PermissionError(13, "Permission denied", str(root / "flight" / ".lock"))

    monkeypatch.setattr(P, "dataset_lock", no_lock)
    monkeypatch.setattr(D, "write_json_atomic", no_lock)           # no hash cache can be written
    again = load_dataset("flight", root=root, download=False, progress=False)
    np.testing.assert_array_equal(again.X_test, first.X_test)


@pytest.mark.parametrize("umask, mode", [(0o027, 0o640), (0o002, 0o664)])
def test_written_files_get_the_umask_permissions(tmp_path, server, umask, mode):
    root = tmp_path / "root"
    _write_manifest(root)
    old = os.umask(umask)
    try:
        ds = load_dataset("flight", root=root, mirror=server.base, progress=False)
    finally:
        os.umask(old)
    npz = Path(ds.source)
    written = [_raw(root) / TRAIN, _raw(root) / TEST, _raw(root) / "checksums.lock.json",
               _raw(root) / ".sha256-cache.json", npz, P.sidecar_path(npz), root / "flight" / ".lock"]
    assert {p.name: oct(stat.S_IMODE(p.stat().st_mode)) for p in written} == \
        {p.name: oct(mode) for p in written}


# ----------------------------------------------------------------------------- the prepared cache

def _corrupt(path: Path, how: str) -> None:
    data = path.read_bytes()
    if how == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif how == "bit_flip":
        i = len(data) // 3
        path.write_bytes(data[:i] + bytes([data[i] ^ 0x10]) + data[i + 1:])
    elif how == "rewritten":                                        # a valid npz, other values
        with np.load(path) as npz:
            arrays = {k: npz[k] for k in npz.files}
        arrays["X_test"] = arrays["X_test"] + 1
        np.savez_compressed(path, **arrays)
    else:
        path.write_bytes(b"")


@pytest.mark.parametrize("how", ["truncated", "bit_flip", "rewritten", "empty"])
def test_corrupt_prepared_cache_is_rebuilt_once(root, how):
    _place(root)
    first = load_dataset("flight", root=root, download=False, progress=False)
    npz = Path(first.source)
    _corrupt(npz, how)
    with pytest.warns(RuntimeWarning, match=rf"{npz.name}.*rebuilding it from the raw files"):
        again = load_dataset("flight", root=root, download=False, progress=False)
    np.testing.assert_array_equal(again.X_test, first.X_test)
    assert P.sidecar_path(npz).read_text() == f"{_sha(npz.read_bytes())}  {npz.name}\n"


def test_cache_that_cannot_be_rebuilt_is_an_error_naming_it(root, monkeypatch):
    _place(root)
    npz = Path(load_dataset("flight", root=root, download=False, progress=False).source)
    _corrupt(npz, "truncated")
    real = P.write_npz_atomic

    def failing_disk(target, arrays):
        real(target, arrays)
        _corrupt(target, "bit_flip")

    monkeypatch.setattr(P, "write_npz_atomic", failing_disk)
    with pytest.warns(RuntimeWarning), pytest.raises(CacheError, match=rf"{npz}.*still does not read back"):
        load_dataset("flight", root=root, download=False, progress=False)


def test_cache_of_an_earlier_version_is_parsed_and_recorded(root, monkeypatch):
    _place(root)
    first = load_dataset("flight", root=root, download=False, progress=False)
    npz = Path(first.source)
    P.sidecar_path(npz).unlink()                                   # as written before the records

    def boom(*a):
        raise AssertionError("parsed the raw files again")

    with monkeypatch.context() as mp:
        mp.setitem(P.PREPARERS, "benchm_ml_csv", boom)
        again = load_dataset("flight", root=root, download=False, progress=False)
    np.testing.assert_array_equal(again.X_train, first.X_train)
    assert P.sidecar_path(npz).read_text() == f"{_sha(npz.read_bytes())}  {npz.name}\n"
    # an old cache that does not parse is rebuilt
    P.sidecar_path(npz).unlink()
    _corrupt(npz, "truncated")
    with pytest.warns(RuntimeWarning, match="cannot read the prepared cache"):
        again = load_dataset("flight", root=root, download=False, progress=False)
    np.testing.assert_array_equal(again.X_train, first.X_train)


def test_unreadable_cache_errors_name_the_file(root, capsys):
    _place(root)
    npz = Path(load_dataset("flight", root=root, download=False, progress=False).source)
    _corrupt(npz, "truncated")
    with pytest.raises(CacheError, match=str(npz)):
        P.read_prepared(npz)
    assert cli(["info", "flight", "--root", str(root)]) == 0
    out = capsys.readouterr().out
    assert "SHA256 MISMATCH" in out and "UNREADABLE" in out and "rebuilds it" in out


# ----------------------------------------------------------------------------- the hash cache

def test_raw_file_edited_keeping_size_and_mtime_is_refused(root):
    _place(root)
    load_dataset("flight", root=root, download=False, progress=False)
    path = _raw(root) / TEST
    st = path.stat()
    path.write_bytes(CONTENTS[TEST].replace(b'"N"', b'"Y"', 1))    # same size
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))             # the old mtime
    assert (path.stat().st_size, path.stat().st_mtime_ns) == (st.st_size, st.st_mtime_ns)
    with pytest.raises(ChecksumError, match="does not match the local lock"):
        load_dataset("flight", root=root, download=False, progress=False)


def test_hash_cache_trusts_only_unchanged_files(root, monkeypatch):
    """A settled entry (hashed well after the file's last change) is reused; a file replaced by
    one of the same size and mtime (another inode, a new ctime) is hashed again."""
    _place(root)
    m = read_manifest("flight", root)
    calls = []
    real = D.sha256_file
    monkeypatch.setattr(D, "sha256_file", lambda p: calls.append(Path(p).name) or real(p))
    assert file_status(m, TEST, root)[0] == "unlocked" and calls == [TEST]
    # just hashed: the file may still change within the file system's timestamp tick
    assert file_status(m, TEST, root)[0] == "unlocked" and calls == [TEST, TEST]
    monkeypatch.setattr(D, "RACY_NS", -10**18)                     # as if hashed long after
    file_status(m, TEST, root)
    n = len(calls)
    assert file_status(m, TEST, root)[0] == "unlocked" and len(calls) == n
    path, st = _raw(root) / TEST, (_raw(root) / TEST).stat()
    tmp = path.with_name("edited")
    tmp.write_bytes(CONTENTS[TEST].replace(b'"N"', b'"Y"', 1))
    os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.replace(tmp, path)
    assert file_status(m, TEST, root)[1] == _sha(path.read_bytes()) and len(calls) == n + 1


def test_cli_info_says_where_the_status_comes_from(root, capsys):
    _place(root)
    load_dataset("flight", root=root, download=False, progress=False)
    assert cli(["info", "flight", "--root", str(root)]) == 0
    out = capsys.readouterr().out
    assert "from the hash cache" in out and "`verify` re-hashes every file" in out
    assert "checksum: ok, matches the sha256 recorded when it was written" in out


# ----------------------------------------------------------------------------- argument errors

@pytest.mark.parametrize("name", ["flight", "gisette_like", "breast_cancer"])
@pytest.mark.parametrize("kwargs, argument", [
    ({"scale": "abc"}, "scale"), ({"scale": "0.5"}, "scale"), ({"scale": True}, "scale"),
    ({"scale": math.nan}, "scale"), ({"scale": -0.5}, "scale"), ({"scale": 0}, "scale"),
    ({"scale": math.inf}, "scale"), ({"scale": None}, "scale"),
    ({"val_fraction": "abc"}, "val_fraction"), ({"val_fraction": True}, "val_fraction"),
    ({"val_fraction": math.nan}, "val_fraction"), ({"val_fraction": 1.0}, "val_fraction"),
    ({"seed": -1}, "seed"), ({"seed": 1.5}, "seed"), ({"seed": True}, "seed"), ({"seed": "0"}, "seed")])
def test_argument_errors_name_the_argument_before_any_work(tmp_path, name, kwargs, argument):
    missing_root = tmp_path / "nowhere"                              # no manifest, no download
    with pytest.raises(ValueError, match=rf"^{argument} must be"):
        load_dataset(name, root=missing_root, **kwargs)
    assert not missing_root.exists()


def test_numpy_numbers_are_valid_arguments():
    ds = load_dataset("breast_cancer", scale=np.float32(0.5), val_fraction=np.float32(0.25), seed=np.int64(1))
    assert len(ds.y_test) == pytest.approx(143 / 2, abs=1)
