"""Settings shared by every command: where the store lives, how URLs are shown."""
import os
import re

DEFAULT_DB = "torchconform.db"
DB_ENV = "TORCHCONFORM_DB"


def db_url(value: str | None = None) -> str:
    """The database URL in use: ``--db`` value, else ``$TORCHCONFORM_DB``, else ./torchconform.db.

    A plain path is a SQLite file; anything with ``://`` is an SQLAlchemy URL.
    """
    value = value or os.environ.get(DB_ENV) or DEFAULT_DB
    if "://" in value:
        return value
    return "sqlite:///" + os.path.abspath(os.path.expanduser(value))


_PASSWORD_IN_URL = re.compile(r"(?P<head>://[^:/?#@]*:)(?P<password>[^@/?#]*)(?P<tail>@)")


def mask_password(text: str) -> str:
    """Replace any password inside a URL (``user:secret@host``) with ``***``."""
    return _PASSWORD_IN_URL.sub(lambda m: m.group("head") + "***" + m.group("tail"), str(text))
