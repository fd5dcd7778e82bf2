"""A confirmation step before an action that cannot be taken back (activate or close a cycle,
pause a queue, discard a job, shut workers down).

The button's form carries the question in ``data-confirm-*`` attributes; ``static/confirm.js``
(bundled, as the Content-Security-Policy allows no inline script) asks it in a ``<dialog>`` and
posts the form with ``confirmed=1``. The view acts only on a confirmed post: any other post (no
script, a bookmarked form, a tool) is answered with a page asking the same question, whose button
posts the same fields again, confirmed. Nothing changes until then.
"""

from dataclasses import dataclass

from flask import render_template, request
from flask.typing import ResponseReturnValue

CONFIRMED = "confirmed"


@dataclass(frozen=True, slots=True)
class Confirmation:
    question: str  # "Pause queue mail?"
    detail: str  # what the action will do, in a sentence or two
    button: str  # the label of the button that does it
    kind: str = "danger"  # the button's style: danger or primary


def confirmed() -> bool:
    return request.form.get(CONFIRMED) == "1"


def ask(confirmation: Confirmation, back: str) -> ResponseReturnValue:
    """The page that asks ``confirmation`` and posts this request's fields again, confirmed;
    ``back`` is where its other button leads."""
    carried = [
        (name, value)
        for name, value in request.form.items(multi=True)
        if name not in ("csrf_token", CONFIRMED)
    ]
    return render_template(
        "confirm.html", confirmation=confirmation, action=request.path, carried=carried, back=back
    )
