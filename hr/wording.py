"""How a review and a cycle's status are named to the reader, in their language: the same words
on the page and in the e-mail. "Goran García (manager)" read as if Goran were the reader's
manager; the relation is said from the reader's side instead."""

from hr.i18n import N_
from hr.i18n import gettext as _

RELATIONS = {"manager": N_("your direct report"), "peer": N_("your colleague")}
CYCLE_STATUSES = {
    "draft": N_("draft"),
    "active": N_("active"),
    "closed": N_("closed"),
    "cancelled": N_("cancelled"),
}

REVIEW_KINDS = {
    "self": N_("self-review"),
    "manager": N_("manager's review"),
    "peer": N_("peer review"),
}
REVIEW_STATUSES = {"pending": N_("pending"), "open": N_("open"), "submitted": N_("submitted")}


def review_label(kind: str, reviewee_name: str) -> str:
    """``Yourself (self-review)``, ``Goran García (your direct report)``, ``Ana Berg (your
    colleague)``."""
    if kind == "self":
        return _("Yourself (self-review)")
    return _("%(name)s (%(relation)s)", name=reviewee_name, relation=_(RELATIONS[kind]))


def cycle_status(status: str) -> str:
    """ "draft", "rascunho"; a status with no name here as it is stored."""
    return _(CYCLE_STATUSES[status]) if status in CYCLE_STATUSES else status


def review_kind(kind: str) -> str:
    """ "self-review", "autoavaliação"; a kind with no name here as it is stored."""
    return _(REVIEW_KINDS[kind]) if kind in REVIEW_KINDS else kind


def review_status(status: str) -> str:
    """ "open", "aberta"; a status with no name here as it is stored."""
    return _(REVIEW_STATUSES[status]) if status in REVIEW_STATUSES else status
