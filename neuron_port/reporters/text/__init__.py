"""The text format (`--output-format text`, the default), on the console the CLI gives it.

- ``findings.py``: the reporter (``emit``): findings as ``path:line:col: CODE message``, the summary and the
  migration statistics of `rewrite`; for `check`, the check panel first
- ``check.py``: `check`'s panel, its runtime tables and failing processes, and the one line of `check -q`
- ``estimate.py``: the Estimate panel (`check`, `neuron-port estimate`)
- ``statistics.py``: `--statistics`, the counts per code (text, and the same counts as JSON)

Import nothing here: `neuron-port estimate` needs only estimate.py.
"""
