"""A single-node SLURM cluster on this machine, for the tests of the submitit launcher
(``tests/harness/test_slurm.py``).

Debian's packages (``slurm-wlm``, ``slurmdbd``, ``munge``, ``mariadb-server``; ``.ci/run`` installs
them as root) run as child processes in the foreground, configured in a temporary folder: the
authentication daemon ``munged``, a MariaDB server, the accounting daemon ``slurmdbd``, the
controller ``slurmctld`` and the node daemon ``slurmd``.  No cgroups (``proctrack/linuxproc``,
``task/none``), every daemon as root, every state, spool and log file in the folder, ports chosen
free.  Client commands (``sbatch``, ``sacct``, ...) and the jobs find the cluster through
``SLURM_CONF`` (:attr:`SlurmCluster.env`).

Why accounting, and so a database: submitit learns that a job ended from the result file the job
writes, or, for a job that wrote none (cancelled, past its time limit, killed), from ``sacct``
alone (``submitit/slurm/slurm.py``: ``SlurmInfoWatcher`` runs ``sacct -o JobID,State,NodeList``,
bypasses its errors and has no fallback; a job whose state it cannot read stays ``UNKNOWN``, which
``Job.wait`` waits on for ever).  ``sacct`` without ``--completion`` reads the accounting storage
only, and without slurmdbd it fails with "Slurm accounting storage is disabled"
(``jobcomp/filetxt`` serves only ``sacct --completion``, which submitit never passes); slurmdbd
stores in MySQL/MariaDB only.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from runners.tracking.local_server import free_port

#: the programs the cluster needs, and the command that installs them
PROGRAMS = ("munged", "mariadbd", "mariadb-install-db", "slurmdbd", "slurmctld", "slurmd", "sbatch", "sacct")
INSTALL = "apt-get install -y slurm-wlm slurmdbd munge mariadb-server (as root)"
#: the partition of the cluster's one node
PARTITION = "gbfs"
#: seconds to wait for a daemon or the node; only reached when something is wrong
BOUND = 120.0


def why_not() -> str | None:
    """Why no cluster can be started here (a one-line reason saying how to get one), or None."""
    missing = [p for p in PROGRAMS if shutil.which(p) is None]
    if missing:
        return f"no SLURM cluster to start ({', '.join(missing)} missing): {INSTALL}"
    if os.geteuid() != 0:
        return "the single-node SLURM cluster runs its daemons as root (SlurmUser=root): run as root"
    return None


class SlurmCluster:
    """munged, MariaDB, slurmdbd, slurmctld and slurmd in a temporary folder (:meth:`stop` ends them)."""

    def __init__(self) -> None:
        # in /tmp under a short name: a Unix socket path holds ~100 bytes
        self.dir = Path(tempfile.mkdtemp(prefix="gbfs-slurm-", dir="/tmp"))
        self.host = socket.gethostname().split(".")[0]
        self.conf = self.dir / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        self.procs: list[tuple[str, subprocess.Popen]] = []
        self.logs: list = []

    # ----------------------------------------------------------------------------- daemons

    def _start(self, name: str, *argv: str) -> subprocess.Popen:
        log = open(self.dir / f"{name}.out", "wb")   # closed by stop()
        self.logs.append(log)
        proc = subprocess.Popen(list(argv), stdout=log, stderr=subprocess.STDOUT, cwd=self.dir, env=self.env,
                                start_new_session=True)
        self.procs.append((name, proc))
        return proc

    def _wait(self, what: str, ready) -> None:
        deadline = time.monotonic() + BOUND
        while not ready():
            for name, proc in self.procs:
                if proc.poll() is not None:
                    raise RuntimeError(f"{name} exited with {proc.returncode} while waiting for {what}:\n"
                                       f"{self.tail(name)}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"timed out after {BOUND:.0f} s waiting for {what}:\n{self.tail_all()}")
            time.sleep(0.2)   # the poll interval

    def tail(self, name: str) -> str:
        """The end of daemon ``name``'s output and log file."""
        parts = []
        for path in (self.dir / f"{name}.out", self.dir / f"{name}.log"):
            if path.exists():
                parts.append(path.read_text(errors="replace")[-2000:])
        return "\n".join(parts)

    def tail_all(self) -> str:
        return "\n".join(f"--- {name}\n{self.tail(name)}" for name, _ in self.procs)

    def run(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess:
        """A SLURM client command on this cluster."""
        res = subprocess.run(list(argv), capture_output=True, text=True, env=self.env, timeout=60)
        if check and res.returncode:
            raise RuntimeError(f"{' '.join(argv)} failed ({res.returncode}): {res.stderr[-2000:]}")
        return res

    def start(self) -> SlurmCluster:
        """Start the daemons in turn, each once the one before it answers; on a failure, stop them
        and raise ``RuntimeError`` with the end of the failing daemon's log."""
        try:
            self._munge()
            self._mariadb()
            self._slurmdbd()
            self._slurm()
        except BaseException:
            self.stop()
            raise
        return self

    def _munge(self) -> None:
        key = self.dir / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        self.munge_socket = self.dir / "munge.sock"
        # --force: munged refuses to run as root, and checks the folders' owners and modes
        self._start("munged", "munged", "--foreground", "--force", f"--key-file={key}",
                    f"--socket={self.munge_socket}", f"--pid-file={self.dir / 'munged.pid'}",
                    f"--log-file={self.dir / 'munged.log'}", f"--seed-file={self.dir / 'munged.seed'}")
        self._wait("munged", self.munge_socket.exists)

    def _mariadb(self) -> None:
        data = self.dir / "mariadb"
        res = subprocess.run(["mariadb-install-db", "--no-defaults", f"--datadir={data}", "--user=root",
                              "--skip-test-db", "--auth-root-authentication-method=normal"],
                             capture_output=True, text=True, timeout=300)
        if res.returncode:
            raise RuntimeError(f"mariadb-install-db failed ({res.returncode}): {res.stderr[-2000:]}")
        self.db_port = free_port()
        # no grant tables: slurmdbd connects as root without a password over TCP on 127.0.0.1
        self._start("mariadbd", "mariadbd", "--no-defaults", f"--datadir={data}", "--user=root",
                    f"--port={self.db_port}", "--bind-address=127.0.0.1",
                    f"--socket={self.dir / 'mysql.sock'}",
                    f"--pid-file={self.dir / 'mariadbd.pid'}", "--skip-grant-tables", "--skip-log-bin",
                    "--innodb-buffer-pool-size=64M", "--innodb-lock-wait-timeout=900")
        self._wait("MariaDB", lambda: _listening(self.db_port))

    def _slurmdbd(self) -> None:
        self.dbd_port = free_port()
        conf = self.dir / "slurmdbd.conf"
        conf.write_text("\n".join([
            "AuthType=auth/munge", f"AuthInfo=socket={self.munge_socket}",
            f"DbdHost={self.host}", "DbdAddr=127.0.0.1", f"DbdPort={self.dbd_port}", "SlurmUser=root",
            f"LogFile={self.dir / 'slurmdbd.log'}", f"PidFile={self.dir / 'slurmdbd.pid'}",
            "StorageType=accounting_storage/mysql", "StorageHost=127.0.0.1", f"StoragePort={self.db_port}",
            "StorageUser=root", "StorageLoc=slurm_acct_db", ""]))
        conf.chmod(0o600)   # slurmdbd refuses a configuration others can read (it may hold a password)
        self._write_slurm_conf()   # slurmdbd finds slurmdbd.conf next to $SLURM_CONF
        self._start("slurmdbd", "slurmdbd", "-D")
        self._wait("slurmdbd", lambda: _listening(self.dbd_port))
        self.run("sacctmgr", "-i", "add", "cluster", "gbfs")

    def _write_slurm_conf(self) -> None:
        self.ctld_port, self.slurmd_port = free_port(), free_port()
        cpus = os.cpu_count() or 1
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20
        self.conf.write_text("\n".join([
            "ClusterName=gbfs", f"SlurmctldHost={self.host}(127.0.0.1)",
            f"SlurmctldPort={self.ctld_port}", f"SlurmdPort={self.slurmd_port}",
            "AuthType=auth/munge", "CredType=cred/munge", f"AuthInfo=socket={self.munge_socket}",
            "SlurmUser=root", "SlurmdUser=root",
            f"StateSaveLocation={self.dir / 'state'}", f"SlurmdSpoolDir={self.dir / 'spool'}",
            f"SlurmctldPidFile={self.dir / 'slurmctld.pid'}", f"SlurmdPidFile={self.dir / 'slurmd.pid'}",
            f"SlurmctldLogFile={self.dir / 'slurmctld.log'}", f"SlurmdLogFile={self.dir / 'slurmd.log'}",
            # no cgroups: processes tracked by their parents, tasks not bound
            "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/slurmdbd", "AccountingStorageHost=127.0.0.1",
            f"AccountingStoragePort={self.dbd_port}",
            # the munge socket of the connections to slurmdbd: AuthInfo's is not used for those
            f"AccountingStoragePass={self.munge_socket}",
            "SelectType=select/cons_tres", "SelectTypeParameters=CR_CPU_Memory", "MpiDefault=none",
            # SLURM's default grace between SIGTERM and SIGKILL; finished jobs stay in squeue 5 min
            "ReturnToService=2", "KillWait=30", "MinJobAge=300", "SchedulerType=sched/backfill",
            f"NodeName={self.host} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={memory * 9 // 10}",
            f"PartitionName={PARTITION} Nodes=ALL Default=YES MaxTime=INFINITE State=UP", ""]))
        for folder in ("state", "spool"):
            (self.dir / folder).mkdir()

    def _slurm(self) -> None:
        self._start("slurmctld", "slurmctld", "-D")
        self._wait("slurmctld", lambda: self.run("scontrol", "ping", check=False).returncode == 0)
        self._start("slurmd", "slurmd", "-D", "-N", self.host)
        self._wait("the node to be idle", lambda: self.run("sinfo", "-h", "-o", "%T", check=False)
                   .stdout.strip() == "idle")

    # -------------------------------------------------------------------------------- jobs

    def jobs(self) -> list[str]:
        """The ids of the jobs in the queue (array tasks one by one)."""
        return self.run("squeue", "-h", "-r", "-o", "%i").stdout.split()

    def cancel_all(self) -> None:
        """Cancel every job and wait until the queue is empty."""
        if self.jobs():
            self.run("scancel", "-u", "root", check=False)
        self._wait("the queue to empty", lambda: not self.jobs())

    def stop(self) -> None:
        """Cancel the jobs, then end the daemons, the last started first, and delete the folder."""
        with contextlib.suppress(Exception):
            if any(name == "slurmd" and proc.poll() is None for name, proc in self.procs):
                self.cancel_all()
        for _name, proc in reversed(self.procs):
            _end(proc)
        for log in self.logs:
            log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def _listening(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
        return True
    return False


def _end(proc: subprocess.Popen) -> None:
    """SIGTERM, then SIGKILL if it lingers, to ``proc``'s own process group."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=30)
