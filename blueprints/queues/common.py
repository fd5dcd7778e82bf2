"""What every console view shares: who may read and act, the tenant filter, and one way to run
an action (commit, flash, come back)."""

from collections.abc import Callable
from typing import Any

from flask import abort, flash, redirect, render_template
from flask.typing import ResponseReturnValue
from flask_login import current_user
from sqlalchemy import select

from blueprints.auth.routes import safe_next
from blueprints.confirmation import Confirmation, ask, confirmed
from blueprints.queues import bp
from blueprints.queues.forms import ActionForm, TenantFilterForm
from console import audit_text, formatting, redaction
from console.errors import ActionRefused, NotFound
from models import Tenant, db
from models.people import Role

READERS = (Role.HR_ADMIN, Role.PLATFORM_ADMIN)  # HR admins: their own tenant's jobs
OPERATORS = (Role.PLATFORM_ADMIN,)


bp.add_app_template_filter(formatting.seconds, "duration")
bp.add_app_template_filter(formatting.count, "count")
bp.add_app_template_filter(formatting.rate_text, "rate")
bp.add_app_template_filter(audit_text.sentence, "audit_sentence")


@bp.app_template_filter("for_reader")
def for_reader(text: str | None) -> str | None:
    """A job's text as the reader may see it: worker names only for platform admins."""
    return text if current_user.is_platform_admin else redaction.hide_worker_names(text)


def tenant_id(tenant: Tenant | None) -> int | None:
    return None if tenant is None else tenant.id


def tenant_slug(tenant: Tenant | None) -> str | None:
    """What a page's links carry to keep a platform admin's tenant filter (others have none)."""
    return tenant.slug if tenant is not None and current_user.is_platform_admin else None


def render_console(
    template: str, tenant: Tenant | None, filtered: bool = True, **context: Any
) -> str:
    """Render a console page, with the tenant filter if the page is ``filtered`` by tenant
    (offered to platform admins only)."""
    tenants = None
    if filtered and current_user.is_platform_admin:
        choices = db.session.execute(select(Tenant.slug, Tenant.name).order_by(Tenant.name))
        tenants = TenantFilterForm(
            data={"tenant": tenant.slug if tenant else ""}, tenants=[tuple(row) for row in choices]
        )
    return render_template(
        template, tenant=tenant, tenant_slug=tenant_slug(tenant), tenant_form=tenants, **context
    )


def act(
    action: Callable[[], str], back: str, confirm: Confirmation | None = None
) -> ResponseReturnValue:
    """Run an operator action in the request's transaction, commit it (the change and its audit
    row together), say what happened, and go back where the form said (or to ``back``). With
    ``confirm``, only a confirmed post acts; any other is asked the question first."""
    form = ActionForm()
    target = safe_next(form.next.data) or back
    if confirm is not None and not confirmed():
        return ask(confirm, target)
    try:
        message = action()
    except NotFound:
        db.session.rollback()
        abort(404)
    except ActionRefused as refusal:
        db.session.rollback()
        flash(str(refusal), "error")
        return redirect(target, 303)
    db.session.commit()
    flash(message, "success")
    return redirect(target, 303)
