"""The dead-letter view: dead jobs grouped by fingerprint, and what a bulk action would touch.

A fingerprint is ``md5(task, job_error_pattern(last_error))`` (see queries.sql): jobs of one
task that died of the same error, with numbers, ids and addresses blanked out, share it. A bulk
action is fenced twice: by the newest job id its confirmation showed (jobs that die later are
not touched) and, for a selection, by the ids ticked.
"""

from jobqueue.inspect import JobInspector, Row

GROUPS_SHOWN = 200
BULK_LIMIT = 10_000  # jobs one bulk action touches at most; run it again for the rest


def selection(
    inspector: JobInspector,
    fingerprint: str,
    tenant_id: int | None,
    max_id: int | None,
    ids: list[int] | None,
) -> list[Row]:
    """The dead jobs a bulk action on this group would touch, newest first: the whole group's
    (``ids`` None), or those of ``ids`` only (none when it is empty)."""
    if ids is not None and not ids:
        return []
    return inspector.failure_jobs(fingerprint, tenant_id, max_id=max_id, ids=ids, limit=BULK_LIMIT)
