"""Request telemetry for the console: OpenTelemetry's Flask instrumentation, server spans named
by route pattern, and who asked.

- Span names are ``{METHOD} {route pattern}`` (``GET /cycles/<int:cycle_id>``) with
  ``http.route``, from the instrumentation under the stable HTTP conventions; a request that
  matches no route is renamed to ``{METHOD}`` alone, so a scan of random paths cannot flood the
  backend with span names.
- After Flask-Login has loaded the user, the request span gets ``enduser.id`` (the user's
  numeric id: pseudonymous outside Pauta, where the e-mail address would be personal data, yet
  resolvable by an admin in the console), ``user.roles`` and ``pauta.tenant.id``. These go on
  spans only, never on metrics, whose label sets must stay small.

Nothing is instrumented unless telemetry is on (an OTLP endpoint is configured), so the console
pays nothing for it otherwise. The SDK itself (its exporter threads) is started here, except
under gunicorn, whose post_worker_init hook starts it in each worker (gunicorn.conf.py sets
``PAUTA_TELEMETRY_AFTER_FORK``): a master that loads the app before forking must not start
threads its workers would not have.
"""

import os

from flask import Flask, request
from flask_login import current_user
from opentelemetry import trace

from jobqueue import telemetry

AFTER_FORK = "PAUTA_TELEMETRY_AFTER_FORK"


def init_app(app: Flask) -> None:
    os.environ.setdefault("OTEL_SEMCONV_STABILITY_OPT_IN", "http")  # read at instrumentation
    if os.environ.get(AFTER_FORK) == "1":
        on = telemetry.endpoint_configured(os.environ)  # the server starts the SDK after forking
    else:
        on = telemetry.configure("pauta-web") or telemetry.active()
    if not on:
        return
    from opentelemetry.instrumentation.flask import FlaskInstrumentor

    FlaskInstrumentor().instrument_app(app, excluded_urls="/healthz,/static/")
    app.before_request(describe_request)


def describe_request() -> None:
    span = trace.get_current_span()
    if not span.is_recording():
        return
    if request.url_rule is None:
        span.update_name(request.method)
    if current_user.is_authenticated:
        span.set_attributes(
            {
                "enduser.id": str(current_user.id),
                "user.roles": [str(current_user.role)],
                "pauta.tenant.id": int(current_user.tenant_id),
            }
        )
