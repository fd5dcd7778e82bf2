"""create_app(): configuration, extensions, blueprints and CLI groups. Nothing else."""

import logging
import os
import secrets
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from flask import Flask
from flask.cli import NoAppException
from flask_migrate import Migrate
from flask_wtf import CSRFProtect

from blueprints import assets, dates, errors, inputs, links, locale, observability, security, words
from blueprints.auth import bp as auth_bp
from blueprints.auth import login_manager
from blueprints.cycles import bp as cycles_bp
from blueprints.health import bp as health_bp
from blueprints.metrics import bp as metrics_bp
from blueprints.people import bp as people_bp
from blueprints.queues import bp as queues_bp
from blueprints.workflows import bp as workflows_bp
from commands.employees import employees_cli
from commands.jobs import jobs_cli
from commands.seed import seed_demo_command
from commands.users import users_cli
from hr.employee_csv import MAX_BYTES as EMPLOYEE_FILE_MAX_BYTES
from hr.throttle import LoginLimits
from jobqueue.registry import import_task_modules
from jobqueue.settings import prepare_after
from models import db

MIGRATIONS = Path(__file__).parent / "migrations"

migrate = Migrate()
csrf = CSRFProtect()


def create_app(overrides: Mapping[str, Any] | None = None) -> Flask:
    app = Flask(__name__)
    app.config.from_mapping(
        DATABASE_URL=os.environ.get("DATABASE_URL", ""),
        SECRET_KEY=os.environ.get("SECRET_KEY", ""),
        PAUTA_TASK_MODULES=os.environ.get("PAUTA_TASK_MODULES", "hr.tasks"),
        # Where the job page links an attempt's trace, e.g. https://jaeger.internal/trace/{trace_id}
        PAUTA_TRACE_URL_TEMPLATE=os.environ.get("PAUTA_TRACE_URL_TEMPLATE", ""),
        # Behind PgBouncer in transaction mode: PAUTA_POOLER=transaction (see the settings
        # reference), which keeps psycopg from preparing statements on the server.
        PAUTA_POOLER=os.environ.get("PAUTA_POOLER", "none"),
        PAUTA_PREPARE_THRESHOLD=os.environ.get("PAUTA_PREPARE_THRESHOLD", "auto"),
        SESSION_COOKIE_HTTPONLY=True,
        SESSION_COOKIE_SAMESITE="Lax",
        SESSION_COOKIE_SECURE=os.environ.get("SESSION_COOKIE_SECURE", "") == "1",
        PAUTA_LOGIN_LIMITS=LoginLimits.from_environ(os.environ),
        # How many reverse proxies in front of gunicorn add to X-Forwarded-For (0: none)
        PAUTA_TRUSTED_PROXIES=os.environ.get("PAUTA_TRUSTED_PROXIES", "0"),
        # Days a person's data export stays downloadable (docs/howto/handle-a-data-request.md).
        PAUTA_EXPORT_LINK_DAYS=os.environ.get("PAUTA_EXPORT_LINK_DAYS", "7"),
        # The largest request body: an employee file and the rest of its form.
        MAX_CONTENT_LENGTH=EMPLOYEE_FILE_MAX_BYTES + 64 * 1024,
        # The language of a visitor who is not logged in and whose browser names none we speak
        PAUTA_DEFAULT_LOCALE=os.environ.get("PAUTA_DEFAULT_LOCALE", "pt_BR"),
    )
    app.config.update(overrides or {})
    if not app.config["DATABASE_URL"]:
        app.config["DATABASE_URL"] = embedded_database_url()
    if not app.config["SECRET_KEY"]:
        logging.getLogger(__name__).warning("SECRET_KEY is not set; using a random one")
        app.config["SECRET_KEY"] = secrets.token_hex(32)
    app.config["SQLALCHEMY_DATABASE_URI"] = sqlalchemy_url(app.config["DATABASE_URL"])
    app.config.setdefault("SQLALCHEMY_ENGINE_OPTIONS", engine_options(app.config))

    import_task_modules(task_modules(app.config["PAUTA_TASK_MODULES"]))
    db.init_app(app)
    migrate.init_app(app, db, directory=str(MIGRATIONS))
    csrf.init_app(app)
    locale.init_app(app)
    dates.init_app(app)
    words.init_app(app)
    errors.init_app(app)
    login_manager.init_app(app)
    assets.init_app(app)
    inputs.init_app(app)
    links.init_app(app)
    security.init_app(app)
    observability.init_app(app)

    app.register_blueprint(health_bp)
    app.register_blueprint(queues_bp)
    app.register_blueprint(metrics_bp)
    app.register_blueprint(auth_bp)
    app.register_blueprint(cycles_bp)
    app.register_blueprint(people_bp)
    app.register_blueprint(workflows_bp)
    app.cli.add_command(jobs_cli)
    app.cli.add_command(users_cli)
    app.cli.add_command(employees_cli)
    app.cli.add_command(seed_demo_command)
    return app


class DatabaseNotSet(NoAppException):
    """No database to use; a usage error, so the flask command says why in one sentence."""


def embedded_database_url() -> str:
    """With DATABASE_URL unset: the embedded PostgreSQL that `make run` uses in this checkout,
    saying so on standard error (see devtools.database)."""
    from devtools.database import embedded_database

    found = embedded_database()
    if found is None:
        raise DatabaseNotSet(
            "DATABASE_URL is not set and this checkout has no embedded PostgreSQL yet: run "
            "`make run` once (it creates one under var/), or set DATABASE_URL to a PostgreSQL "
            "database, e.g. postgresql://me@localhost:5432/pauta"
        )
    url, description = found
    print(description, file=sys.stderr, flush=True)
    return url


def sqlalchemy_url(database_url: str) -> str:
    """DATABASE_URL as SQLAlchemy wants it: with the psycopg (3) driver named, and a libpq
    multi-host URL (``postgresql://u@db1:5432,db2:5432/pauta?target_session_attrs=read-write``,
    for failover) in SQLAlchemy's spelling, one ``host`` query parameter per server."""
    for prefix in ("postgresql://", "postgres://"):
        if database_url.startswith(prefix):
            rest = database_url.removeprefix(prefix)
            location, _, path = rest.partition("/")
            user, at, hosts = location.rpartition("@")
            if "," in hosts:
                database, _, query = path.partition("?")
                each = "&".join(f"host={host}" for host in hosts.split(","))
                rest = f"{user}{at}/{database}?{each}" + (f"&{query}" if query else "")
            return "postgresql+psycopg://" + rest
    return database_url


def engine_options(config: Mapping[str, Any]) -> dict[str, Any]:
    threshold = prepare_after(
        str(config["PAUTA_POOLER"]).strip().lower(),
        str(config["PAUTA_PREPARE_THRESHOLD"]).strip().lower(),
    )
    return {"pool_pre_ping": True, "connect_args": {"prepare_threshold": threshold}}


def task_modules(setting: str) -> list[str]:
    return [name.strip() for name in setting.split(",") if name.strip()]
