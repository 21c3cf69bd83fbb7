"""The options many commands share (``--db``, ``--build``, ``--device``, ``--json``), declared
once here so that each reads the same in every ``--help``.

Each ``add_*`` takes a parser (or an argument group) and declares one option with its
``dest`` named like the flag.  What differs between commands is a parameter: whether
``--build`` is required, and the default of ``--device`` or ``--build`` where a command
reads an empty value as "any" (``drift``, ``sweep``).  A help text may say what the option
means to that command; the default wording is used wherever it fits.
"""
from __future__ import annotations

DB_HELP = "results store: SQLite path or SQLAlchemy URL (default $TORCHCONFORM_DB or ./torchconform.db)"
BUILD_HELP = "build name (see `torchconform builds`)"
DEVICE_HELP = "device under test (refdev, cuda, cpu, a PrivateUse1 name)"
JSON_HELP = "print JSON"


def add_db(parser) -> None:
    """``--db``: the results store; None when not given (torchconform/config.py ``db_url`` resolves it)."""
    parser.add_argument("--db", default=None, help=DB_HELP)


def add_build(parser, *, required: bool = True, default=None, help: str = BUILD_HELP, metavar=None) -> None:
    """``--build``: the build a command reads or writes (``required`` unless the command names one itself)."""
    if required:
        parser.add_argument("--build", required=True, metavar=metavar, help=help)
    else:
        parser.add_argument("--build", default=default, metavar=metavar, help=help)


def add_device(parser, *, default=None, help: str = DEVICE_HELP) -> None:
    """``--device``: the device under test (or, where a command filters by it, the device to keep)."""
    parser.add_argument("--device", default=default, help=help)


def add_json(parser, help: str = JSON_HELP) -> None:
    """``--json``: print the command's result as JSON on stdout instead of text."""
    parser.add_argument("--json", action="store_true", help=help)
