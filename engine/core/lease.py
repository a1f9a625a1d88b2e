"""One long job per store: a lease row that `run`, `demo`, `bootstrap` and the other long writers hold.

DuckDB's own lock is held only for one unit of work at a time (so that `query` gets through between them), so
it cannot tell a second `run` that the first one is still alive: without the lease, the second would take the
first one's running phase for an interrupted one and undo it. The lease lives in the store
(``store_lease``, see ``sql/migrations/008_store_lease.sql``):

- a process that finds no lease takes it;
- a process that finds its own lease (same host, pid and process start) goes on: the lease is re-entrant, so
  `demo` can hold it around the `run` it starts, and the inner holder does not release it;
- a process that finds a live holder's lease refuses at once, naming the holder and since when;
- a process that finds the lease of a dead holder on this host (its pid is not running, is a zombie, or was
  reused by a process that started later) takes it over, and says so; only then does the job clean up what the
  dead one left half done. A holder on another host cannot be checked from here: the refusal says how to
  release its lease by hand once that process is known to be gone.

    with hold_lease(db, "run", wait=30.0):
        ...  # the long job
"""

from __future__ import annotations

import os
import socket
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from coevolve_engine.core.errors import StoreError
from coevolve_engine.core.store import Store


class StoreBusyError(StoreError):
    """Another live process holds the store's lease."""


@dataclass(frozen=True)
class Holder:
    command: str
    pid: int
    host: str
    process_start: int | None
    acquired_at: object = None
    heartbeat_at: object = None

    def describe(self) -> str:
        since = f", since {self.acquired_at:%Y-%m-%d %H:%M:%S}" if self.acquired_at is not None else ""
        seen = (f", last active {self.heartbeat_at:%H:%M:%S}"
                if self.heartbeat_at is not None and self.heartbeat_at != self.acquired_at else "")
        return f"`{self.command}` (pid {self.pid} on {self.host}{since}{seen})"


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state first), or None where it cannot be read."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command name (field 2) is in parentheses and may hold spaces: split what follows the last ')'
    return stat[stat.rindex(")") + 2:].split()


def process_start(pid: int) -> int | None:
    """When process ``pid`` started, in the operating system's units (Linux: clock ticks since boot); None where
    that cannot be read."""
    fields = _stat_fields(pid)
    return int(fields[19]) if fields else None  # field 22 of proc(5): starttime


def is_alive(pid: int, started: int | None) -> bool:
    """Whether the process ``pid`` that started at ``started`` still runs on this host."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, under another user
        pass
    fields = _stat_fields(pid)
    if fields is None:  # no /proc here: the pid answering is all there is to go on
        return True
    if fields[0] in ("Z", "X"):  # a zombie: dead, only not yet reaped by its parent
        return False
    return started is None or int(fields[19]) == started


def me(command: str) -> Holder:
    pid = os.getpid()
    return Holder(command, pid, socket.gethostname(), process_start(pid))


def _held(con) -> Holder | None:
    rows = con.execute("SELECT command, pid, host, process_start, acquired_at, heartbeat_at FROM store_lease"
                       ).fetchall()
    return Holder(*rows[0]) if rows else None


def _is_me(holder: Holder, mine: Holder) -> bool:
    return (holder.pid, holder.host, holder.process_start) == (mine.pid, mine.host, mine.process_start)


def acquire(store, command: str, *, echo: Callable[[str], None] | None = None) -> bool:
    """Take the lease of ``store`` (an open, writable Store) for ``command``; True when this call took it (the
    caller then releases it), False when this process held it already. Raises StoreBusyError when a live
    process holds it."""
    mine = me(command)
    with store.transaction() as con:
        holder = _held(con)
        if holder is not None and _is_me(holder, mine):
            return False
        if holder is not None:
            if holder.host != mine.host:
                raise StoreBusyError(
                    f"the store at {store.path} is in use by {holder.describe()}; this host cannot tell whether "
                    "that process still runs. Wait for it to finish; if it is known to be gone, release its lease "
                    f"with `coevolve-engine query --write --db {store.path} \"delete from store_lease\"`")
            if is_alive(holder.pid, holder.process_start):
                raise StoreBusyError(
                    f"the store at {store.path} is in use by {holder.describe()}; one long job at a time may "
                    f"write it. Wait for that one to finish (or stop it), then run `{command}` again; `coevolve-"
                    "engine query` works meanwhile")
            con.execute("DELETE FROM store_lease")
        con.execute("INSERT INTO store_lease (command, pid, host, process_start) VALUES ($c, $pid, $host, $start)",
                    {"c": command, "pid": mine.pid, "host": mine.host, "start": mine.process_start})
    if holder is not None and echo is not None:
        echo(f"took over the lease of {holder.describe()}, which is no longer running")
    return True


def release(store, command: str) -> None:
    """Drop this process's lease (a lease another process took over meanwhile is left alone)."""
    mine = me(command)
    with store.transaction() as con:
        con.execute("DELETE FROM store_lease WHERE pid = $pid AND host = $host "
                    "AND process_start IS NOT DISTINCT FROM $start",
                    {"pid": mine.pid, "host": mine.host, "start": mine.process_start})


def heartbeat(con) -> None:
    """Record that the holder is active (inside the caller's transaction); a no-op for other processes."""
    mine = me("")
    con.execute("UPDATE store_lease SET heartbeat_at = current_timestamp WHERE pid = $pid AND host = $host "
                "AND process_start IS NOT DISTINCT FROM $start",
                {"pid": mine.pid, "host": mine.host, "start": mine.process_start})


@contextmanager
def hold_lease(db: str | os.PathLike[str], command: str, *, wait: float, create: bool = False,
               echo: Callable[[str], None] | None = None) -> Iterator[None]:
    """Hold the lease of the store at ``db`` for the ``with`` block (re-entrant within one process)."""
    with Store(db, wait=wait, create=create) as store:
        taken = acquire(store, command, echo=echo)
    try:
        yield
    finally:
        if taken:
            with Store(db, wait=wait, create=False) as store:
                release(store, command)
