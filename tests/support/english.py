"""A test client whose browser asks for English, as most tests read English text: a tenant's
people read Brazilian Portuguese unless they (or their browser) choose otherwise."""

from typing import Any

from flask.testing import FlaskClient


class EnglishClient(FlaskClient):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.environ_base.setdefault("HTTP_ACCEPT_LANGUAGE", "en")


def in_english(app: Any) -> Any:
    """``app``, whose test clients ask for English."""
    app.test_client_class = EnglishClient
    return app
