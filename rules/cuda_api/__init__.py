"""NP2xx: the ``torch.cuda`` API.

Codes (stable), and the module that holds each:

- NP201 ``cuda-api-call`` (``api_calls.py``): ``torch.cuda.<api>`` with a ``torch.neuron`` (or
  ``torch.accelerator``) equivalent, renamed.
- NP202 ``cuda-api-no-equivalent`` (``no_equivalent.py``): CUDA-only APIs with no Trainium equivalent,
  reported with advice.

Both rules are driven by the tables in ``tables.py``; the classes only find the references, through the
shared ``TorchCudaReference`` (``references.py``, a ``QualifiedNameRule``).
"""
