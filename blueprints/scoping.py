"""Tenant scoping: the one place that decides which tenant's rows a request may see.

Every query a view makes about tenant-owned rows starts from :func:`scoped` (or
:func:`get_or_404`), which filters by the logged-in user's tenant; platform admins see every
tenant. A row of another tenant is therefore indistinguishable from a missing one: 404.
"""

from typing import Any, TypeVar

from flask import abort
from flask_login import current_user
from sqlalchemy import ColumnElement, Select, select, true

from models import Tenant, db

Model = TypeVar("Model", bound=Any)


def visible_tenant_id() -> int | None:
    """The tenant the current user is confined to; ``None`` for a platform admin (all)."""
    if current_user.is_platform_admin:
        return None
    return int(current_user.tenant_id)


def tenant_clause(model: Any) -> ColumnElement[bool]:
    """``model.tenant_id = <the user's tenant>``, or TRUE for a platform admin."""
    tenant_id = visible_tenant_id()
    return true() if tenant_id is None else model.tenant_id == tenant_id


def scoped(model: type[Model]) -> Select[tuple[Model]]:
    """``SELECT model`` restricted to what the current user may see."""
    return select(model).where(tenant_clause(model))


def get_or_404(model: type[Model], ident: int) -> Model:
    """One row by primary key, if the current user may see it; 404 otherwise."""
    row = db.session.scalars(scoped(model).where(model.id == ident)).one_or_none()
    if row is None:
        abort(404)
    return row


def chosen_tenant(slug: str | None) -> Tenant | None:
    """The tenant a console page is narrowed to: a tenant-bound user's own, whatever they ask
    for; for a platform admin the tenant whose slug they chose (404 if none has it), or ``None``
    for every tenant."""
    if not current_user.is_platform_admin:
        return current_user.tenant  # type: ignore[no-any-return]
    if not slug:
        return None
    tenant = db.session.scalars(select(Tenant).where(Tenant.slug == slug)).one_or_none()
    if tenant is None:
        abort(404)
    return tenant
