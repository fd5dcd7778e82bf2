"""Real worker.py processes for tests: started, watched through their log lines, signalled."""

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TEST_TASKS = "tests.support.tasks"


class WorkerProcess:
    def __init__(
        self,
        database_url: str,
        *args: str,
        tasks: str = TEST_TASKS,
        env: dict[str, str] | None = None,
        prefix: tuple[str, ...] = (),
    ) -> None:
        """``prefix``: a command worker.py runs under (``ip netns exec NS``, ``faketime ...``)."""
        self.lines: list[str] = []
        self._changed = threading.Condition()
        self.process = subprocess.Popen(
            [*prefix, sys.executable, "worker.py", "--tasks", tasks, *args],
            cwd=ROOT,
            env={**os.environ, "DATABASE_URL": database_url, **(env or {})},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    @property
    def pid(self) -> int:
        return self.process.pid

    def _read(self) -> None:
        assert self.process.stderr is not None
        with self.process.stderr:
            for line in self.process.stderr:
                with self._changed:
                    self.lines.append(line.rstrip("\n"))
                    self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def wait_for_line(self, pattern: str, timeout: float = 20.0) -> str:
        """Block until a log line matches ``pattern``; fail with the log if it never comes."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        seen = 0
        with self._changed:
            while True:
                for line in self.lines[seen:]:
                    if regex.search(line):
                        return line
                seen = len(self.lines)
                remaining = deadline - time.monotonic()
                if remaining <= 0 or (
                    self.process.poll() is not None and not self._reader.is_alive()
                ):
                    raise AssertionError(
                        f"no log line matched {pattern!r}; log:\n" + "\n".join(self.lines)
                    )
                self._changed.wait(remaining)

    def wait_ready(self) -> "WorkerProcess":
        self.wait_for_line(r"ready; queues")
        return self

    def signal(self, signum: int) -> None:
        self.process.send_signal(signum)

    def wait(self, timeout: float = 60.0) -> int:
        code = self.process.wait(timeout)
        self._reader.join(5)
        return code

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.wait()

    def log(self) -> str:
        return "\n".join(self.lines)


def start_worker(
    started: list[WorkerProcess],
    database_url: str,
    *args: str,
    tasks: str = TEST_TASKS,
    env: dict[str, str] | None = None,
    ready: bool = True,
    prefix: tuple[str, ...] = (),
) -> WorkerProcess:
    """Start worker.py (``tasks``: comma-separated task modules to import) and wait for ready."""
    worker = WorkerProcess(database_url, *args, tasks=tasks, env=env, prefix=prefix)
    started.append(worker)
    return worker.wait_ready() if ready else worker


def wait_until(predicate, timeout: float = 30.0, interval: float = 0.02, message: str = ""):  # type: ignore[no-untyped-def]
    """Poll ``predicate`` until it returns something truthy; return it or fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(message or f"condition not met within {timeout}s")
        time.sleep(interval)
