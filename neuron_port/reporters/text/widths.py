"""Widths shared by the text reporters (one module so findings.py and estimate.py need not import each other)."""

PIPE_WIDTH = 1000  # columns of the runtime tables when stdout is not a terminal: lines as wide as they need
