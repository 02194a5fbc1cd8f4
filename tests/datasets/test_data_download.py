"""Downloads against a real HTTP server on 127.0.0.1 (tests/http_fixture.py)."""

from __future__ import annotations

import hashlib
import io
import json
import socket
import zipfile

import numpy as np
import pytest
from http_fixture import FileServer

from gbfs.data.fetching.download import (
    ChecksumError,
    DownloadError,
    RetryPolicy,
    fetch,
    fetch_dataset,
    file_status,
    read_lock,
)
from gbfs.data.fetching.manifest import mirror_url, parse_manifest, raw_dir

FAST = RetryPolicy(retries=3, backoff=0.01, timeout=5.0)
PAYLOAD = np.random.default_rng(0).bytes(300_000)      # several read chunks' worth
DIGEST = hashlib.sha256(PAYLOAD).hexdigest()


@pytest.fixture
def server():
    with FileServer() as srv:
        srv.files["/data/blob.bin"] = PAYLOAD
        yield srv


def _fetch(server, tmp_path, **kw):
    kw.setdefault("sha256", DIGEST)
    return fetch(server.url("/data/blob.bin"), tmp_path / "blob.bin", policy=FAST, progress=False, **kw)


def test_successful_download(server, tmp_path):
    assert _fetch(server, tmp_path) == DIGEST
    assert (tmp_path / "blob.bin").read_bytes() == PAYLOAD
    assert sorted(p.name for p in tmp_path.iterdir()) == ["blob.bin"]      # no .part left
    assert server.requests == [("/data/blob.bin", None)]


def test_resume_after_truncated_transfer(server, tmp_path):
    # an earlier run was killed after 100 000 bytes
    (tmp_path / "blob.bin.part").write_bytes(PAYLOAD[:100_000])
    assert _fetch(server, tmp_path) == DIGEST
    assert (tmp_path / "blob.bin").read_bytes() == PAYLOAD
    assert server.requests == [("/data/blob.bin", "bytes=100000-")]
    assert server.bytes_sent == len(PAYLOAD) - 100_000


def test_dropped_connection_is_retried_and_resumed(server, tmp_path):
    server.faults["/data/blob.bin"] = [("drop", 120_000)]
    sleeps = []
    assert _fetch(server, tmp_path, sleep=sleeps.append) == DIGEST
    assert (tmp_path / "blob.bin").read_bytes() == PAYLOAD
    assert [r for _, r in server.requests] == [None, "bytes=120000-"]
    assert sleeps == [0.01]


def test_server_errors_are_retried_with_backoff(server, tmp_path):
    server.faults["/data/blob.bin"] = ["500", "500"]
    sleeps = []
    assert _fetch(server, tmp_path, sleep=sleeps.append) == DIGEST
    assert sleeps == [0.01, 0.02]                                   # exponential backoff
    server.faults["/data/blob.bin"] = ["500"] * 10
    with pytest.raises(DownloadError, match=r"HTTP 500.*gave up after 4 attempts"):
        fetch(server.url("/data/blob.bin"), tmp_path / "other.bin", policy=FAST, progress=False,
              sleep=lambda s: None)
    assert not (tmp_path / "other.bin").exists()


def test_server_without_range_support_restarts(server, tmp_path):
    (tmp_path / "blob.bin.part").write_bytes(PAYLOAD[:5000])
    server.faults["/data/blob.bin"] = ["ignore_range"]
    assert _fetch(server, tmp_path) == DIGEST
    assert (tmp_path / "blob.bin").read_bytes() == PAYLOAD


