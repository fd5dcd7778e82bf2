"""How a review is named to the person who writes it: the same words on the page and in the
e-mail. "Goran García (manager)" read as if Goran were the reader's manager; the relation is
said from the reader's side instead."""

RELATIONS = {"manager": "your direct report", "peer": "your colleague"}


def review_label(kind: str, reviewee_name: str) -> str:
    """``Yourself (self-review)``, ``Goran García (your direct report)``, ``Ana Berg (your
    colleague)``."""
    if kind == "self":
        return "Yourself (self-review)"
    return f"{reviewee_name} ({RELATIONS[kind]})"
