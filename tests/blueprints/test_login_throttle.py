"""Failed log-ins are throttled per account and per source address, with the counts in
PostgreSQL: every app process sees them, parallel guesses are all counted, the answer is 429
with Retry-After, and an unknown account is answered exactly like a known one."""

import threading
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

from app import create_app
from hr.throttle import LoginLimits
from models import db
from models.people import Role
from tests.support.db import scalar
from tests.support.english import in_english
from tests.support.factories import PASSWORD, csrf_token, make_tenant, make_user, seeding

Conn = psycopg.Connection[Any]
WRONG = "The e-mail or the password is wrong."
TOO_MANY = "Too many failed log-ins for this e-mail address or from your network."


@pytest.fixture
def another_app(database_url: str) -> Iterator[Callable[..., Any]]:
    """Another app on the same database, as another gunicorn worker or web host is."""
    made: list[Any] = []

    def make(**settings: Any) -> Any:
        made.append(in_english(create_app({"DATABASE_URL": database_url, "SECRET_KEY": "test",
                                           "TESTING": True, **settings})))  # fmt: skip
        return made[-1]

    yield make
    for application in made:
        with application.app_context():
            db.engine.dispose()


@pytest.fixture
def user(app: Any) -> Any:
    with seeding(app) as session:
        return make_user(session, make_tenant(session), Role.HR_ADMIN)


class Browser:
    """A test client that logs in from one address, with its session's CSRF token."""

    def __init__(self, app: Any, address: str = "127.0.0.1", **environ: str) -> None:
        self.client = app.test_client()
        self.environ = {"REMOTE_ADDR": address, **environ}
        self.token = csrf_token(self.client, "/login")

    def log_in(self, email: str, password: str = "wrong password!") -> Any:
        return self.client.post(
            "/login",
            data={"email": email, "password": password, "csrf_token": self.token},
            environ_overrides=self.environ,
        )


def answer(response: Any) -> tuple[int, bool, bool]:
    text = response.get_data(as_text=True)
    return response.status_code, WRONG in text, TOO_MANY in text


def test_past_the_account_limit_even_the_right_password_is_429_with_retry_after(
    app: Any, user: Any, conn: Conn
) -> None:
    browser = Browser(app)
    answers = [answer(browser.log_in(user.email)) for _ in range(30)]
    right = browser.log_in(user.email, PASSWORD)

    assert answers == [(401, True, False)] * 10 + [(429, False, True)] * 20  # default: 10
    assert answer(right) == (429, False, True)
    assert 850 <= int(right.headers["Retry-After"]) <= 900  # the rest of a 15-minute window
    assert "Try again in 15 minutes." in right.get_data(as_text=True)
    assert browser.client.get("/cycles/").status_code == 302  # not logged in
    assert scalar(conn, "SELECT last_login_at FROM users WHERE id = %s", user.id) is None


def test_an_unknown_account_gets_the_same_answers_as_a_known_one(
    app: Any, user: Any, conn: Conn
) -> None:
    app.config["PAUTA_LOGIN_LIMITS"] = LoginLimits(account_failures=3)
    known, unknown = Browser(app, "10.0.0.1"), Browser(app, "10.0.0.2")
    for email, browser in ((user.email, known), ("nobody@nowhere.example", unknown)):
        answers = [answer(browser.log_in(email)) for _ in range(5)]
        assert answers == [(401, True, False)] * 3 + [(429, False, True)] * 2, email
    assert scalar(conn, "SELECT count(*) FROM login_throttle WHERE scope = 'account'") == 2
    stored = scalar(conn, "SELECT string_agg(key, ' ') FROM login_throttle")
    assert "nobody" not in stored and "10.0.0" not in stored  # digests, not what was typed


def test_the_address_limit_counts_failures_across_accounts(app: Any, user: Any) -> None:
    app.config["PAUTA_LOGIN_LIMITS"] = LoginLimits(account_failures=100, address_failures=4)
    spraying = Browser(app, "203.0.113.7")
    answers = [answer(spraying.log_in(f"guess{n}@x.example")) for n in range(4)]
    assert answers == [(401, True, False)] * 4
    assert spraying.log_in(user.email, PASSWORD).status_code == 429
    neighbour = Browser(app, "203.0.113.8")
    assert neighbour.log_in(user.email, PASSWORD).status_code == 302


def test_ipv6_clients_are_counted_by_their_64_block(app: Any, user: Any) -> None:
    app.config["PAUTA_LOGIN_LIMITS"] = LoginLimits(account_failures=100, address_failures=2)
    for host in ("2001:db8:1:2::a", "2001:db8:1:2::b"):
        assert Browser(app, host).log_in(f"{host}@x.example").status_code == 401
    assert Browser(app, "2001:db8:1:2::c").log_in(user.email, PASSWORD).status_code == 429
    assert Browser(app, "2001:db8:1:3::a").log_in(user.email, PASSWORD).status_code == 302


