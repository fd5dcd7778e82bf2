"""Which reviews a draft cycle asks for: pure functions of its participants and their managers.

A fresh plan asks each participant for a self-review, their manager for a manager review, and,
when asked, ``peers`` colleagues who share their manager for peer reviews. Colleagues are picked
by rotation (the next ones in id order), so every participant writes as many peer reviews as
they receive and a second plan picks the same people.

When the participants of a draft change, its generated reviews are reworked rather than thrown
away: the ones that still apply stay as they are (:func:`rework_reviews`).
"""

from collections import Counter, defaultdict
from dataclasses import dataclass

from hr.errors import InvalidInput
from hr.i18n import gettext as _
from models.cycles import ReviewKind

MAX_PEERS = 5


@dataclass(frozen=True, slots=True)
class Assignment:
    reviewer_id: int
    reviewee_id: int
    kind: ReviewKind


@dataclass(frozen=True, slots=True)
class GeneratedReview:
    id: int
    reviewer_id: int
    reviewee_id: int
    kind: str


@dataclass(frozen=True, slots=True)
class Rework:
    """What becomes of a draft's generated reviews: ids kept and dropped, assignments added."""

    kept: list[int]
    dropped: list[int]
    added: list[Assignment]


def plan_reviews(people: dict[int, int | None], peers: int) -> list[Assignment]:
    """The reviews for participants ``{employee id: manager id}``."""
    if not 0 <= peers <= MAX_PEERS:
        raise InvalidInput(_("peers per person must be between 0 and %(max)s", max=MAX_PEERS))
    plan = [Assignment(person, person, ReviewKind.SELF) for person in sorted(people)]
    plan += [
        Assignment(manager, person, ReviewKind.MANAGER)
        for person, manager in sorted(people.items())
        if manager is not None
    ]
    teams: defaultdict[int | None, list[int]] = defaultdict(list)
    for person, manager in sorted(people.items()):
        teams[manager].append(person)
    for team in teams.values():
        for position, person in enumerate(team):
            colleagues = min(peers, len(team) - 1)
            for step in range(1, colleagues + 1):
                reviewer = team[(position + step) % len(team)]
                plan.append(Assignment(reviewer, person, ReviewKind.PEER))
    return plan


def rework_reviews(
    reviews: list[GeneratedReview], people: dict[int, int | None], newcomers: set[int]
) -> Rework:
    """Rework ``reviews``, generated for an earlier list, for participants ``people`` ({employee
    id: manager id}, ``newcomers`` among them).

    - A review still applies when its reviewee still takes part and: a self-review; a manager
      review by the reviewee's manager (still theirs); a peer review by a participant who
      still shares the reviewee's manager. Those are kept; the others are dropped.
    - Newcomers, and anyone left without their self or manager review, get the ones a fresh
      plan would give them; newcomers also get the fresh plan's peer reviews, written and
      received, with as many peers per person as the reviews had (the most anyone received).
    - A cycle whose reviews were never generated keeps having none.
    """
    if not reviews:
        return Rework([], [], [])

    def applies(review: GeneratedReview) -> bool:
        if review.reviewee_id not in people:
            return False
        if review.kind == ReviewKind.SELF:
            return True
        if review.kind == ReviewKind.MANAGER:
            return review.reviewer_id == people[review.reviewee_id]
        return (
            review.reviewer_id in people
            and people[review.reviewer_id] == people[review.reviewee_id]
        )

    kept = [review for review in reviews if applies(review)]
    held = {(review.reviewer_id, review.reviewee_id) for review in kept}
    received = Counter(review.reviewee_id for review in reviews if review.kind == ReviewKind.PEER)
    peers = min(max(received.values(), default=0), MAX_PEERS)
    added = [
        wanted
        for wanted in plan_reviews(people, peers)
        if (wanted.reviewer_id, wanted.reviewee_id) not in held
        and (wanted.kind != ReviewKind.PEER or {wanted.reviewer_id, wanted.reviewee_id} & newcomers)
    ]
    return Rework(
        [review.id for review in kept],
        [review.id for review in reviews if not applies(review)],
        added,
    )
