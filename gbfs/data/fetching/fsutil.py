"""File-system helpers of the data layer: atomic writes with the umask's permissions.

Every file the data layer writes goes to a uniquely named temporary file in the target's
folder and is renamed over the target (``os.replace``), so a reader sees the old file or the
new one, never half of one.  ``tempfile.mkstemp`` creates its file with mode 0600; the
finished file is given ``0o666 & ~umask`` instead, as ``open()`` would, so a data root shared
by several users (a cluster's group-writable folder, umask 002) stays readable by all of them.
"""

from __future__ import annotations

import errno
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

#: prefix of every temporary file (a writer killed mid-write leaves ``.tmp-*`` behind)
TMP_PREFIX = ".tmp-"
#: errno values that mean "this place is not writable by us"
NOT_WRITABLE = (errno.EACCES, errno.EPERM, errno.EROFS)


def current_umask() -> int:
    """The process umask, read without changing it where the OS allows (Linux ``/proc``)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    # os.umask can only be read by setting it; set it straight back.
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def file_mode() -> int:
    """Permissions of a new regular file: ``0o666 & ~umask``."""
    return 0o666 & ~current_umask()


def atomic_write(path: str | os.PathLike, write: Callable[[BinaryIO], None], *, fsync: bool = False) -> None:
    """Write ``path`` atomically: ``write(f)`` fills a temporary file in the same folder, which is
    given the umask's permissions and renamed over ``path``.

    Parameters
    ----------
    path : path
        The target; its folder is created if needed.
    write : callable
        Called with the open binary temporary file.
    fsync : bool
        Flush the data to disk before the rename (large caches: a crash right after the rename
        then cannot leave an empty file under the final name).

    Raises
    ------
    OSError
        The folder is not writable, the disk is full, ...; no temporary file is left behind.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f"{TMP_PREFIX}{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            if fsync:
                os.fsync(f.fileno())
        os.chmod(tmp, file_mode())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json_atomic(path: str | os.PathLike, data: dict) -> None:
    """``data`` as indented JSON with sorted keys, written with :func:`atomic_write`."""
    blob = (json.dumps(data, indent=1, sort_keys=True) + "\n").encode()
    atomic_write(path, lambda f: f.write(blob))


def is_not_writable(exc: OSError) -> bool:
    """Whether ``exc`` says the file system refused a write (permissions, read-only mount)."""
    return isinstance(exc, PermissionError) or exc.errno in NOT_WRITABLE
