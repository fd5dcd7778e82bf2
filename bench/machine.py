"""What the machine gave a long run, sample by sample: CPU time used by each of its processes,
time the hypervisor took (steal) or nobody used (idle), and how fast the CPU did a fixed piece
of work.

A soak's drain rate moves with the machine as much as with the engine: on this 2-core virtual
machine the same 300,000-iteration loop took 10 to 17.5 ms of its thread's CPU time from one
half-minute to the next, steal reached 15% in some, and the runner's CPU time per job (its
Python work, the same for every no-op job) rose and fell in step with the server's. A decline
whose CPU time per job rises in both processes together, as the probe slows down, is the
machine's; one where only the server's rises is the engine's. Linux only (/proc).
"""

import os
import time
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")
PROBE_LOOPS = 300_000


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of a process so far (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICKS


def children(parent: int) -> list[int]:
    """The processes whose parent is ``parent`` (a postmaster's backends and helpers)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == parent:
            found.append(int(stat.parent.name))
    return found


def machine_ticks() -> dict[str, int]:
    """The machine's CPU time so far, in ticks, from /proc/stat's first line."""
    values = [int(value) for value in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return {"busy": sum(values[:3]) + sum(values[5:7]), "idle": values[3] + values[4],
            "steal": values[7]}  # fmt: skip


def probe_ms() -> float:
    """Thread CPU time of a fixed loop: higher when the CPU does less work a second."""
    started = time.thread_time()
    total = 0
    for value in range(PROBE_LOOPS):
        total += value * value
    return round((time.thread_time() - started) * 1000, 2)


class MachineMeter:
    """CPU time a second of named processes and of a postmaster with all its children (per
    process: a backend that started since the last reading counts from its start; one that
    ended takes its last moments with it), and of the machine, between readings."""

    def __init__(self, processes: dict[str, int], postmaster: int | None = None) -> None:
        self.processes = processes
        self.postmaster = postmaster
        self.last_time = time.monotonic()
        self.last_used = self._used()
        self.last_ticks = machine_ticks()

    def _used(self) -> dict[str | int, float]:
        """CPU seconds so far: of each named process, and of each server process by pid."""
        used: dict[str | int, float] = {
            name: cpu_seconds(pid) for name, pid in self.processes.items()
        }
        if self.postmaster is not None:
            for pid in [self.postmaster, *children(self.postmaster)]:
                used[pid] = cpu_seconds(pid)
        return used

    def read(self) -> dict[str, object]:
        now, used, ticks = time.monotonic(), self._used(), machine_ticks()
        elapsed = now - self.last_time
        spent = {key: value - self.last_used.get(key, 0.0) for key, value in used.items()}
        cpu = {name: spent[name] for name in self.processes}
        if self.postmaster is not None:
            cpu["server"] = sum(value for key, value in spent.items() if isinstance(key, int))
        total = sum(ticks.values()) - sum(self.last_ticks.values()) or 1
        record = {
            "cpu_s_per_s": {name: round(value / elapsed, 3) for name, value in cpu.items()},
            "steal_pct": round(100 * (ticks["steal"] - self.last_ticks["steal"]) / total, 1),
            "idle_pct": round(100 * (ticks["idle"] - self.last_ticks["idle"]) / total, 1),
            "probe_ms": probe_ms(),
        }
        self.last_time, self.last_used, self.last_ticks = now, used, ticks
        return record
