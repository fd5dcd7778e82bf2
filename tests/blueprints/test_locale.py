"""The language of a request: the user's saved preference, else Accept-Language, else the
tenant's default; a visitor not logged in with no usable Accept-Language reads
PAUTA_DEFAULT_LOCALE (Brazilian Portuguese unless set)."""

from typing import Any

import pytest

from models.people import Role
from tests.support.factories import login_as, make_tenant, make_user, seeding


def without_accept_language(client: Any) -> Any:
    client.environ_base.pop("HTTP_ACCEPT_LANGUAGE", None)
    return client


@pytest.mark.parametrize(
    ("accept", "heading", "lang"),
    [
        ("pt-BR,pt;q=0.9,en;q=0.5", "Entrar", "pt-BR"),
        ("pt", "Entrar", "pt-BR"),
        ("en-GB,en;q=0.8", "Log in", "en"),
        ("de, en;q=0.5", "Log in", "en"),
        ("de", "Entrar", "pt-BR"),  # none that Pauta speaks: the default
    ],
)
def test_a_visitor_reads_the_language_their_browser_asks_for(
    app: Any, accept: str, heading: str, lang: str
) -> None:
    page = app.test_client().get("/login", headers={"Accept-Language": accept})
    html = page.get_data(as_text=True)
    assert f"<h1>{heading}</h1>" in html
    assert f'<html lang="{lang}">' in html


def test_a_visitor_without_accept_language_reads_the_default(app: Any) -> None:
    page = without_accept_language(app.test_client()).get("/login")
    assert "<h1>Entrar</h1>" in page.get_data(as_text=True)
    app.config["PAUTA_DEFAULT_LOCALE"] = "en"
    page = without_accept_language(app.test_client()).get("/login")
    assert "<h1>Log in</h1>" in page.get_data(as_text=True)


def test_wtforms_own_messages_are_translated(app: Any) -> None:
    from tests.support.factories import csrf_token

    client = app.test_client()
    client.environ_base["HTTP_ACCEPT_LANGUAGE"] = "pt-BR"
    token = csrf_token(client, "/login")
    page = client.post("/login", data={"email": "", "password": "x", "csrf_token": token})
    assert page.status_code == 401
    assert "Campo obrigatório." in page.get_data(as_text=True)


def user_in(app: Any, default_locale: str, language: str | None = None) -> Any:
    with seeding(app) as session:
        tenant = make_tenant(session)
        tenant.default_locale = default_locale
        user = make_user(session, tenant, Role.HR_ADMIN)
        user.language = language
        return user


def nav_of(client: Any, **headers: str) -> str:
    return client.get("/cycles/", headers=headers).get_data(as_text=True)


def test_a_user_without_preference_or_header_reads_the_tenant_default(app: Any) -> None:
    brazilian, english = user_in(app, "pt_BR"), user_in(app, "en")
    first = without_accept_language(app.test_client())
    login_as(first, brazilian)
    assert ">Ciclos de avaliação<" in nav_of(first)
    second = without_accept_language(app.test_client())
    login_as(second, english)
    assert ">Review cycles<" in nav_of(second)


def test_accept_language_comes_before_the_tenant_default(app: Any) -> None:
    client = without_accept_language(app.test_client())
    login_as(client, user_in(app, "pt_BR"))
    assert ">Review cycles<" in nav_of(client, **{"Accept-Language": "en-US"})
    assert ">Ciclos de avaliação<" in nav_of(client)


def test_the_saved_preference_comes_first(app: Any) -> None:
    client = without_accept_language(app.test_client())
    login_as(client, user_in(app, "en", language="pt_BR"))
    assert ">Ciclos de avaliação<" in nav_of(client, **{"Accept-Language": "en-US"})
    assert "administrador(a) de RH" in nav_of(client)


def test_the_cli_and_the_worker_stay_english(app: Any) -> None:
    """No request: Flask-Babel's default, English, whatever the tenants' defaults."""
    from flask_babel import get_locale, gettext

    with app.app_context():
        assert str(get_locale()) == "en"
        assert gettext("Log in") == "Log in"
