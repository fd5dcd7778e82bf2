"""gunicorn settings for the console (read from the working directory by default).

The OpenTelemetry SDK exports from background threads, and threads do not survive a fork. So
under gunicorn the app never starts the SDK itself (``AFTER_FORK`` tells it so): the master may
load the app before forking its workers (``preload_app``), and each worker starts its own SDK
here, after the fork, whether the app is loaded before or after it.
tests/test_gunicorn_fork.py fails without this hook, with preload_app on and off.

The hook is ``post_worker_init``, which runs once the worker handles its own signals, not
``post_fork``, which runs before: a stop (``SIGTERM`` to the master) that reached a worker while
it was still starting the SDK there went to the master's handler it inherited and was lost, and
that worker ran on until the graceful timeout killed it (tests/test_gunicorn_fork.py).
"""

import os
from typing import Any

from jobqueue.telemetry import configure

os.environ["PAUTA_TELEMETRY_AFTER_FORK"] = "1"  # read by blueprints.observability


def post_worker_init(worker: Any) -> None:
    configure("pauta-web")
