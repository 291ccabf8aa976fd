"""The error of the rewrite engines, in a module of its own so the runner can catch it without importing
the engines (and LibCST) for files the pre-filter skips."""

from __future__ import annotations


class RewriteError(Exception):
    """A file the engine cannot handle; the message names the line where it can."""
