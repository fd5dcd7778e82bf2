"""The names of states and statuses as the reader says them ("draft" / "rascunho"), for the
templates (``cycle_status(...)`` (from hr.wording), ``delivery_status(...)``, ``job_state(...)``,
``attempt_outcome(...)``, ``worker_state(...)``). A value with no name here is shown as it is
stored."""

from collections.abc import Callable, Mapping

from flask import Flask
from flask_babel import lazy_gettext as _l
from flask_babel import lazy_pgettext
from flask_babel.speaklater import LazyString

from hr.wording import cycle_status, review_kind, review_status

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
# What the job page's badge says (console.explain's labels).
JOB_LABELS = {**JOB_STATES, "waiting": _l("waiting"), "backing off": _l("backing off")}
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


# What the console's graphs call their series and axes (static/console/charts.js reads them
# from the canvas's data-labels: the script holds no words of its own).
CHART_WORDS = {
    "succeeded": lazy_pgettext("chart", "succeeded"),
    "failed": lazy_pgettext("chart", "retried"),
    "dead": lazy_pgettext("chart", "dead"),
    "runtime_avg": lazy_pgettext("chart", "run avg"),
    "runtime_max": lazy_pgettext("chart", "run max"),
    "wait_avg": lazy_pgettext("chart", "wait avg"),
    "wait_max": lazy_pgettext("chart", "wait max"),
    "available": lazy_pgettext("chart", "waiting"),
    "scheduled": lazy_pgettext("chart", "scheduled"),
    "running": lazy_pgettext("chart", "running"),
    "axis_throughput": lazy_pgettext("chart", "attempts per minute"),
    "axis_timing": lazy_pgettext("chart", "seconds"),
    "axis_depth": lazy_pgettext("chart", "jobs"),
}


# What the pages' scripts say (static/confirm.js, static/console/live.js, static/hr/refresh.js
# read them from <body data-words>): "%s" stands for the time or the reason.
SCRIPT_WORDS = {
    "updated": _l("updated %s"),
    "not_updated": _l("not updated: %s"),
    "up_to_date": _l("up to date %s"),
    "paused": _l("paused"),
    "session_ended": _l("your session ended: reload the page"),
    "server_answered": _l("the server answered %s"),
    "back": _l("Back"),
    "confirm": _l("Confirm"),
}


def script_words() -> dict[str, str]:
    return {key: str(word) for key, word in SCRIPT_WORDS.items()}


def chart_words() -> dict[str, str]:
    return {key: str(word) for key, word in CHART_WORDS.items()}


def _namer(names: Mapping[str, LazyString]) -> Callable[[str], str]:
    def name(value: str) -> str:
        return str(names[value]) if value in names else value

    return name


delivery_status = _namer(DELIVERY_STATUSES)
job_state = _namer(JOB_STATES)
job_label = _namer(JOB_LABELS)
attempt_outcome = _namer(ATTEMPT_OUTCOMES)
worker_state = _namer(WORKER_STATES)
import_state = _namer(IMPORT_STATES)


def init_app(app: Flask) -> None:
    app.add_template_global(cycle_status, "cycle_status")
    app.add_template_global(review_kind, "review_kind")
    app.add_template_global(review_status, "review_status")
    app.add_template_global(delivery_status, "delivery_status")
    app.add_template_global(job_state, "job_state")
    app.add_template_global(job_label, "job_label")
    app.add_template_global(attempt_outcome, "attempt_outcome")
    app.add_template_global(worker_state, "worker_state")
    app.add_template_global(import_state, "import_state")
    app.add_template_global(chart_words)
    app.add_template_global(script_words)
