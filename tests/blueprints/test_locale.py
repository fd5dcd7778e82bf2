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


def test_the_profile_saves_the_language_and_time_zone_the_pages_then_use(app: Any) -> None:
    from tests.support.factories import csrf_token

    user = user_in(app, "en")
    client = app.test_client()
    login_as(client, user)
    token = csrf_token(client, "/profile")
    saved = client.post(
        "/profile",
        data={"language": "pt_BR", "time_zone": "Asia/Tokyo", "csrf_token": token},
    )
    assert saved.status_code == 303
    page = client.get("/profile").get_data(as_text=True)  # the browser still asks for English
    assert "<h1>Perfil</h1>" in page
    assert "Seu idioma e seu fuso horário foram salvos." in page  # the flash, in the new language
    assert '<option selected value="Asia/Tokyo">' in page
    assert ">Ciclos de avaliação<" in nav_of(client)
    bad = client.post("/profile", data={"language": "xx", "time_zone": "Mars", "csrf_token": token})
    assert bad.status_code == 400


def test_the_time_zone_moves_the_clock_and_utc_stays_on_hover(app: Any) -> None:
    from datetime import UTC, datetime

    from flask_login import login_user

    from blueprints.dates import moment

    user = user_in(app, "pt_BR")
    noon = datetime(2026, 12, 1, 17, 5, tzinfo=UTC)
    for zone, shown in (
        ("America/Sao_Paulo", "01/12/2026 14:05"),
        ("Asia/Tokyo", "02/12/2026 02:05"),
    ):
        with app.test_request_context():
            from models import User, db

            reader = db.session.get(User, user.id)
            reader.time_zone = zone
            login_user(reader)
            html = str(moment(noon))
            assert f">{shown}</time>" in html
            assert 'title="2026-12-01 17:05:00 UTC"' in html


def test_the_top_bar_switch_saves_the_language_and_goes_back(app: Any) -> None:
    from tests.support.factories import csrf_token

    client = app.test_client()
    login_as(client, user_in(app, "pt_BR"))
    token = csrf_token(client, "/cycles/")
    assert ">Review cycles<" in nav_of(client)  # the test client asks for English
    switched = client.post(
        "/language", data={"language": "pt_BR", "next": "/cycles/", "csrf_token": token}
    )
    assert switched.status_code == 303 and switched.headers["Location"] == "/cycles/"
    assert ">Ciclos de avaliação<" in nav_of(client)
    refused = client.post("/language", data={"language": "de", "csrf_token": token})
    assert refused.status_code == 400
    away = client.post(
        "/language", data={"language": "en", "next": "//evil.example/", "csrf_token": token}
    )
    assert away.headers["Location"] == "/profile"


def test_error_pages_speak_the_readers_language(app: Any) -> None:
    client = app.test_client()
    client.environ_base["HTTP_ACCEPT_LANGUAGE"] = "pt-BR"
    missing = client.get("/no/such/page")
    assert missing.status_code == 404
    assert "<h1>Página não encontrada " in missing.get_data(as_text=True)
    login_as(client, user_in(app, "pt_BR"))
    refused = client.get("/my/reviews?cycle=x")
    assert refused.status_code == 400
    page = refused.get_data(as_text=True)
    assert "<h1>Requisição inválida " in page
    assert "O parâmetro &#39;cycle&#39; deve ser um número inteiro" in page
