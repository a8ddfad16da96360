"""Scratch folders of Spark drivers (``spark.local.dir``): who owns one, and which ones nobody owns any more.

:func:`~engine.runtime.spark.session.get_or_create_spark` gives every session a fresh
``sluice-spark-*`` folder under the temp dir for Spark's block manager and shuffle files, and
``stop_spark`` removes it.  A driver killed with SIGKILL (or a host that lost power) never reaches
``stop_spark``, so its folder stays forever (issue 17: every killed driver left one).  Nothing in
the folder says whether its driver still runs, so :func:`create_scratch_dir` writes an owner
marker into it before Spark sees it::

    .sluice-owner.json  {"format_version": 1, "host", "pid", "boot_id", "start_ticks", "create_time_s", "created_ms"}

A pid alone cannot tell whether the owner is gone: pids are reused, so a live process with the
owner's pid may be another program (the folder is orphaned then), and the owner may still run.
The owner is the process with that pid *and* that start: on Linux its start in clock ticks since
boot (``/proc/<pid>/stat`` field 22) within the same boot (``/proc/sys/kernel/random/boot_id``),
exact and unaffected by wall-clock steps; elsewhere psutil's create time, which must agree within
a second (psutil is optional there: without it nothing is judged gone).

Never judged orphaned, so never removed: a folder whose marker names another host (a temp dir on
a shared disk: only that host can tell), a folder without a readable marker (made by a Sluice
before this one, or by a driver killed in the instant between creating the folder and writing
its marker), a folder of another user, and anything that is not a real directory (a symlink).
"""

from __future__ import annotations

import enum
import json
import os
import shutil
import socket
import stat
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from engine.errors import UnsupportedFormatVersion

SCRATCH_PREFIX = "sluice-spark-"
OWNER_FILE = ".sluice-owner.json"
OWNER_FORMAT_VERSION = 1
#: how far two readings of one process's create time may differ where it is computed from the wall clock
_CREATE_TIME_TOLERANCE_S = 1.0
_BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


class OwnerStatus(enum.Enum):
    """Whether the process a scratch folder's marker names still runs, as far as this host can tell."""

    RUNNING = "running"
    EXITED = "exited"
    PID_REUSED = "pid reused"
    REBOOTED = "rebooted"
    OTHER_HOST = "other host"
    UNKNOWN = "unknown"

    def is_gone(self) -> bool:
        """The owner can never use the folder again: only then may the folder be removed."""
        return self in (OwnerStatus.EXITED, OwnerStatus.PID_REUSED, OwnerStatus.REBOOTED)


@dataclass(frozen=True, slots=True)
class ScratchOwner:
    """The process that created a scratch folder; see the module docstring for how it is recognised."""

    host: str
    pid: int
    boot_id: str | None
    start_ticks: int | None
    create_time_s: float | None
    created_ms: int
    format_version: int = OWNER_FORMAT_VERSION

    @staticmethod
    def of_this_process() -> ScratchOwner:
        pid = os.getpid()
        linux = _linux_process(pid)
        return ScratchOwner(socket.gethostname(), pid, _boot_id(), None if linux is None else linux[1],
                            _psutil_create_time(pid), int(time.time() * 1000))

    def to_json(self) -> bytes:
        return json.dumps({"format_version": self.format_version, "host": self.host, "pid": self.pid,
                           "boot_id": self.boot_id, "start_ticks": self.start_ticks,
                           "create_time_s": self.create_time_s, "created_ms": self.created_ms}).encode("utf-8")

    @staticmethod
    def from_json(data: bytes | str) -> ScratchOwner:
        """Refuses an unknown ``format_version`` (UnsupportedFormatVersion) and malformed fields (ValueError)."""
        document = json.loads(data)
        if not isinstance(document, dict):
            raise ValueError(f"a scratch owner marker is a JSON object; got {type(document).__name__}")
        version = document.get("format_version")
        if version != OWNER_FORMAT_VERSION:
            raise UnsupportedFormatVersion(
                f"scratch owner marker has format_version {version!r}; this Sluice reads {OWNER_FORMAT_VERSION}")
        host, pid, boot_id = document.get("host"), document.get("pid"), document.get("boot_id")
        ticks, create_time, created = document.get("start_ticks"), document.get("create_time_s"), \
            document.get("created_ms")
        if not isinstance(host, str) or type(pid) is not int or pid < 1 or type(created) is not int \
                or not (boot_id is None or isinstance(boot_id, str)) \
                or not (ticks is None or type(ticks) is int) \
                or not (create_time is None or type(create_time) in (int, float)):
            raise ValueError(f"scratch owner marker has malformed fields: {document!r}")
        return ScratchOwner(host, pid, boot_id, ticks, None if create_time is None else float(create_time), created)

    def status(self) -> OwnerStatus:
        if self.host != socket.gethostname():
            return OwnerStatus.OTHER_HOST
        boot_id = _boot_id()
        if self.boot_id is not None and boot_id is not None and boot_id != self.boot_id:
            return OwnerStatus.REBOOTED
        if self.start_ticks is not None and boot_id is not None:
            process = _linux_process(self.pid)
            if process is None or process[0] in ("Z", "X"):  # a zombie is dead, only not yet reaped
                return OwnerStatus.EXITED
            return OwnerStatus.RUNNING if process[1] == self.start_ticks else OwnerStatus.PID_REUSED
        return self._status_by_create_time()

    def _status_by_create_time(self) -> OwnerStatus:
        try:
            import psutil
        except ImportError:
            return OwnerStatus.UNKNOWN
        try:
            process = psutil.Process(self.pid)
            create_time, zombie = process.create_time(), process.status() == psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return OwnerStatus.EXITED
        except psutil.Error:
            return OwnerStatus.UNKNOWN
        if zombie:
            return OwnerStatus.EXITED
        if self.create_time_s is None:
            return OwnerStatus.UNKNOWN
        same = abs(create_time - self.create_time_s) <= _CREATE_TIME_TOLERANCE_S
        return OwnerStatus.RUNNING if same else OwnerStatus.PID_REUSED

    def describe(self) -> str:
        started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(self.created_ms / 1000))
        return f"pid {self.pid} on {self.host}, folder made {started}"


