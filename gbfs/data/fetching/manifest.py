"""Dataset manifests and the on-disk layout of the data root.

A manifest is a committed JSON file ``<manifests>/<name>.json`` (``datasets/`` of the
repository) that says what to download and how to prepare it::

    {
      "name": "gisette", "version": 1, "format": "gisette",
      "title": "...", "citation": "...", "homepage": "...",
      "files": {"gisette_train.data": {"sha256": "6d4c...", "size": null}, ...},
      "sources": [
        {"type": "zip", "url": "https://.../gisette.zip",
         "members": {"gisette_train.data": "GISETTE/gisette_train.data", ...}},
        {"type": "files", "urls": {"gisette_train.data": "https://.../gisette_train.data", ...}}
      ],
      "splits": {"train": {"n_rows": 6000}, "test": {"n_rows": 1000}},
      "n_features": 5000,
      "prepare": {...format-specific options, e.g. Epsilon's subsample and its seed...}
    }

``sources`` are tried in order (the first is the primary, the others mirrors); a file
whose ``sha256`` is ``null`` has no published checksum and is verified against a local
lock file written at its first use instead (Flight), once its content passed the checks of
:mod:`gbfs.data.fetching.sanity`; its optional ``min_size`` (bytes) is the least a real copy can
weigh, which refuses error pages and cut transfers.

Layout of the data root (``<root>/<name>/`` is git-ignored)::

    <root>/<name>.json                 manifest (optional here: the repository's is used otherwise)
    <root>/<name>/raw/<file>           downloaded files, exactly as published
    <root>/<name>/raw/checksums.lock.json   sha256 of first uses without a published checksum
    <root>/<name>/raw/.sha256-cache.json    hashes keyed by size, mtime, inode and ctime (avoids
                                            re-hashing GBs; ``verify`` always re-hashes)
    <root>/<name>/prepared/<name>-v<version>-<key>.npz   parsed arrays, keyed by the raw hashes
    <root>/<name>/prepared/<name>-v<version>-<key>.npz.sha256   its own sha256 (``sha256sum -c``)
    <root>/<name>/.lock                     taken by writers only: a prepared dataset is read
                                            without it, so a read-only shared root works
"""

from __future__ import annotations

import errno
import json
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from .fsutil import is_not_writable

#: environment variable naming the data root (overridden by an explicit ``root`` argument)
ENV_DATA_DIR = "GBFS_DATA_DIR"
#: environment variable naming a mirror base URL that replaces the hosts of every source URL
ENV_MIRROR = "GBFS_DATA_MIRROR"

# The repository's datasets/ folder (present in a source checkout / editable install).
REPO_DATASETS = Path(__file__).resolve().parents[3] / "datasets"
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


class ManifestError(ValueError):
    """A manifest is missing or malformed."""


class DataRootError(PermissionError):
    """The data root is not writable and something needs writing there."""


@dataclass(frozen=True)
class Source:
    """One place to get files from: a ``zip`` archive or single ``files``."""

    type: str
    url: str | None = None                    # zip
    members: dict[str, str] = field(default_factory=dict)  # zip: file name -> member path
    urls: dict[str, str] = field(default_factory=dict)     # files: file name -> URL

    def url_for(self, filename: str) -> str | None:
        return self.urls.get(filename) if self.type == "files" else self.url


@dataclass(frozen=True)
class Manifest:
    """A parsed and validated dataset manifest (see the module docstring)."""

    name: str
    version: int
    format: str
    files: dict[str, dict]
    sources: tuple[Source, ...]
    splits: dict[str, dict]
    n_features: int | None
    prepare: dict
    title: str = ""
    citation: str = ""
    homepage: str = ""
    path: Path | None = None

    def sha256(self, filename: str) -> str | None:
        return self.files[filename].get("sha256")

    def size(self, filename: str) -> int | None:
        """Size in bytes where the manifest knows it (a file of another size is a mismatch)."""
        return self.files[filename].get("size")

    def min_size(self, filename: str) -> int | None:
        """The least size in bytes a real copy of a file without a published checksum can have."""
        return self.files[filename].get("min_size")

    @property
    def has_published_checksums(self) -> bool:
        return all(self.sha256(f) for f in self.files)


