"""The browser code of the console and of the HR pages, bundled by Flask-Assets into
static/gen/ (not committed).

Chart.js comes from npm (``package.json`` pins it; ``npm ci`` puts it in ``node_modules/``) and
is concatenated with our own scripts into one file served from this site, so the
Content-Security-Policy can allow scripts from 'self' only. ``python -m blueprints.assets``
builds the bundles without a database; ``make run`` and ``make test`` run it after ``npm ci``.
"""

import re
import sys
from pathlib import Path
from typing import Any

from flask import Flask
from flask_assets import Bundle, Environment
from webassets.filter import Filter

ROOT = Path(__file__).resolve().parent.parent
CHART_JS = ROOT / "node_modules" / "chart.js" / "dist" / "chart.umd.js"

assets = Environment()


class StripSourceMapComment(Filter):  # type: ignore[misc]
    """Drop ``//# sourceMappingURL=...``: the map is not served, so the comment would point
    browsers' developer tools at a missing file."""

    name = "strip_source_map_comment"
    _COMMENT = re.compile(r"^//# sourceMappingURL=.*$", re.MULTILINE)

    def input(self, _in: Any, out: Any, **_: Any) -> None:
        out.write(self._COMMENT.sub("", _in.read()))


BUNDLES = {
    "console_js": Bundle(
        Bundle(str(CHART_JS), filters=(StripSourceMapComment(),)),
        "console/live.js",
        "console/charts.js",
        output="gen/console.js",
    ),
    # The HR pages' own scripts (no third-party code): select-all, self-refreshing regions.
    "hr_js": Bundle("hr/participants.js", "hr/refresh.js", output="gen/hr.js"),
    "pauta_js": Bundle("confirm.js", output="gen/pauta.js"),
    "pauta_css": Bundle("pauta.css", "console/console.css", output="gen/pauta.css"),
}


def init_app(app: Flask) -> None:
    """Register the bundles; templates include them with ``{% assets "console_js" %}``."""
    app.config.setdefault("ASSETS_CACHE", False)  # no .webassets-cache/ among the static files
    app.config.setdefault("ASSETS_MANIFEST", False)
    assets.init_app(app)
    for name, bundle in BUNDLES.items():
        if name not in assets:
            assets.register(name, bundle)


def build() -> None:
    """Write every bundle to static/gen/ (for a deploy, or before the first request)."""
    if not CHART_JS.exists():
        raise SystemExit(f"{CHART_JS} is missing: run `npm ci` first")
    app = Flask("app", root_path=str(ROOT))
    init_app(app)
    with app.app_context():
        for bundle in assets:
            bundle.build(force=True)
            print(f"built {bundle.output}", file=sys.stderr)


if __name__ == "__main__":
    build()
