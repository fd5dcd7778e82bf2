"""Headers every response carries: a Content-Security-Policy that lets the browser run only
scripts served from this site (no inline script, no CDN), and the usual hardening.

Styles are 'self' too: no template has a ``style`` attribute or ``<style>`` element. Chart.js
sizes its canvases through ``element.style`` (the CSSOM), which the policy allows.

Every response but a static file is ``Cache-Control: no-store``: review comments, job payloads
and console figures must not stay in the browser's cache (or a proxy's) after logging out.

Behind ``PAUTA_TRUSTED_PROXIES`` reverse proxies, the client's address (``request.remote_addr``,
which the log-in throttle counts by) is read from ``X-Forwarded-For`` as many hops back, with
werkzeug's ``ProxyFix``; with none (the default), it is the connection's peer and the header is
ignored, so that a client cannot choose its own address.
"""

from flask import Flask, Response, request
from werkzeug.middleware.proxy_fix import ProxyFix

CONTENT_SECURITY_POLICY = "; ".join(
    (
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self'",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'self'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    )
)

HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
}


def init_app(app: Flask) -> None:
    proxies = str(app.config["PAUTA_TRUSTED_PROXIES"]).strip()
    if not proxies.isascii() or not proxies.isdigit():
        raise RuntimeError(f"PAUTA_TRUSTED_PROXIES must be a whole number, not {proxies!r}")
    if int(proxies):
        app.wsgi_app = ProxyFix(app.wsgi_app, x_for=int(proxies))  # type: ignore[method-assign]
    app.after_request(add_security_headers)


def add_security_headers(response: Response) -> Response:
    for name, value in HEADERS.items():
        response.headers.setdefault(name, value)
    if request.endpoint != "static":
        response.headers["Cache-Control"] = "no-store"
    return response
