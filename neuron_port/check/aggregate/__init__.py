"""The runtime aggregators: each takes typed events with the rank of the process that wrote them, merges
them over processes per (kind, site), and yields its typed entries of the report's ``runtime`` section
and its NP9xx findings. Each declares the event kinds it takes and the section keys it fills
(``base.Aggregator``); ``neuron_port/check/runtime.py`` feeds them from its one list, ``AGGREGATORS``."""
