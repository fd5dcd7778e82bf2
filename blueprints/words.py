"""The names of states and statuses as the reader says them ("draft" / "rascunho"), for the
templates (``cycle_status(...)`` (from hr.wording), ``delivery_status(...)``, ``job_state(...)``,
``attempt_outcome(...)``, ``worker_state(...)``). A value with no name here is shown as it is
stored."""

from collections.abc import Callable, Mapping

from flask import Flask
from flask_babel import lazy_gettext as _l
from flask_babel.speaklater import LazyString

from hr.wording import cycle_status

DELIVERY_STATUSES = {
    "queued": _l("queued"),
    "sending": _l("sending"),
    "retrying": _l("retrying"),
    "delivered": _l("delivered"),
    "dead": _l("dead"),
    "cancelled": _l("cancelled"),
}
JOB_STATES = {
    "available": _l("available"),
    "scheduled": _l("scheduled"),
    "running": _l("running"),
    "succeeded": _l("succeeded"),
    "dead": _l("dead"),
    "cancelled": _l("cancelled"),
}
ATTEMPT_OUTCOMES = {
    "succeeded": _l("succeeded"),
    "failed": _l("failed"),
    "lease_expired": _l("lease expired"),
    "released": _l("released"),
}
IMPORT_STATES = {
    "queued": _l("queued"),
    "running": _l("running"),
    "finished": _l("finished"),
    "failed": _l("failed"),
}
WORKER_STATES = {
    "running": _l("running"),
    "draining": _l("draining"),
    "stopped": _l("stopped"),
    "lost": _l("lost"),
}


def _namer(names: Mapping[str, LazyString]) -> Callable[[str], str]:
    def name(value: str) -> str:
        return str(names[value]) if value in names else value

    return name


delivery_status = _namer(DELIVERY_STATUSES)
job_state = _namer(JOB_STATES)
attempt_outcome = _namer(ATTEMPT_OUTCOMES)
worker_state = _namer(WORKER_STATES)
import_state = _namer(IMPORT_STATES)


def init_app(app: Flask) -> None:
    app.add_template_global(cycle_status, "cycle_status")
    app.add_template_global(delivery_status, "delivery_status")
    app.add_template_global(job_state, "job_state")
    app.add_template_global(attempt_outcome, "attempt_outcome")
    app.add_template_global(worker_state, "worker_state")
    app.add_template_global(import_state, "import_state")
