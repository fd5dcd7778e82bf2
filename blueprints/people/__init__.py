"""The people pages: HR admins import their employees from a CSV file, in the background."""

from blueprints.people.routes import bp

__all__ = ["bp"]
