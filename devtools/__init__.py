"""Developer tooling behind `make run` and `make test`; not imported by the application."""
