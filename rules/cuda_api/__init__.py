"""NP2xx: the ``torch.cuda`` API.

Codes (stable), and the module that holds each:

- NP201 ``cuda-api-call`` (``api_calls.py``): ``torch.cuda.<api>`` with a ``torch.neuron`` (or
  ``torch.accelerator``) equivalent, renamed (``api_renames.py``: the spelling on each target, a rank
  device argument set to 0), except the references it keeps and says why (``kept_references.py``).
- NP202 ``cuda-api-no-equivalent`` (``no_equivalent.py``): CUDA-only APIs with no Trainium equivalent,
  reported with advice.
- NP210 ``cuda-capability-check`` (``capability.py``): compute-capability comparisons rewritten to what they
  mean on Trainium (``torch.neuron.is_bf16_supported()``, ``False`` for flash-attn / TF32 / FP8), where the code
  says; its ``capability_checks`` also tells NP201 which capability reads and guards to keep. (NP210, not
  NP203: NP203-NP209 stay free for table-driven NP2xx rules.)

Both rules are driven by the tables in ``tables.py``; the classes only find the references, through the
shared ``TorchCudaReference`` (``references.py``, a ``QualifiedNameRule``).
"""
