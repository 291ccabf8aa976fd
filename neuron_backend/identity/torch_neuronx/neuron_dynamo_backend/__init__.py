"""TorchNeuron's Dynamo backend package: ``backend.neuron_backend`` is torch.compile(backend="neuron")."""
