"""What the cycle page asks before activating, closing or cancelling a cycle; the page's button
and the view that acts use the same question (see blueprints.confirmation)."""

from blueprints.confirmation import Confirmation
from models import ReviewCycle


def activate(cycle: ReviewCycle) -> Confirmation:
    return Confirmation(
        f"Activate “{cycle.name}”?",
        "Its participant list is locked, every review opens and each reviewer is e-mailed, in "
        "one step. It cannot be undone.",
        "Activate the cycle",
        kind="primary",
    )


def close(cycle: ReviewCycle) -> Confirmation:
    return Confirmation(
        f"Close “{cycle.name}”?",
        "No more reviews can be submitted; reviews still open stay unanswered. A closed cycle "
        "cannot be reopened.",
        "Close the cycle",
    )


def cancel(cycle: ReviewCycle) -> Confirmation:
    return Confirmation(
        f"Cancel “{cycle.name}”?",
        "A cancelled cycle can never be activated; its data stays for the record.",
        "Cancel the cycle",
    )
