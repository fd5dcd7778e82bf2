"""gunicorn.conf.py's post_worker_init hook is what starts telemetry in the console's workers,
whether gunicorn loads the app before forking (preload_app) or after: real gunicorn with two
workers, exporting over OTLP/HTTP to a real receiver on loopback. Without the hook no span
leaves a worker in either mode (the app never starts the SDK's threads itself under gunicorn: a
master that did would fork workers whose exporter threads are gone). And a worker stopped while
the hook runs stops then, not at the graceful timeout."""

import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from devtools.otlp_receiver import Receiver
from tests.support.processes import ROOT, wait_until
from tests.support.smtp import free_port

SERVER = 2  # OTLP span kind


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    receiver = Receiver().start()
    yield receiver
    receiver.stop()


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except OSError:
        return False


@pytest.mark.parametrize("preload", [False, True], ids=["app-loaded-in-workers", "preload-app"])
def test_each_console_worker_exports_its_spans_through_the_config_hook(
    preload: bool, database_url: str, receiver: Receiver
) -> None:
    port = free_port()
    preloading = ["--preload"] if preload else []
    command = [sys.executable, "-m", "gunicorn", "wsgi:app", "--bind", f"127.0.0.1:{port}",
               "--workers", "2", "--no-control-socket", *preloading]  # fmt: skip
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "SECRET_KEY": "fork",
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        "OTEL_BSP_SCHEDULE_DELAY": "100",
    }
    console = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        wait_until(lambda: answers(f"http://127.0.0.1:{port}/healthz"), timeout=60)
        for _ in range(6):  # over keep-alive-free requests, both workers get some
            assert answers(f"http://127.0.0.1:{port}/login")
        wait_until(lambda: receiver.spans_named("GET /login"), timeout=30,
                   message="no span of GET /login reached the receiver")  # fmt: skip
        spans = receiver.spans_named("GET /login")
        assert {(span.service, span.kind) for span in spans} == {("pauta-web", SERVER)}
    finally:
        console.terminate()
        _, errors = console.communicate(timeout=30)
    assert console.returncode == 0, errors


# The project's gunicorn.conf.py with each hook it defines made slow, so that a stop can be sent
# while a worker is in it: the hook first leaves a mark, then waits, then does its work.
SLOW_HOOKS = """
import importlib.util
import pathlib
import time

_spec = importlib.util.spec_from_file_location("pauta_gunicorn_conf", {config!r})
_conf = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_conf)
globals().update(vars(_conf))


def _slow():
    pathlib.Path({mark!r}).touch()
    time.sleep({pause})


if hasattr(_conf, "post_fork"):  # gunicorn checks a hook's arity: one wrapper each

    def post_fork(server, worker):
        _slow()
        _conf.post_fork(server, worker)


if hasattr(_conf, "post_worker_init"):

    def post_worker_init(worker):
        _slow()
        _conf.post_worker_init(worker)
"""


def test_a_worker_stopped_while_it_starts_telemetry_stops_then(
    database_url: str, receiver: Receiver, tmp_path: Path
) -> None:
    """SIGTERM to the master while its worker is in the hook that starts telemetry: the worker
    takes the stop once the hook returns and gunicorn exits in seconds. In post_fork, before the
    worker installs its own signal handlers, the stop went to the handler inherited from the
    master, was lost, and the worker ran on until the graceful timeout (20 s here) killed it.
    kills: gunicorn-telemetry-before-signals"""
    mark, pause, graceful = tmp_path / "in-the-hook", 2, 20
    config = tmp_path / "gunicorn_conf.py"
    config.write_text(
        SLOW_HOOKS.format(config=str(ROOT / "gunicorn.conf.py"), mark=str(mark), pause=pause)
    )
    command = [sys.executable, "-m", "gunicorn", "wsgi:app", "--config", str(config),
               "--bind", f"127.0.0.1:{free_port()}", "--workers", "1", "--no-control-socket",
               "--graceful-timeout", str(graceful)]  # fmt: skip
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "SECRET_KEY": "fork",
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
    }
    console = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        wait_until(mark.exists, timeout=60, message="the worker never reached the hook")
        console.send_signal(signal.SIGTERM)
        stopped = time.monotonic()
        _, errors = console.communicate(timeout=graceful + 15)
        took = time.monotonic() - stopped
    finally:
        if console.poll() is None:
            console.kill()
            console.communicate()
    assert console.returncode == 0, errors
    assert took < graceful / 2, f"gunicorn took {took:.1f} s to stop: {errors}"
