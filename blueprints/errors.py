"""Error pages in the reader's language: 400, 404, 405 and 500 (403 is the auth blueprint's,
429 the log-in page's). A description given to ``abort`` (what exactly was refused) is shown
under the page's own sentence."""

from flask import Flask, render_template
from flask.typing import ResponseReturnValue
from flask_babel import lazy_gettext as _l
from werkzeug.exceptions import HTTPException, InternalServerError

PAGES = {
    400: (_l("Bad request"), _l("Pauta could not read this request, so nothing was done.")),
    404: (
        _l("Page not found"),
        _l("There is nothing at this address, or nothing that your account may see."),
    ),
    405: (_l("Not allowed here"), _l("This address does not take that kind of request.")),
    500: (
        _l("Something went wrong"),
        _l("Pauta could not answer this request. Nothing was changed; try again in a moment."),
    ),
}


def init_app(app: Flask) -> None:
    for code in PAGES:
        app.register_error_handler(code, error_page)


def error_page(error: HTTPException) -> ResponseReturnValue:
    code = error.code or 500
    title, sentence = PAGES.get(code, PAGES[500])
    own = type(error).description
    detail = error.description if error.description and error.description != own else None
    if isinstance(error, InternalServerError):
        detail = None  # what broke is for the logs, not the page
    page = render_template("error.html", code=code, title=title, sentence=sentence, detail=detail)
    return page, code