def test_a_successful_log_in_clears_its_account_and_gives_its_attempt_back(
    app: Any, user: Any, conn: Conn
) -> None:
    browser = Browser(app)
    browser.log_in(user.email)
    browser.log_in(user.email)
    assert browser.log_in(user.email, PASSWORD).status_code == 302
    rows = conn.execute("SELECT scope, failures FROM login_throttle ORDER BY scope").fetchall()
    assert rows == [("address", 2)]  # three attempts, the successful one taken back


def test_a_window_that_has_passed_starts_again_and_passed_windows_are_pruned(
    app: Any, user: Any, conn: Conn
) -> None:
    app.config["PAUTA_LOGIN_LIMITS"] = LoginLimits(account_failures=2, window_seconds=60)
    conn.execute(
        "INSERT INTO login_throttle (scope, key, failures, window_ends_at)"
        " SELECT 'address', md5(n::text), 1, now() - interval '1 second'"
        " FROM generate_series(1, 3) n"
    )
    browser = Browser(app)
    assert [browser.log_in(user.email).status_code for _ in range(3)] == [401, 401, 429]
    assert scalar(conn, "SELECT count(*) FROM login_throttle") == 2  # the three passed: gone
    retry = int(browser.log_in(user.email).headers["Retry-After"])
    assert 1 <= retry <= 60

    conn.execute("UPDATE login_throttle SET window_ends_at = now() - interval '1 second'")
    assert browser.log_in(user.email).status_code == 401  # a new window: one failure so far
    assert scalar(conn, "SELECT failures FROM login_throttle WHERE scope = 'account'") == 1


def test_every_app_process_sees_the_same_counts(
    app: Any, user: Any, another_app: Callable[..., Any]
) -> None:
    other = another_app()
    for application in (app, other):
        application.config["PAUTA_LOGIN_LIMITS"] = LoginLimits(account_failures=4)
    first, second = Browser(app), Browser(other)
    statuses = [browser.log_in(user.email).status_code for browser in (first, second) * 3]
    assert statuses == [401, 401, 401, 401, 429, 429]


def test_parallel_guesses_are_all_counted(app: Any, user: Any) -> None:
    app.config["PAUTA_LOGIN_LIMITS"] = LoginLimits(account_failures=3)
    browsers = [Browser(app, f"198.51.100.{n}") for n in range(12)]
    start = threading.Barrier(len(browsers))
    statuses: list[int] = []

    def guess(browser: Browser) -> None:
        start.wait()
        statuses.append(browser.log_in(user.email).status_code)

    threads = [threading.Thread(target=guess, args=(browser,)) for browser in browsers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert Counter(statuses) == {401: 3, 429: 9}


def test_behind_trusted_proxies_the_forwarded_client_is_counted(
    app: Any, user: Any, another_app: Callable[..., Any]
) -> None:
    behind = another_app(PAUTA_TRUSTED_PROXIES="1")
    for application in (app, behind):
        application.config["PAUTA_LOGIN_LIMITS"] = LoginLimits(100, address_failures=1)
    forwarded = {"HTTP_X_FORWARDED_FOR": "192.0.2.1"}
    assert Browser(behind, "10.9.9.9", **forwarded).log_in("a@x.example").status_code == 401
    assert Browser(behind, "10.9.9.9", **forwarded).log_in(user.email, PASSWORD).status_code == 429
    other = {"HTTP_X_FORWARDED_FOR": "192.0.2.2"}
    assert Browser(behind, "10.9.9.9", **other).log_in(user.email, PASSWORD).status_code == 302

    # With no trusted proxy the header is the client's word: ignored, the peer is counted.
    assert Browser(app, "10.8.8.8", **forwarded).log_in("b@x.example").status_code == 401
    assert Browser(app, "10.8.8.8", **other).log_in(user.email, PASSWORD).status_code == 429


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({"PAUTA_LOGIN_ACCOUNT_FAILURES": "0"}, "PAUTA_LOGIN_ACCOUNT_FAILURES must be a whole"),
        ({"PAUTA_LOGIN_WINDOW_SECONDS": "15m"}, "PAUTA_LOGIN_WINDOW_SECONDS must be a whole"),
        ({"PAUTA_LOGIN_ADDRESS_FAILURES": "-3"}, "PAUTA_LOGIN_ADDRESS_FAILURES must be a whole"),
    ],
)
def test_limits_that_are_not_whole_numbers_are_refused_at_start(
    environ: dict[str, str], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        LoginLimits.from_environ(environ)


def test_limits_come_from_the_environment_with_defaults() -> None:
    limits = LoginLimits.from_environ({"PAUTA_LOGIN_ADDRESS_FAILURES": "200"})
    assert limits == LoginLimits(account_failures=10, address_failures=200, window_seconds=900)


def test_a_trusted_proxy_count_that_is_not_a_number_stops_the_app(database_url: str) -> None:
    with pytest.raises(RuntimeError, match="PAUTA_TRUSTED_PROXIES must be a whole number"):
        create_app({"DATABASE_URL": database_url, "PAUTA_TRUSTED_PROXIES": "yes"})
