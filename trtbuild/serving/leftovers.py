"""What a stopped Triton may leave behind, found and removed: processes, shared memory, model folders.

Triton's Python backend runs each model instance in a *stub* process that Triton starts and stops.
When tritonserver dies before it has stopped them (it can crash while shutting down under load, or be
killed), a stub is left running with PPID 1, ignoring SIGINT and SIGTERM, holding its shared-memory
segments (``/dev/shm/pytrtion*``, ``/dev/shm/psm_*``) and the temporary copy of its model directory
(``/tmp/folderXXXXXX``). Every process of one server names that server's private work directory on
its command line, so they are found by it, wherever they were reparented.

    before = snapshot(workdir)     # while the server runs: its processes, what they map, their folders
    server.stop()
    removed = clean_up(workdir, before)   # SIGKILL survivors, unlink their segments and folders
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

SHM = Path("/dev/shm")
#: the programs of a Triton server: the server and its Python-backend stubs
PROGRAMS = ("tritonserver", "triton_python_backend_stub")


@dataclass(frozen=True)
class Leftover:
    """One process of a server: pid and start time (a pid reused later is not the same process), the
    shared-memory files it maps or names, the temporary model folder it runs from."""

    pid: int
    start: str
    shm: frozenset = frozenset()
    folders: frozenset = frozenset()


@dataclass
class Removed:
    """What clean_up removed."""

    killed: list[int] = field(default_factory=list)
    shm: list[str] = field(default_factory=list)
    folders: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.killed or self.shm or self.folders)

    def describe(self) -> str:
        parts = []
        if self.killed:
            parts.append(f"killed {len(self.killed)} process(es) that outlived Triton (pid "
                         f"{', '.join(map(str, self.killed))})")
        if self.shm:
            parts.append(f"removed {len(self.shm)} shared-memory segment(s)")
        if self.folders:
            parts.append(f"removed {', '.join(self.folders)}")
        return "; ".join(parts)


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""


def _stat(pid: int) -> tuple[str, str]:
    """(state, start time) of `pid` from /proc/PID/stat (fields 3 and 22); ("", "") if it is gone."""
    stat = _read(Path(f"/proc/{pid}/stat")).decode(errors="replace")
    fields = stat.rsplit(")", 1)[-1].split()
    return (fields[0], fields[19]) if len(fields) > 19 else ("", "")


def _start_time(pid: int) -> str:
    return _stat(pid)[1]


def _descendants(pids) -> list[int]:
    """The processes started by `pids`, their children and so on (a stub's multiprocessing resource
    tracker, which would otherwise race to unlink the same segments and warn about each)."""
    parents, found = set(pids), []
    table = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _read(entry / "stat").decode(errors="replace").rsplit(")", 1)[-1].split()
            if len(fields) > 1:
                table[int(entry.name)] = int(fields[1])
    grew = True
    while grew:
        grew = False
        for pid, ppid in table.items():
            if ppid in parents and pid not in parents:
                parents.add(pid)
                found.append(pid)
                grew = True
    return found


def gone(leftover: Leftover) -> bool:
    state, start = _stat(leftover.pid)
    return start != leftover.start or state in ("Z", "X")  # a zombie holds nothing any more


def _model_folder(arg: str) -> Path | None:
    """The temporary folder a stub's model.py lives in (Triton's copy of the model directory), if any."""
    tmp = Path(tempfile.gettempdir()).resolve()
    path = Path(arg)
    if not arg.endswith(".py") or not path.is_absolute():
        return None
    for parent in path.parents:
        if parent.parent == tmp:
            return parent if parent.name.startswith("folder") else None
    return None


def describe(pid: int) -> Leftover | None:
    args = _read(Path(f"/proc/{pid}/cmdline")).split(b"\0")
    start = _start_time(pid)
    if not start or not args:
        return None
    shm = set()
    for line in _read(Path(f"/proc/{pid}/maps")).decode(errors="replace").splitlines():
        where = line.split(maxsplit=5)[-1] if line.count(" ") >= 5 else ""
        if where.startswith(f"{SHM}/"):
            shm.add(where.removesuffix(" (deleted)").split("/")[-1])
    texts = [a.decode(errors="replace") for a in args if a]
    shm.update(a for a in texts if (SHM / a).is_file() and "/" not in a)  # the stub names its region
    folders = {f for f in (_model_folder(a) for a in texts) if f is not None}
    return Leftover(pid, start, frozenset(shm), frozenset(folders))


def processes_naming(marker: str) -> list[int]:
    """Pids of the tritonserver and Python-backend stub processes whose command line contains `marker`
    (other programs naming it, a `tail -f` of the log, are not the server's)."""
    found = []
    needle = marker.encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        cmdline = _read(entry / "cmdline")
        if needle in cmdline and Path(cmdline.split(b"\0")[0].decode(errors="replace")).name in PROGRAMS:
            found.append(int(entry.name))
    return sorted(found)


def snapshot(marker: str) -> dict[int, Leftover]:
    """The processes naming `marker` now, with what they hold."""
    return {pid: d for pid in processes_naming(marker) if (d := describe(pid)) is not None}


def clean_up(marker: str, before: dict[int, Leftover] | None = None, timeout: float = 10.0) -> Removed:
    """SIGKILL every process still naming `marker` (the server's and its stubs') and what they started,
    children first, wait up to `timeout` seconds for them to go, then unlink the shared-memory segments
    and remove the model folders that they (or the processes in `before`) held and that are still there."""
    removed = Removed()
    known = dict(before or {})
    now = snapshot(marker)
    children = {pid: d for pid in _descendants(now) if pid not in now and (d := describe(pid)) is not None}
    for pid, seen in [*children.items(), *now.items()]:
        earlier = known.get(pid)
        known[pid] = seen if earlier is None or earlier.start != seen.start else Leftover(
            pid, seen.start, earlier.shm | seen.shm, earlier.folders | seen.folders)
        try:
            os.kill(pid, signal.SIGKILL)
            removed.killed.append(pid)
        except (ProcessLookupError, PermissionError):
            pass
    deadline = time.monotonic() + timeout
    while removed.killed and time.monotonic() < deadline:
        if all(gone(known[pid]) for pid in removed.killed):
            break
        time.sleep(0.05)
    for name in sorted({s for d in known.values() for s in d.shm}):
        try:
            (SHM / name).unlink()
            removed.shm.append(name)
        except OSError:  # gone already, or not ours
            pass
    for folder in sorted({f for d in known.values() for f in d.folders}):
        if folder.is_dir():
            shutil.rmtree(folder, ignore_errors=True)
            removed.folders.append(str(folder))
    return removed