def data_root(root: str | os.PathLike | None = None) -> Path:
    """The data root: ``root`` if given, else ``$GBFS_DATA_DIR``, else the repository's
    ``datasets/`` folder, else ``~/.cache/gbfs/datasets`` (an installed, non-editable copy)."""
    if root is not None:
        return Path(root).expanduser().resolve()
    env = os.environ.get(ENV_DATA_DIR)
    if env:
        return Path(env).expanduser().resolve()
    if REPO_DATASETS.is_dir():
        return REPO_DATASETS
    return Path.home() / ".cache" / "gbfs" / "datasets"


def mirror_url(url: str, mirror: str | None) -> str:
    """Replace the scheme and host of ``url`` by the ``mirror`` base URL, keeping the path.

    ``mirror_url("https://host/a/b.csv", "http://127.0.0.1:8000/m")`` is
    ``"http://127.0.0.1:8000/m/a/b.csv"``.
    """
    if not mirror:
        return url
    base = urlsplit(mirror)
    if base.scheme not in ("http", "https", "file") or (base.scheme != "file" and not base.netloc):
        raise ValueError(f"mirror must be an http(s) base URL such as http://host:port/prefix, "
                         f"got {mirror!r}")
    parts = urlsplit(url)
    return urlunsplit((base.scheme, base.netloc, base.path.rstrip("/") + parts.path, parts.query, ""))


def manifest_path(name: str, root: str | os.PathLike | None = None) -> Path:
    """Where the manifest of ``name`` is: the data root first, then the repository's ``datasets/``."""
    if not re.fullmatch(r"[A-Za-z0-9_\-]+", name or ""):
        raise ValueError(f"name must be a dataset name such as 'gisette', got {name!r}")
    for folder in (data_root(root), REPO_DATASETS):
        candidate = folder / f"{name}.json"
        if candidate.is_file():
            return candidate
    known = sorted(available_manifests(root))
    searched = " or ".join(dict.fromkeys(map(str, (data_root(root), REPO_DATASETS))))
    raise ManifestError(f"no manifest for dataset {name!r} in {searched}; "
                        f"known datasets: {', '.join(known) or 'none'}")


def available_manifests(root: str | os.PathLike | None = None) -> list[str]:
    """Names of the datasets that have a manifest."""
    names = set()
    for folder in (data_root(root), REPO_DATASETS):
        if folder.is_dir():
            names.update(p.stem for p in folder.glob("*.json"))
    return sorted(names)


def read_manifest(name: str, root: str | os.PathLike | None = None) -> Manifest:
    """Read and validate the manifest of ``name``."""
    path = manifest_path(name, root)
    try:
        raw = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ManifestError(f"cannot read manifest {path}: {exc}") from exc
    return parse_manifest(raw, path)


def parse_manifest(raw: dict, path: Path | None = None) -> Manifest:
    """Validate a manifest dict; every error names the manifest and the offending key."""
    where = str(path) if path else "manifest"

    def need(key, kind):
        if not isinstance(raw.get(key), kind):
            raise ManifestError(f"{where}: key {key!r} must be a {kind.__name__}, got {raw.get(key)!r}")
        return raw[key]

    files = need("files", dict)
    for fname, meta in files.items():
        digest = meta.get("sha256") if isinstance(meta, dict) else "?"
        if digest is not None and not _SHA256.match(str(digest)):
            raise ManifestError(f"{where}: files.{fname}.sha256 must be 64 lowercase hex digits or null")
        for key in ("size", "min_size"):
            size = meta.get(key)
            if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 0):
                raise ManifestError(f"{where}: files.{fname}.{key} must be a byte count or null, "
                                    f"got {size!r}")
    sources = tuple(_parse_source(s, files, where) for s in need("sources", list))
    if not sources:
        raise ManifestError(f"{where}: 'sources' is empty")
    return Manifest(name=need("name", str), version=need("version", int), format=need("format", str),
                    files=files, sources=sources, splits=need("splits", dict),
                    n_features=raw.get("n_features"), prepare=raw.get("prepare", {}),
                    title=raw.get("title", ""), citation=raw.get("citation", ""),
                    homepage=raw.get("homepage", ""), path=path)


