"""Sending e-mail over SMTP, and telling a failure worth retrying from one that is final.

Settings come from the worker's environment (``SMTP_HOST``, ``SMTP_PORT``, ``SMTP_USERNAME``,
``SMTP_PASSWORD``, ``SMTP_STARTTLS``, ``MAIL_FROM``, ``PAUTA_BASE_URL``); see
docs/reference/settings.md.

- **Permanent** (the job goes to ``dead`` at once, with the reason as its last error): a 5xx
  reply at any stage (recipient unknown, message rejected, authentication refused), a
  recipient address that is not one, or a message the server cannot take (a non-ASCII address
  without SMTPUTF8).
- **Transient** (the job is retried with backoff): the server cannot be reached, drops the
  connection, times out, or answers 4xx (greylisting, "try again later").
"""

import os
import smtplib
import ssl
from dataclasses import dataclass
from email.message import EmailMessage

from email_validator import EmailNotValidError, validate_email

from jobqueue import PermanentError

SMTP_TIMEOUT_SECONDS = 30.0


class MailDeferred(RuntimeError):
    """A transient delivery failure: the job is retried."""


@dataclass(frozen=True, slots=True)
class MailSettings:
    host: str = "127.0.0.1"
    port: int = 25
    username: str = ""
    password: str = ""
    starttls: bool = False
    sender: str = "Pauta <pauta@localhost>"
    base_url: str = "http://127.0.0.1:8000"  # where links in e-mails point

    @classmethod
    def from_environ(cls) -> "MailSettings":
        env = os.environ
        defaults = cls()
        port = env.get("SMTP_PORT", str(defaults.port))
        if not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"SMTP_PORT must be a port number, not {port!r}")
        starttls = env.get("SMTP_STARTTLS", "0").strip().lower()
        if starttls not in ("0", "1", "true", "false", "yes", "no", ""):
            raise ValueError(f"SMTP_STARTTLS must be 1 or 0, not {starttls!r}")
        return cls(
            host=env.get("SMTP_HOST", defaults.host),
            port=int(port),
            username=env.get("SMTP_USERNAME", ""),
            password=env.get("SMTP_PASSWORD", ""),
            starttls=starttls in ("1", "true", "yes"),
            sender=env.get("MAIL_FROM", defaults.sender),
            base_url=env.get("PAUTA_BASE_URL", defaults.base_url).rstrip("/"),
        )


def check_address(address: str) -> str:
    """The address if its syntax is valid; a PermanentError otherwise (retrying cannot help)."""
    try:
        return validate_email(address, check_deliverability=False).normalized
    except EmailNotValidError as error:
        raise PermanentError(f"invalid recipient address {address!r}: {error}") from None


def send(message: EmailMessage, settings: MailSettings) -> None:
    """Deliver ``message`` to the SMTP server; raise PermanentError or MailDeferred if not."""
    try:
        with smtplib.SMTP(settings.host, settings.port, timeout=SMTP_TIMEOUT_SECONDS) as smtp:
            if settings.starttls:
                smtp.starttls(context=ssl.create_default_context())
            if settings.username:
                smtp.login(settings.username, settings.password)
            smtp.send_message(message)
    except smtplib.SMTPRecipientsRefused as error:
        recipient, (code, reply) = next(iter(error.recipients.items()))
        raise _refusal(code, reply, f"refused recipient {recipient}") from None
    except smtplib.SMTPResponseException as error:
        raise _refusal(error.smtp_code, error.smtp_error, "answered") from None
    except smtplib.SMTPNotSupportedError as error:  # e.g. no SMTPUTF8 for a non-ASCII address
        raise PermanentError(f"SMTP server cannot take this message: {error}") from None
    except (OSError, smtplib.SMTPException) as error:  # refused, reset, timed out, disconnected
        raise MailDeferred(
            f"cannot talk to the SMTP server {settings.host}:{settings.port}: "
            f"{error or type(error).__name__}"
        ) from error


def _refusal(code: int, reply: bytes | str, what: str) -> Exception:
    text = reply.decode(errors="replace") if isinstance(reply, bytes) else reply
    message = f"SMTP server {what}: {code} {text}".strip()
    return PermanentError(message) if code >= 500 else MailDeferred(message)
