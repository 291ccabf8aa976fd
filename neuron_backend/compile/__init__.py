"""``torch.compile(backend="neuron")`` on the simulated device, by concern:

* ``backend.py``: the Dynamo backend and its registration (Dynamo -> AOTAutograd -> lowering check ->
  NEFF cache -> the ATen graphs run with the core's per-op accounting paused);
* ``lowering.py``: the lowering check of a graph against the op policy;
* ``rng_wrappers.py``: the lowering of activation checkpointing's RNG wrappers for neuron tensors;
* ``describe.py``: what is being compiled (function, compile id and recompile reasons, inputs);
* ``graph_work.py``: the ATen ops of each compiled graph and its runs, for the cost model;
* ``neff_cache.py``: the simulated on-disk NEFF cache.

Importing this package imports nothing else: the ``torch_dynamo_backends`` entry point
(``neuron = neuron_backend.compile.backend:neuron_backend``) loads only what it names.
"""
