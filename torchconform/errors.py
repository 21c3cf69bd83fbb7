"""Errors a user can cause.

A ``UserError`` carries one line that names the cause and the fix.  The CLI
prints it as ``torchconform: error: <line>`` and exits with ``exit_code``
(2 by default: usage or input error), never with a traceback.
"""


class UserError(Exception):
    """Bad input from the user: one line, cause and fix, non-zero exit."""

    exit_code = 2

    def __init__(self, message: str, exit_code: int | None = None):
        # Keep it to one line whatever the caller passed.
        super().__init__(" ".join(str(message).split()))
        if exit_code is not None:
            self.exit_code = exit_code
