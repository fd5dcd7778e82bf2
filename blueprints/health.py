"""Liveness for load balancers and the set-up smoke test."""

from flask import Blueprint, jsonify
from flask.typing import ResponseReturnValue
from sqlalchemy import text

from models import db

bp = Blueprint("health", __name__)


@bp.get("/healthz")
def healthz() -> ResponseReturnValue:
    db.session.execute(text("SELECT 1"))
    return jsonify(status="ok")
