"""Web blueprints: thin views that parse input, call the domain or engine, and render."""
