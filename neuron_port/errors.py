"""Errors that are the caller's to fix (a selector that matches no rule, a path that does not exist, a bad
configuration): the CLI shows the message and exits with 2; API callers catch UsageError."""


class UsageError(ValueError):
    """Bad arguments or configuration; the message says what and where."""
