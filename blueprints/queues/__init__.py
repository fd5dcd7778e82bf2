from blueprints.queues.routes import bp

__all__ = ["bp"]
