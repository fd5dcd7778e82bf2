"""Sending over SMTP against a real server on loopback, and how failures are classified."""

from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, date, datetime
from email.message import EmailMessage
from email.utils import parsedate_to_datetime

import pytest

from hr.mail import MailDeferred, MailSettings, send
from hr.notices import ReviewerNotice, render_notice
from jobqueue import PermanentError
from tests.support.smtp import SmtpServer, free_port

NOTICE = ReviewerNotice(
    cycle_id=7,
    cycle_name="H1 <2026>",
    cycle_status="active",
    due_date=date(2026, 7, 15),
    organisation="Acme & Co",
    reviewer_id=3,
    reviewer_name="Ana Almeida",
    reviewer_email="ana@acme.example",
    reviews=["Yourself (self-review)", "Bruno Berg (your direct report)"],
)


@pytest.fixture
def smtp() -> Iterator[SmtpServer]:
    server = SmtpServer().start()
    yield server
    server.stop()


def settings_for(server: SmtpServer) -> MailSettings:
    return MailSettings(host="127.0.0.1", port=server.port, sender="HR <hr@acme.example>",
                        base_url="https://hr.acme.example")  # fmt: skip


def message_to(address: str) -> EmailMessage:
    message = EmailMessage()
    message["From"] = "hr@acme.example"
    message["To"] = address
    message["Subject"] = "test"
    message.set_content("hello")
    return message


def test_the_notice_has_text_and_html_with_the_link_and_the_due_date() -> None:
    settings = MailSettings(sender="HR <hr@acme.example>", base_url="https://hr.acme.example")
    message = render_notice(NOTICE, settings, tenant_id=2)
    assert message["To"] == "Ana Almeida <ana@acme.example>"
    assert message["Subject"] == "Reviews due 15 Jul 2026: H1 <2026>"
    assert message["Message-ID"] == "<review-notice.2.7.3@acme.example>"
    text = message.get_body(("plain",)).get_content()  # type: ignore[union-attr]
    html = message.get_body(("html",)).get_content()  # type: ignore[union-attr]
    assert "https://hr.acme.example/my/reviews?cycle=7" in text
    assert "Wednesday 15 July 2026" in text and "Wednesday 15 July 2026" in html
    assert "  - Yourself (self-review)\n  - Bruno Berg (your direct report)" in text
    assert "H1 &lt;2026&gt;" in html and "Acme &amp; Co" in html
    assert 'href="https://hr.acme.example/my/reviews?cycle=7"' in html


def test_the_notice_is_dated_now_and_keeps_one_message_id_across_attempts() -> None:
    before = datetime.now(UTC).replace(microsecond=0)
    first = render_notice(NOTICE, MailSettings(sender="HR <hr@acme.example>"), tenant_id=2)
    again = render_notice(NOTICE, MailSettings(sender="HR <hr@acme.example>"), tenant_id=2)
    assert before <= parsedate_to_datetime(first["Date"]) <= datetime.now(UTC)
    assert first["Message-ID"] == again["Message-ID"] == "<review-notice.2.7.3@acme.example>"


@pytest.mark.parametrize("line_break", ["\r\n", "\n", "\u2028", "\x85"])
def test_a_notice_that_cannot_be_rendered_is_a_permanent_failure(line_break: str) -> None:
    broken = replace(NOTICE, cycle_name=f"H1{line_break}Bcc: everyone@acme.example")
    with pytest.raises(PermanentError, match="the notice cannot be rendered: Header values"):
        render_notice(broken, MailSettings(), tenant_id=1)


def test_an_invalid_recipient_address_is_permanent() -> None:
    broken = replace(NOTICE, reviewer_email="not an address")
    with pytest.raises(PermanentError, match="invalid recipient address 'not an address'"):
        render_notice(broken, MailSettings(), tenant_id=1)


def test_a_message_is_delivered(smtp: SmtpServer) -> None:
    send(message_to("bo@acme.example"), settings_for(smtp))
    assert [str(m["To"]) for m in smtp.messages] == ["bo@acme.example"]


def test_a_550_for_the_recipient_is_permanent_with_the_reply_text(smtp: SmtpServer) -> None:
    smtp.reject_recipient("gone@acme.example", "550 5.1.1 <gone@acme.example>: User unknown")
    with pytest.raises(PermanentError) as refused:
        send(message_to("gone@acme.example"), settings_for(smtp))
    assert str(refused.value) == (
        "SMTP server refused recipient gone@acme.example: 550 5.1.1 <gone@acme.example>: "
        "User unknown"
    )


def test_a_450_for_the_recipient_is_transient(smtp: SmtpServer) -> None:
    smtp.reject_recipient("busy@acme.example", "450 4.2.1 Mailbox busy, try later")
    with pytest.raises(MailDeferred, match=r"450 4\.2\.1 Mailbox busy"):
        send(message_to("busy@acme.example"), settings_for(smtp))


def test_a_421_greeting_is_transient(smtp: SmtpServer) -> None:
    smtp.refuse_connections(1)
    with pytest.raises(MailDeferred, match=r"answered: 421 4\.3\.2 Service not available"):
        send(message_to("bo@acme.example"), settings_for(smtp))
    send(message_to("bo@acme.example"), settings_for(smtp))
    assert len(smtp.messages) == 1


def test_a_refused_connection_is_transient() -> None:
    port = free_port()  # nothing listens there
    with pytest.raises(MailDeferred, match=f"127.0.0.1:{port}: .*Connection refused"):
        send(message_to("bo@acme.example"), MailSettings(port=port))


def test_a_non_ascii_address_without_smtputf8_is_permanent(smtp: SmtpServer) -> None:
    with pytest.raises(PermanentError, match="SMTPUTF8"):
        send(message_to("garcía@acme.example"), settings_for(smtp))


@pytest.mark.parametrize(
    ("environment", "problem"),
    [({"SMTP_PORT": "smtp"}, "SMTP_PORT must be a port number"),
     ({"SMTP_STARTTLS": "maybe"}, "SMTP_STARTTLS must be 1 or 0")],
)  # fmt: skip
def test_bad_settings_are_refused_with_their_name(
    monkeypatch: pytest.MonkeyPatch, environment: dict[str, str], problem: str
) -> None:
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match=problem):
        MailSettings.from_environ()


def test_settings_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {
        "SMTP_HOST": "mail.acme.example", "SMTP_PORT": "587", "SMTP_USERNAME": "pauta",
        "SMTP_PASSWORD": "s3cret", "SMTP_STARTTLS": "1", "MAIL_FROM": "HR <hr@acme.example>",
        "PAUTA_BASE_URL": "https://hr.acme.example/",
    }.items():  # fmt: skip
        monkeypatch.setenv(name, value)
    assert MailSettings.from_environ() == MailSettings(
        "mail.acme.example", 587, "pauta", "s3cret", True, "HR <hr@acme.example>",
        "https://hr.acme.example",
    )  # fmt: skip
