"""Names and text from anywhere (build names, test messages) made harmless where
they leave the program: as file names, and as CSV cells a spreadsheet opens."""
from __future__ import annotations

import hashlib
import re

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_MAX = 80


def safe_file_name(name: str) -> str:
    """``name`` as one file name that stays in its folder, the same for the same name.

    A name of letters, digits and ``._-`` (not starting or ending with ``.`` or
    ``-``, at most 80 characters) is its own file name.  Any other name keeps those
    characters, each run of the others becomes ``-``, and ``-`` plus 8 hex digits
    of the name's SHA-1 are added, so ``a/b`` and ``a-b`` do not share a file and
    ``../x`` or ``/tmp/x`` never leaves the folder: ``x-<hash>``.
    """
    base = _UNSAFE.sub("-", name).strip("-.")[:_MAX]
    if base and base == name:
        return name
    digest = hashlib.sha1(name.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{base}-{digest}" if base else digest


# A spreadsheet runs a cell that starts with one of these as a formula
# (=HYPERLINK(...) in a test's message); such cells get a leading apostrophe.
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value):
    """``value`` for a CSV cell: a string that starts like a formula is written as text."""
    if isinstance(value, str) and value.startswith(FORMULA_START):
        return "'" + value
    return value
