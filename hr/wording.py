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


def review_label(kind: str, reviewee_name: str) -> str:
    """``Yourself (self-review)``, ``Goran García (your direct report)``, ``Ana Berg (your
    colleague)``."""
    if kind == "self":
        return _("Yourself (self-review)")
    return _("%(name)s (%(relation)s)", name=reviewee_name, relation=_(RELATIONS[kind]))


def cycle_status(status: str) -> str:
    """ "draft", "rascunho"; a status with no name here as it is stored."""
    return _(CYCLE_STATUSES[status]) if status in CYCLE_STATUSES else status
