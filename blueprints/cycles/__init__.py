"""Review cycle pages: HR prepares, activates and follows cycles; employees write their reviews."""

from blueprints.cycles.routes import bp

__all__ = ["bp"]
