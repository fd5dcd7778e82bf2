"""What the cycle page asks before activating, closing or cancelling a cycle; the page's button
and the view that acts use the same question (see blueprints.confirmation)."""

from flask_babel import gettext as _

from blueprints.confirmation import Confirmation
from models import ReviewCycle


def activate(cycle: ReviewCycle) -> Confirmation:
    return Confirmation(
        _("Activate “%(name)s”?", name=cycle.name),
        _(
            "Its participant list is locked, every review opens and each reviewer is e-mailed, "
            "in one step. It cannot be undone."
        ),
        _("Activate the cycle"),
        kind="primary",
    )


def close(cycle: ReviewCycle) -> Confirmation:
    return Confirmation(
        _("Close “%(name)s”?", name=cycle.name),
        _(
            "No more reviews can be submitted; reviews still open stay unanswered. A closed "
            "cycle cannot be reopened."
        ),
        _("Close the cycle"),
    )


def cancel(cycle: ReviewCycle) -> Confirmation:
    return Confirmation(
        _("Cancel “%(name)s”?", name=cycle.name),
        _("A cancelled cycle can never be activated; its data stays for the record."),
        _("Cancel the cycle"),
    )