@dataclass(frozen=True, slots=True)
class OrphanedScratchFolder:
    path: str
    reason: str
    bytes: int
    last_modified_ms: int


def create_scratch_dir(parent: str | None = None) -> str:
    """A fresh ``sluice-spark-*`` folder under ``parent`` (default: the temp dir) with this process's owner marker."""
    path = tempfile.mkdtemp(prefix=SCRATCH_PREFIX, dir=parent)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path)
    with os.fdopen(fd, "wb") as f:
        f.write(ScratchOwner.of_this_process().to_json())
    os.replace(tmp, os.path.join(path, OWNER_FILE))  # a reader sees a whole marker or none
    return path


def find_orphaned_scratch_folders(parent: str | None = None) -> tuple[list[OrphanedScratchFolder], list[str]]:
    """The ``sluice-spark-*`` folders under ``parent`` (default: the temp dir) whose owner is gone, and notes on
    those left alone for another reason than a running owner (no marker, another host, cannot tell)."""
    parent = parent if parent is not None else tempfile.gettempdir()
    orphans: list[OrphanedScratchFolder] = []
    notes: list[str] = []
    try:
        names = sorted(n for n in os.listdir(parent) if n.startswith(SCRATCH_PREFIX))
    except FileNotFoundError:
        return [], [f"scratch folders: {parent} does not exist"]
    for name in names:
        path = os.path.join(parent, name)
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            continue  # removed meanwhile (its driver stopped)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
            continue  # a symlink, or another user's: not ours to judge
        try:
            with open(os.path.join(path, OWNER_FILE), "rb") as f:
                owner = ScratchOwner.from_json(f.read())
        except FileNotFoundError:
            notes.append(f"scratch folder {path} has no owner marker (made by an older Sluice?): left alone; "
                         "remove it by hand once no Spark driver uses it")
            continue
        except (OSError, ValueError, UnsupportedFormatVersion) as exc:
            notes.append(f"scratch folder {path}: owner marker unreadable ({exc}); left alone")
            continue
        status = owner.status()
        if status is OwnerStatus.RUNNING:
            continue
        if not status.is_gone():
            notes.append(f"scratch folder {path} of {owner.describe()}: cannot tell from here whether its "
                         f"driver runs ({status.value}); left alone")
            continue
        why = {OwnerStatus.EXITED: "has exited",
               OwnerStatus.PID_REUSED: "has exited (the pid belongs to another process now)",
               OwnerStatus.REBOOTED: "ran before the host rebooted"}[status]
        size, newest = _size_and_newest(path, st)
        orphans.append(OrphanedScratchFolder(path, f"Spark scratch folder whose driver ({owner.describe()}) {why}",
                                             size, newest))
    return orphans, notes


def remove_scratch_folder(path: str) -> None:
    """Remove a folder :func:`find_orphaned_scratch_folders` reported (its symlinks are removed, never followed)."""
    if not os.path.basename(path).startswith(SCRATCH_PREFIX):
        raise ValueError(f"{path} is not a {SCRATCH_PREFIX}* scratch folder; refusing to remove it")
    shutil.rmtree(path)


def _size_and_newest(path: str, st: os.stat_result) -> tuple[int, int]:
    size, newest = 0, st.st_mtime_ns
    for dirpath, dirnames, filenames in os.walk(path):
        for name in dirnames + filenames:
            try:
                entry = os.lstat(os.path.join(dirpath, name))
            except FileNotFoundError:
                continue
            newest = max(newest, entry.st_mtime_ns)
            if stat.S_ISREG(entry.st_mode):
                size += entry.st_size
    return size, newest // 1_000_000


def _boot_id() -> str | None:
    try:
        return _BOOT_ID.read_text().strip() or None
    except OSError:
        return None


def _linux_process(pid: int) -> tuple[str, int] | None:
    """(state, start in clock ticks since boot) of ``pid`` from /proc, or None when there is no such process
    (or no /proc).  The command name in parentheses may hold spaces and parentheses: split after the last ')'."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rpartition(")")[2].split()
    try:
        return fields[0], int(fields[19])  # fields 3 and 22 of proc_pid_stat(5)
    except (IndexError, ValueError):
        return None


def _psutil_create_time(pid: int) -> float | None:
    try:
        import psutil

        return psutil.Process(pid).create_time()
    except Exception:  # noqa: BLE001 - optional: without psutil the Linux fields decide
        return None
