"""A real SMTP server on loopback (aiosmtpd) that records what it receives and can misbehave.

- ``refuse_connections(n)``: greet the next ``n`` connections with ``421`` and hang up, the way
  an SMTP server refuses service (a transient failure for the client).
- ``reject_recipient(address, reply)``: answer ``RCPT TO`` for that address with ``reply``,
  e.g. ``550 5.1.1 <x@y>: Recipient address rejected: User unknown``.
- ``stop()`` / ``start()``: nothing listens in between, so connecting fails with
  ``ConnectionRefusedError``; the port stays the same.
"""

import email
import email.policy
import socket
import threading
from email.message import EmailMessage
from typing import Any

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, Envelope, Session

from tests.support.processes import wait_until


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class _RefusingSMTP(SMTP):
    """aiosmtpd's server, which greets with 421 and hangs up while its owner says so."""

    def __init__(self, handler: "SmtpServer", **kwargs: Any) -> None:
        super().__init__(handler, **kwargs)
        self.owner = handler

    async def _handle_client(self) -> None:
        if self.owner.take_refusal():
            await self.push("421 4.3.2 Service not available, try again later")
            assert self.transport is not None
            self.transport.close()
            return
        await super()._handle_client()


class SmtpServer:
    def __init__(self) -> None:
        self.port = free_port()
        self.messages: list[EmailMessage] = []
        self.connections_refused = 0
        self._refusals = 0
        self._rejections: dict[str, str] = {}
        self._lock = threading.Lock()
        self._controller: Controller | None = None

    @property
    def env(self) -> dict[str, str]:
        """The worker's environment for sending through this server."""
        return {
            "SMTP_HOST": "127.0.0.1",
            "SMTP_PORT": str(self.port),
            "SMTP_STARTTLS": "0",
            "MAIL_FROM": "Pauta <pauta@hr.example>",
            "PAUTA_BASE_URL": "https://pauta.example",
        }

    def start(self) -> "SmtpServer":
        controller = Controller(self, hostname="127.0.0.1", port=self.port)
        controller.factory = lambda: _RefusingSMTP(self, hostname="smtp.test")  # type: ignore[method-assign]
        controller.start()
        self._controller = controller
        return self

    def stop(self) -> None:
        if self._controller is not None:
            self._controller.stop()
            self._controller = None

    def refuse_connections(self, count: int) -> None:
        with self._lock:
            self._refusals = count

    def reject_recipient(self, address: str, reply: str) -> None:
        self._rejections[address.lower()] = reply

    def take_refusal(self) -> bool:
        with self._lock:
            if self._refusals <= 0:
                return False
            self._refusals -= 1
            self.connections_refused += 1
            return True

    # -- aiosmtpd handler hooks ----------------------------------------------------------------

    async def handle_RCPT(
        self, server: SMTP, session: Session, envelope: Envelope, address: str, options: list[str]
    ) -> str:
        if address.lower() in self._rejections:
            return self._rejections[address.lower()]
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        message = email.message_from_bytes(envelope.content, policy=email.policy.default)  # type: ignore[arg-type]
        with self._lock:
            self.messages.append(message)  # type: ignore[arg-type]
        return "250 Message accepted for delivery"

    # -- reading -------------------------------------------------------------------------------

    def to(self, address: str) -> list[EmailMessage]:
        with self._lock:
            return [m for m in self.messages if address.lower() in str(m["To"]).lower()]

    def wait_for(self, count: int, timeout: float = 30.0) -> list[EmailMessage]:
        """Wait until ``count`` messages have arrived; return them all."""
        wait_until(lambda: len(self.messages) >= count, timeout, message=(
            f"expected {count} e-mails, got {len(self.messages)}"
        ))  # fmt: skip
        with self._lock:
            return list(self.messages)
