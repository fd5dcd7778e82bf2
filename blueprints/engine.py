"""The engine on the request's database session, for the console's views.

Reads go through ``JobInspector`` on the same connection (and transaction) as the session, so a
page sees one consistent state; actions go through ``console.actions``, which write the audit
row on the session and call ``JobStore`` on that same connection.
"""

from jobqueue.enqueue import psycopg_connection
from jobqueue.inspect import JobInspector
from models import db


def inspector() -> JobInspector:
    return JobInspector(psycopg_connection(db.session))
