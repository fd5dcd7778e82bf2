"""Flask CLI groups (`flask --app app <group> ...`)."""
