"""Settings shared by every command: where the store lives, how URLs are shown."""
import os
import re

from torchconform import settings

DEFAULT_DB = "torchconform.db"
DB_ENV = "TORCHCONFORM_DB"


def db_url(value: str | None = None) -> str:
    """The database URL in use: ``--db`` value, else ``$TORCHCONFORM_DB``, else ./torchconform.db.

    A plain path is a SQLite file; anything with ``://`` is an SQLAlchemy URL, its
    password percent-encoded where it holds '/', '?', '#' or '@' (see _PASSWORD_IN_URL).
    """
    value = value or settings.get(DB_ENV)
    if "://" in value:
        return _quote_password(value)
    return "sqlite:///" + os.path.abspath(os.path.expanduser(value))


# A URL's password is what a user means by ``user:S3cr/et?pw@host``: everything from
# the first ':' after the scheme's '//' (a user name holds no ':', '/' or '@') to the
# LAST '@' before the host, so it may hold '/', '?', '#' and '@' (SQLAlchemy's parser
# ends it at the first '@').  One URL is one whitespace-free token of a text.
_PASSWORD_IN_URL = re.compile(r"(?P<head>://[^:/?#@\s]*:)(?P<password>\S*)(?P<tail>@)")
# A password given as ``password=...``: a URL query parameter, a libpq-style
# ``key=value`` string (quoted or not) or a PGPASSWORD setting.
_PASSWORD_PARAM = re.compile(r"(?P<head>password\s*=\s*)(?P<password>'(?:[^'\\]|\\.)*'|[^\s&;'\"]+)", re.I)
# Characters that would end a URL's password early; percent-encoded by ``db_url``.
_URL_DELIMITERS = re.compile(r"[/?#@]")


def _quote_password(url: str) -> str:
    """``url`` with the '/', '?', '#' and '@' of its password percent-encoded, so that
    SQLAlchemy connects with the password the user wrote (see _PASSWORD_IN_URL)."""
    return _PASSWORD_IN_URL.sub(
        lambda m: m["head"] + _URL_DELIMITERS.sub(lambda c: f"%{ord(c[0]):02X}", m["password"]) + m["tail"],
        url, count=1)


def mask_password(text: str) -> str:
    """Replace every password in ``text`` with ``***``: inside a URL (``user:secret@host``,
    see _PASSWORD_IN_URL) and given as ``password=secret``."""
    text = _PASSWORD_IN_URL.sub(lambda m: m["head"] + "***" + m["tail"], str(text))
    return _PASSWORD_PARAM.sub(lambda m: m["head"] + "***", text)
