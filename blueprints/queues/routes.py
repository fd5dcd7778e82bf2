"""Queue overview (the console's first page; the full console grows from here)."""

from flask import Blueprint, redirect, render_template, url_for
from flask.typing import ResponseReturnValue

from jobqueue.enqueue import psycopg_connection
from jobqueue.store import JobStore
from models import db

bp = Blueprint("queues", __name__)

STATES = ("available", "scheduled", "running", "succeeded", "dead", "cancelled")


@bp.get("/")
def index() -> ResponseReturnValue:
    return redirect(url_for("queues.queue_overview"))


@bp.get("/queues/")
def queue_overview() -> ResponseReturnValue:
    store = JobStore(psycopg_connection(db.session))
    counts = store.state_counts()
    queues = {queue["name"]: queue for queue in store.queues()}
    names = sorted(set(queues) | set(counts))
    return render_template(
        "queues/queue_overview.html", names=names, queues=queues, counts=counts, states=STATES
    )