def test_checksum_mismatch_leaves_nothing_that_looks_valid(server, tmp_path):
    server.files["/data/blob.bin"] = PAYLOAD[:-1] + b"x"
    with pytest.raises(ChecksumError, match="sha256 mismatch"):
        _fetch(server, tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_stale_partial_of_another_version_is_restarted_once(server, tmp_path):
    (tmp_path / "blob.bin.part").write_bytes(b"z" * 1000)          # not a prefix of the file
    assert _fetch(server, tmp_path) == DIGEST
    assert [r for _, r in server.requests] == ["bytes=1000-", None]


def test_404_is_an_error_without_retries(server, tmp_path):
    with pytest.raises(DownloadError, match=r"/data/nothing.bin: HTTP 404"):
        fetch(server.url("/data/nothing.bin"), tmp_path / "x", policy=FAST, progress=False)
    assert len(server.requests) == 1
    assert list(tmp_path.iterdir()) == []


def test_refused_connection_is_retried_then_fails(tmp_path):
    with socket.socket() as s:                                       # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sleeps = []
    with pytest.raises(DownloadError, match=rf"127.0.0.1:{port}/f.bin: .*refused.*4 attempts"):
        fetch(f"http://127.0.0.1:{port}/f.bin", tmp_path / "f.bin", policy=FAST, progress=False,
              sleep=sleeps.append)
    assert len(sleeps) == 3


def test_mirror_url_replaces_the_host():
    assert mirror_url("https://host.org/a/b.csv?x=1", "http://127.0.0.1:81/m/") == \
        "http://127.0.0.1:81/m/a/b.csv?x=1"
    assert mirror_url("https://host.org/a", None) == "https://host.org/a"
    with pytest.raises(ValueError, match="mirror must be"):
        mirror_url("https://host.org/a", "127.0.0.1:81")


# ----------------------------------------------------------------------------- whole datasets

def _manifest(files, sources):
    return parse_manifest({"name": "toy", "version": 1, "format": "gisette", "files": files,
                           "sources": sources, "splits": {}})


def test_dataset_from_mirror_with_local_lock(server, tmp_path):
    """No published checksum (Flight): the first download is recorded and later checks use it."""
    server.files["/bucket/a.csv"] = b"a,b\n1,2\n"
    m = _manifest({"a.csv": {"sha256": None}},
                  [{"type": "files", "urls": {"a.csv": "https://unreachable.invalid/bucket/a.csv"}}])
    status = fetch_dataset(m, tmp_path, mirror=server.base, policy=FAST, progress=False)
    assert status == {"a.csv": "locked"}
    folder = raw_dir(m, tmp_path)
    assert read_lock(folder) == {"a.csv": hashlib.sha256(b"a,b\n1,2\n").hexdigest()}
    (folder / "a.csv").write_bytes(b"a,b\n1,3\n")                   # changed behind our back
    assert file_status(m, "a.csv", tmp_path)[0] == "mismatch"
    with pytest.raises(ChecksumError, match="delete them to download again"):
        fetch_dataset(m, tmp_path, mirror=server.base, policy=FAST, progress=False)


def test_failure_names_every_url_and_the_manual_path(server, tmp_path):
    m = _manifest({"a.bin": {"sha256": DIGEST}},
                  [{"type": "files", "urls": {"a.bin": server.url("/primary/a.bin")}},
                   {"type": "files", "urls": {"a.bin": server.url("/mirror/a.bin")}}])
    with pytest.raises(DownloadError) as err:
        fetch_dataset(m, tmp_path, policy=FAST, progress=False)
    msg = str(err.value)
    assert "/primary/a.bin: HTTP 404" in msg and "/mirror/a.bin: HTTP 404" in msg
    assert f"place it by hand at: {raw_dir(m, tmp_path) / 'a.bin'}" in msg
    assert "python -m gbfs.data verify toy" in msg


def test_mirror_is_used_after_primary_fails(server, tmp_path):
    server.files["/mirror/a.bin"] = PAYLOAD
    m = _manifest({"a.bin": {"sha256": DIGEST}},
                  [{"type": "files", "urls": {"a.bin": server.url("/primary/a.bin")}},
                   {"type": "files", "urls": {"a.bin": server.url("/mirror/a.bin")}}])
    assert fetch_dataset(m, tmp_path, policy=FAST, progress=False) == {"a.bin": "verified"}
    assert [p for p, _ in server.requests] == ["/primary/a.bin", "/mirror/a.bin"]


def _zip(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buf.getvalue()


def test_zip_source_members_are_verified(server, tmp_path):
    good, bad = b"1 2 3 \n", b"-1\n1\n"
    files = {"x.data": {"sha256": hashlib.sha256(good).hexdigest()},
             "x.labels": {"sha256": hashlib.sha256(b"1\n-1\n").hexdigest()}}
    server.files["/pub/x.zip"] = _zip({"X/x.data": good, "x.labels": bad})     # labels corrupted
    server.files["/single/x.labels"] = b"1\n-1\n"
    m = _manifest(files, [{"type": "zip", "url": server.url("/pub/x.zip"), "members": {"x.data": "X/x.data"}},
                          {"type": "files", "urls": {"x.labels": server.url("/single/x.labels")}}])
    assert fetch_dataset(m, tmp_path, policy=FAST, progress=False) == \
        {"x.data": "verified", "x.labels": "verified"}
    folder = raw_dir(m, tmp_path)
    assert (folder / "x.labels").read_bytes() == b"1\n-1\n"
    assert not (folder / ".archives").exists() or not any((folder / ".archives").iterdir())
    assert not list(folder.glob("*.part"))


def test_hash_cache_follows_file_changes(tmp_path):
    m = _manifest({"a": {"sha256": hashlib.sha256(b"one").hexdigest()}},
                  [{"type": "files", "urls": {"a": "http://127.0.0.1:1/a"}}])
    folder = raw_dir(m, tmp_path)
    folder.mkdir(parents=True)
    (folder / "a").write_bytes(b"one")
    assert file_status(m, "a", tmp_path)[0] == "verified"
    assert "a" in json.loads((folder / ".sha256-cache.json").read_text())
    (folder / "a").write_bytes(b"two!")
    assert file_status(m, "a", tmp_path)[0] == "mismatch"


def test_file_placed_by_hand_is_locked_at_first_use(tmp_path):
    """No published checksum and not downloaded by us: its sha256 is recorded the first time the
    dataset is fetched or verified, and a later change is a mismatch."""
    m = _manifest({"a.csv": {"sha256": None}},
                  [{"type": "files", "urls": {"a.csv": "http://127.0.0.1:9/a.csv"}}])
    folder = raw_dir(m, tmp_path)
    folder.mkdir(parents=True)
    (folder / "a.csv").write_bytes(b"a,b\n1,2\n")
    assert file_status(m, "a.csv", tmp_path)[0] == "unlocked"
    assert fetch_dataset(m, tmp_path, policy=FAST, progress=False) == {"a.csv": "locked"}
    assert read_lock(folder) == {"a.csv": hashlib.sha256(b"a,b\n1,2\n").hexdigest()}
    (folder / "a.csv").write_bytes(b"a,b\n1,3\n")
    assert file_status(m, "a.csv", tmp_path)[0] == "mismatch"


def test_download_again_must_match_the_lock(server, tmp_path):
    """A file deleted and downloaded again is checked against its lock entry (upstream changed)."""
    server.files["/bucket/a.csv"] = b"a,b\n1,2\n"
    m = _manifest({"a.csv": {"sha256": None}},
                  [{"type": "files", "urls": {"a.csv": "https://unreachable.invalid/bucket/a.csv"}}])
    fetch_dataset(m, tmp_path, mirror=server.base, policy=FAST, progress=False)
    folder = raw_dir(m, tmp_path)
    (folder / "a.csv").unlink()
    server.files["/bucket/a.csv"] = b"a,b\n9,9\n"
    with pytest.raises(DownloadError, match="sha256"):
        fetch_dataset(m, tmp_path, mirror=server.base, policy=FAST, progress=False)
    assert not (folder / "a.csv").exists()
    assert read_lock(folder) == {"a.csv": hashlib.sha256(b"a,b\n1,2\n").hexdigest()}


def test_known_size_is_checked(tmp_path):
    m = _manifest({"a": {"sha256": None, "size": 3}}, [{"type": "files", "urls": {"a": "http://127.0.0.1:9/a"}}])
    folder = raw_dir(m, tmp_path)
    folder.mkdir(parents=True)
    (folder / "a").write_bytes(b"four")
    assert file_status(m, "a", tmp_path)[0] == "mismatch"
    with pytest.raises(ValueError, match="files.a.size must be a byte count"):
        _manifest({"a": {"sha256": None, "size": "3"}}, [{"type": "files", "urls": {"a": "http://x/a"}}])


def test_hash_cache_sees_an_edit_that_keeps_size_and_mtime(tmp_path):
    """The hash cache is keyed by size, mtime, inode and ctime (set by the kernel on every write and
    utime); verify (fresh=True) re-reads the file anyway."""
    import os

    m = _manifest({"a": {"sha256": hashlib.sha256(b"one").hexdigest()}},
                  [{"type": "files", "urls": {"a": "http://127.0.0.1:9/a"}}])
    folder = raw_dir(m, tmp_path)
    folder.mkdir(parents=True)
    path = folder / "a"
    path.write_bytes(b"one")
    assert file_status(m, "a", tmp_path)[0] == "verified"
    st = path.stat()
    path.write_bytes(b"two")                                       # same size ...
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))            # ... and the old mtime
    assert path.stat().st_mtime_ns == st.st_mtime_ns and path.stat().st_size == st.st_size
    assert file_status(m, "a", tmp_path)[0] == "mismatch"
    assert file_status(m, "a", tmp_path, fresh=True)[0] == "mismatch"


def test_stalled_server_times_out_and_is_retried(tmp_path):
    """A server that accepts the connection and never answers: each attempt ends at the timeout."""
    import time

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/slow.bin"
        start = time.perf_counter()
        with pytest.raises(DownloadError, match="gave up after 2 attempts") as err:
            fetch(url, tmp_path / "slow.bin", policy=RetryPolicy(retries=1, backoff=0.01, timeout=0.5),
                  progress=False)
        assert time.perf_counter() - start < 5
    assert "timed out" in str(err.value).lower()
    assert not (tmp_path / "slow.bin").exists()


def test_progress_bar_reports_the_bytes(server, tmp_path, capsys):
    assert fetch(server.url("/data/blob.bin"), tmp_path / "blob.bin", sha256=DIGEST, policy=FAST,
                 progress=True) == DIGEST
    err = capsys.readouterr().err                                  # tqdm writes to stderr
    assert "blob.bin" in err and "293k" in err.replace("K", "k")   # 300 000 bytes, binary units
