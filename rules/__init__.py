"""The neuron-port registry: rules (one class each, NP1xx-NP9xx), CUDA->neuron mapping tables and the
simulator's op policy. Installed as ``neuron_port.rules``. Import nothing heavy here: the simulator reads
``op_policy.toml`` from this package without loading the rules."""
