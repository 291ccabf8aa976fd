"""PLACEHOLDER for the ``torch.compile(backend="neuron")`` backend.

A colleague replaces this module (recompile recording, static shapes, fallback policy). Until then
the ``torch_dynamo_backends`` entry point in pyproject.toml resolves to this function, which runs
the captured graph eagerly on the simulated device.
"""


def neuron_backend(gm, example_inputs):
    """Placeholder Dynamo backend: run the FX graph as is."""
    return gm.forward
