"""gunicorn settings for the console (read from the working directory by default).

The OpenTelemetry SDK exports from background threads, and threads do not survive a fork: each
worker configures it after forking. (create_app would also do it, as the app is loaded in the
worker unless preload_app is set; the hook makes it hold either way.)
"""

from typing import Any


def post_fork(server: Any, worker: Any) -> None:
    from jobqueue import telemetry

    telemetry.configure("pauta-web")
