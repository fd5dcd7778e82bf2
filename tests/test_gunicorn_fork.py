"""gunicorn.conf.py's post_fork hook is what starts telemetry in the console's workers, whether
gunicorn loads the app before forking (preload_app) or after: real gunicorn with two workers,
exporting over OTLP/HTTP to a real receiver on loopback. Without the hook no span leaves a
worker in either mode (the app never starts the SDK's threads itself under gunicorn: a master
that did would fork workers whose exporter threads are gone)."""

import os
import subprocess
import sys
import urllib.request
from collections.abc import Iterator

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
def test_each_console_worker_exports_its_spans_through_the_post_fork_hook(
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
