"""The console's live data as JSON: figures per queue (and in total) and the graphs' series.

The pages render the same figures on the server first; their script fetches these every few
seconds and writes the new values in place. Both endpoints take ``tenant`` (a slug; platform
admins only, HR admins always get their own tenant) and ``queue`` (one queue, or all).
"""

from blueprints.metrics.routes import bp

__all__ = ["bp"]
