"""Counts with their noun for messages and captions: ``plural(1, 'box')`` -> ``"1 box"``, ``plural(2, 'box')`` ->
``"2 boxes"``. One helper for the runtime and ``oars`` (the runtime core is what both import), so that no message
says "1 boxes" or "1 images"; the caller passes the noun, so the core names no kind of output."""

from __future__ import annotations

__all__ = ["plural", "plural_noun"]

_VOWELS = set("aeiou")


def plural_noun(noun: str) -> str:
    """The English plural of a regular ``noun``: ``box`` -> ``boxes``, ``class`` -> ``classes``, ``category`` ->
    ``categories``, ``image`` -> ``images`` (irregular ones are passed to :func:`plural` by the caller)."""
    if noun.endswith(("s", "x", "z", "ch", "sh")):
        return noun + "es"
    if len(noun) > 1 and noun.endswith("y") and noun[-2].lower() not in _VOWELS:
        return noun[:-1] + "ies"
    return noun + "s"


def plural(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and ``noun`` in the number ``n`` asks for: ``"1 box"``, ``"0 boxes"``, ``"2 boxes"``.

    Args:
        n: the count (ints; a float count such as 1.0 reads as its value).
        noun: the singular noun.
        plural: the plural when it is not regular (``plural(2, 'child', 'children')``).

    Returns:
        The text ``f"{n} {noun or its plural}"``.
    """
    return f"{n} {noun if n == 1 else (plural or plural_noun(noun))}"
