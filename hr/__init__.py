"""The review-cycle domain: people and accounts, cycles, activation, reviews and notifications.

It works on a SQLAlchemy session (web and CLI) or a psycopg connection (the worker's task) and
knows nothing of Flask requests.
"""
