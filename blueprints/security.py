"""Headers every response carries: a Content-Security-Policy that lets the browser run only
scripts served from this site (no inline script, no CDN), and the usual hardening.

Styles are 'self' too: no template has a ``style`` attribute or ``<style>`` element. Chart.js
sizes its canvases through ``element.style`` (the CSSOM), which the policy allows.

Every response but a static file is ``Cache-Control: no-store``: review comments, job payloads
and console figures must not stay in the browser's cache (or a proxy's) after logging out.
"""

from flask import Flask, Response, request

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
    app.after_request(add_security_headers)


def add_security_headers(response: Response) -> Response:
    for name, value in HEADERS.items():
        response.headers.setdefault(name, value)
    if request.endpoint != "static":
        response.headers["Cache-Control"] = "no-store"
    return response
