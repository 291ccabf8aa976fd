"""One aggregator per event kind: each takes typed events with the rank of the process that wrote them,
merges them over processes per (kind, site), and yields its typed entries of the report's ``runtime``
section and its NP9xx findings. ``neuron_port/check/runtime.py`` feeds them."""
