"""Domain errors and the exit codes they map to (docs/cli.md lists them).

Every error the core raises on bad input is a ``CwctlError``: the shells print its
message as one line on stderr and exit with its ``exit_code``. Anything else that
escapes is a bug.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_USAGE = 2  # bad input or usage: a broken inventory, a bad flag, a malformed file
EXIT_PROBLEMS = 3  # ran, but found problems: unreachable hosts, suspects


class CwctlError(Exception):
    """An error the operator can act on; ``str(err)`` is one line naming the culprit."""

    exit_code: int = EXIT_USAGE

    def __init__(self, message: str, *, exit_code: int | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class InputError(CwctlError):
    """Bad input: a file, a flag value, a record that cannot be used."""


class RecordError(InputError):
    """A malformed probe record or record file; the message names the line."""
