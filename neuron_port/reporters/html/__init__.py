"""The HTML report, a FILE format (``FILE_REPORTERS["html"]`` in neuron_port/reporters/): one self-contained
page rendered from the report's JSON document, so a saved report renders the same.

- ``page.py``: the page (summary, CPU fallbacks, compile timeline, shape variance, findings)
- ``estimate.py``: its Estimate section
- ``charts.py``: the charts, matplotlib (the `html` extra) drawn into inline SVG
- ``parts.py``: escaping, tables, figures and sections
- ``style.py``: the stylesheet and the content security policy

Import nothing here: `check --html` checks matplotlib with charts.py before the run, and the page is
imported only when one is written.
"""
