"""Log-in throttling: failed log-ins counted per account and per source address, in PostgreSQL
(``login_throttle``), so that every gunicorn worker and every web host sees the same counts.

- Every attempt is counted before its password is checked, by one statement that raises both
  counters: guesses sent in parallel are all counted, and an attempt over either limit is
  refused (429) without hashing anything.
- A successful log-in takes its attempt back: the account's counter is deleted and the
  address's lowered by one, so that people logging in from one office address do not use up
  its budget.
- A counter runs for a fixed window from its first failure; once the window has passed, the
  next attempt starts a new one. Rows whose window has passed are deleted by later attempts,
  up to ``PRUNE_BATCH`` each.
- Keys are SHA-256 digests of the e-mail address as typed (trimmed, lowercased) and of the
  source (an IPv4 address, or the /64 network of an IPv6 one): the table never holds a password
  typed into the e-mail field. An e-mail address is counted whether or not an account has it,
  so unknown accounts get the same answers (ASVS V2.2.1).
"""

import hashlib
import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass, fields

from sqlalchemy import text
from sqlalchemy.orm import Session

from models.throttle import ThrottleScope

DEFAULT_ACCOUNT_FAILURES = 10
DEFAULT_ADDRESS_FAILURES = 50
DEFAULT_WINDOW_SECONDS = 900
PRUNE_BATCH = 100

ENVIRONMENT = {
    "account_failures": "PAUTA_LOGIN_ACCOUNT_FAILURES",
    "address_failures": "PAUTA_LOGIN_ADDRESS_FAILURES",
    "window_seconds": "PAUTA_LOGIN_WINDOW_SECONDS",
}

# login_throttle_count: one attempt more on both counters (a new window where one has passed)
_COUNT = text(
    """
    INSERT INTO login_throttle AS t (scope, key, failures, window_ends_at)
    VALUES ('account', :account, 1, now() + make_interval(secs => :window)),
           ('address', :address, 1, now() + make_interval(secs => :window))
    ON CONFLICT (scope, key) DO UPDATE SET
        failures = CASE WHEN t.window_ends_at <= now() THEN 1 ELSE t.failures + 1 END,
        window_ends_at = CASE WHEN t.window_ends_at <= now()
                              THEN excluded.window_ends_at ELSE t.window_ends_at END
    RETURNING scope, failures,
              greatest(1, ceil(extract(epoch FROM window_ends_at - now())))::int AS seconds_left
    """
)
# login_throttle_prune: counters whose window has passed; rows others hold are left for later
_PRUNE = text(
    """
    DELETE FROM login_throttle WHERE (scope, key) IN (
        SELECT scope, key FROM login_throttle WHERE window_ends_at <= now()
        ORDER BY window_ends_at LIMIT :batch FOR UPDATE SKIP LOCKED)
    """
)
# login_throttle_forgive: a successful log-in clears its account and takes one off its address
_FORGIVE_ACCOUNT = text("DELETE FROM login_throttle WHERE scope = 'account' AND key = :account")
_FORGIVE_ADDRESS = text(
    "UPDATE login_throttle SET failures = greatest(failures - 1, 0)"
    " WHERE scope = 'address' AND key = :address"
)


@dataclass(frozen=True)
class LoginLimits:
    """How many failed log-ins a window allows, per account and per source address."""

    account_failures: int = DEFAULT_ACCOUNT_FAILURES
    address_failures: int = DEFAULT_ADDRESS_FAILURES
    window_seconds: int = DEFAULT_WINDOW_SECONDS

    def __post_init__(self) -> None:
        for field in fields(self):
            value = getattr(self, field.name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{field.name} must be a whole number, 1 or more, not {value!r}")

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] = os.environ) -> "LoginLimits":
        """The limits from ``PAUTA_LOGIN_*`` (a default where unset or empty); ValueError
        naming the variable for a value that is not a whole number of 1 or more."""
        values = {}
        for name, variable in ENVIRONMENT.items():
            raw = environ.get(variable, "").strip()
            if not raw:
                continue
            if not raw.isascii() or not raw.isdigit() or int(raw) < 1:
                raise ValueError(f"{variable} must be a whole number, 1 or more, not {raw!r}")
            values[name] = int(raw)
        return cls(**values)

    def limit(self, scope: str) -> int:
        return self.account_failures if scope == ThrottleScope.ACCOUNT else self.address_failures


def count_attempt(session: Session, limits: LoginLimits, email: str, source: str) -> int | None:
    """Count a log-in attempt for the account ``email`` from ``source`` (not committed: commit
    before checking the password). The seconds to wait when either counter is now over its
    limit, else None."""
    rows = session.execute(
        _COUNT,
        {"account": account_key(email), "address": address_key(source),
         "window": limits.window_seconds},
    ).all()  # fmt: skip
    session.execute(_PRUNE, {"batch": PRUNE_BATCH})
    waits = [row.seconds_left for row in rows if row.failures > limits.limit(row.scope)]
    return max(waits) if waits else None


def forgive(session: Session, email: str, source: str) -> None:
    """After a successful log-in (not committed): clear the account's failures and take this
    attempt off the address's."""
    session.execute(_FORGIVE_ACCOUNT, {"account": account_key(email)})
    session.execute(_FORGIVE_ADDRESS, {"address": address_key(source)})


def account_key(email: str) -> str:
    return _digest(email.strip().lower())


def address_key(source: str) -> str:
    """IPv4 addresses one by one; IPv6 by /64, the block one host is usually given."""
    try:
        address = ipaddress.ip_address(source)
    except ValueError:
        return _digest(source)
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        address = address.ipv4_mapped
    if address.version == 6:
        return _digest(str(ipaddress.ip_network(f"{address}/64", strict=False)))
    return _digest(str(address))


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()
