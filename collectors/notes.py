"""A one-line note a test can leave for its own outcome record (e.g. compile
statistics of a passing test).  The worker plugin clears it before each test and
uses it as the message of a passing outcome."""
from __future__ import annotations

_note: list[str] = []


def note(text: str) -> None:
    _note[:] = [str(text)]


def take() -> str:
    text = _note[0] if _note else ""
    _note.clear()
    return text


def clear() -> None:
    _note.clear()
