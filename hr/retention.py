"""Retention: each tenant's policy applied by a job that the maintenance leader schedules.

A tenant's ``privacy_settings`` say how many years review comments of closed cycles are kept
(counted from the cycle's closing) and how many years audit entries keep their details
(counted from the entry); NULL keeps them for good. The ``schedules`` row
``hr.apply_retention`` makes the maintenance leader enqueue :func:`apply_retention` once a day
(``jobqueue/maintenance.py``); the job empties what is past its time, tenant by tenant, each
tenant in one transaction with its ``retention_runs`` row (when, as of which time, the counts),
which the retention page shows.

The time is the database's (``now()``) moved by ``PAUTA_RETENTION_CLOCK_SHIFT`` (a PostgreSQL
interval, empty by default): tests and a dry look ahead ("what will go next year") set it.

Worker-side code: no Flask, no models; SQL on psycopg.
"""

from dataclasses import dataclass
from typing import Any

import psycopg

POLICIES = """
SELECT tenant_id, comment_years, audit_detail_years FROM privacy_settings
WHERE comment_years IS NOT NULL OR audit_detail_years IS NOT NULL
ORDER BY tenant_id
"""
AS_OF = "SELECT now() + CAST(%(shift)s AS interval)"
COMMENTS = """
UPDATE reviews r SET comments = ''
FROM review_cycles c
WHERE c.tenant_id = %(tenant_id)s AND r.tenant_id = c.tenant_id AND r.cycle_id = c.id
  AND c.status = 'closed' AND r.comments <> ''
  AND c.closed_at < %(as_of)s - make_interval(years => %(years)s)
"""
AUDIT_DETAILS = """
UPDATE audit_log SET details = '{}'
WHERE tenant_id = %(tenant_id)s AND details <> '{}'
  AND at < %(as_of)s - make_interval(years => %(years)s)
"""
RUN = """
INSERT INTO retention_runs (tenant_id, as_of, comments_removed, audit_details_removed, job_id)
VALUES (%(tenant_id)s, %(as_of)s, %(comments)s, %(details)s, %(job_id)s)
"""


@dataclass(frozen=True, slots=True)
class Applied:
    tenant_id: int
    comments_removed: int
    audit_details_removed: int


def apply_retention(
    connection: psycopg.Connection[Any], job_id: int | None, shift: str = ""
) -> list[Applied]:
    """Apply every tenant's policy as of now() + ``shift``; one transaction per tenant."""
    as_of = connection.execute(AS_OF, {"shift": shift or "0"}).fetchone()[0]  # type: ignore[index]
    policies = connection.execute(POLICIES).fetchall()
    connection.commit()
    applied = []
    for tenant_id, comment_years, audit_years in policies:
        key = {"tenant_id": tenant_id, "as_of": as_of}
        comments = details = 0
        if comment_years is not None:
            comments = connection.execute(COMMENTS, {**key, "years": comment_years}).rowcount
        if audit_years is not None:
            details = connection.execute(AUDIT_DETAILS, {**key, "years": audit_years}).rowcount
        connection.execute(RUN, {**key, "comments": comments, "details": details,
                                 "job_id": job_id})  # fmt: skip
        connection.commit()
        applied.append(Applied(tenant_id, comments, details))
    return applied
