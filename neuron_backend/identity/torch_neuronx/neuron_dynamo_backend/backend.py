"""``torch_neuronx.neuron_dynamo_backend.backend:neuron_backend`` (TorchNeuron's torch_dynamo_backends entry
point): the simulator's compile backend, the one ``torch.compile(backend="neuron")`` gets."""

from neuron_backend.compile.backend import neuron_backend

__all__ = ["neuron_backend"]
