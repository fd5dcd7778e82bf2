"""How far the job list's text filters look. "Error contains" is served by a trigram index
(``jobs_error_search_idx``) where the server has pg_trgm; the payload filter has no index (one
would cost every enqueue, claim and finish). A search no index serves looks through at most
``WINDOW`` jobs per page, counting back by id from the newest (or from the page's ``before``),
so a rare match never walks every finished job; the page says which jobs it searched and offers
the ``WINDOW`` before them.
"""

from dataclasses import dataclass, replace

from jobqueue.inspect import JobFilter, JobInspector

WINDOW = 100_000  # jobs one page of an unindexed search looks through


@dataclass(frozen=True, slots=True)
class Bound:
    first_id: int  # the oldest job searched
    last_id: int  # the newest job searched
    payload: bool  # bounded because of the payload filter (else the error filter)

    @property
    def older(self) -> bool:
        """Older jobs remain to be searched."""
        return self.first_id > 1


def bound(inspector: JobInspector, where: JobFilter, before_id: int | None) -> Bound | None:
    """The ids an unindexed search of this page looks through; None if an index serves it."""
    payload = where.payload_key is not None
    if not payload and where.error is None:
        return None
    facts = inspector.search_facts()
    if not payload and facts["error_indexed"]:
        return None
    last = before_id - 1 if before_id is not None else int(facts["newest_id"] or 0)
    return Bound(max(last - WINDOW + 1, 1), last, payload)


def within(where: JobFilter, bounded: Bound | None) -> JobFilter:
    return where if bounded is None else replace(where, min_id=bounded.first_id)