def _parse_source(src: dict, files: dict, where: str) -> Source:
    kind = src.get("type") if isinstance(src, dict) else None
    if kind == "zip":
        members = src.get("members", {})
        unknown = set(members) - set(files)
        if not isinstance(src.get("url"), str) or unknown:
            raise ManifestError(f"{where}: a zip source needs a 'url' and members among 'files' "
                                f"(unknown: {sorted(unknown)})")
        return Source(type="zip", url=src["url"], members=dict(members))
    if kind == "files":
        urls = src.get("urls", {})
        unknown = set(urls) - set(files)
        if not urls or unknown:
            raise ManifestError(f"{where}: a files source needs 'urls' for names among 'files' "
                                f"(unknown: {sorted(unknown)})")
        return Source(type="files", urls=dict(urls))
    raise ManifestError(f"{where}: source type must be 'zip' or 'files', got {kind!r}")


def dataset_dir(manifest: Manifest, root: str | os.PathLike | None = None) -> Path:
    return data_root(root) / manifest.name


def raw_dir(manifest: Manifest, root: str | os.PathLike | None = None) -> Path:
    return dataset_dir(manifest, root) / "raw"


def prepared_dir(manifest: Manifest, root: str | os.PathLike | None = None) -> Path:
    return dataset_dir(manifest, root) / "prepared"


@contextmanager
def dataset_lock(manifest: Manifest, root: str | os.PathLike | None = None,
                 purpose: str = "download and prepare it") -> Iterator[None]:
    """Hold an exclusive lock on ``<root>/<name>/.lock`` (parallel jobs of a multirun that load
    the same dataset download and prepare it once; the others wait, then reuse the files).

    Only writers take it: reading a prepared dataset needs no lock (every file is replaced
    atomically), so a read-only shared root works.  POSIX ``flock``; where it does not exist
    (Windows) this does not lock.

    Raises
    ------
    DataRootError
        The dataset's folder is not writable (``purpose`` says what needed writing).
    """
    folder = dataset_dir(manifest, root)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if not os.access(folder, os.W_OK | os.X_OK):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(folder))
        handle = _open_lock_file(folder / ".lock")
    except OSError as exc:
        if is_not_writable(exc):
            raise DataRootError(
                f"{folder} is not writable ({exc.strerror}), and dataset {manifest.name!r} needs to "
                f"{purpose}; run `python -m gbfs.data prepare {manifest.name}` once as a user who can write "
                f"there, or use a writable data root (--root / root= / ${ENV_DATA_DIR})") from exc
        raise
    with handle:
        try:
            import fcntl
        except ImportError:                 # pragma: no cover - Windows
            yield
            return
        try:
            fcntl.flock(handle, fcntl.LOCK_EX)
        except OSError as exc:
            # NFS emulates flock with POSIX locks, which need a file opened for writing
            raise DataRootError(f"cannot lock {handle.name} ({exc.strerror}): make it writable by every user "
                                f"of the data root (chmod g+w or a+w), or delete it") from exc
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _open_lock_file(path: Path):
    """The lock file, opened for appending; a lock file of another user that we may not write
    (umask 022 in a group-writable root) is opened for reading: ``flock`` works on it all the same."""
    try:
        return open(path, "a")
    except PermissionError:
        if not path.is_file():
            raise
        return open(path)
