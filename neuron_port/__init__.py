"""neuron-port: move PyTorch projects from CUDA to AWS Trainium (TorchNeuron)."""

__version__ = "0.1.0"
