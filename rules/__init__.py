"""The neuron-port registry, installed as ``neuron_port.rules``: the rule spec (``spec.py``), the registry
(``registry.py``), one package per rule family (NP1xx ``device_placement`` ... NP9xx ``runtime``, see
``families.py``) with its tables, shared helpers for rules (``helpers/``), the Trainium instance catalogue
(``instances.toml``, read by ``instances.py``) and the simulator's op policy (``op_policy.toml``). Import nothing heavy here: the
simulator reads ``op_policy.toml`` from this package without loading the rules."""
