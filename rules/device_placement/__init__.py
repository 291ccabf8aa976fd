"""NP1xx: device placement (CUDA device strings, ``.cuda()``, ``is_cuda``, legacy tensor types, map_location).

Codes (stable), and the module that holds each:

- NP101 ``cuda-device-string`` (``device_strings.py``): ``'cuda'`` / ``'cuda:N'`` literals and templates used
  as device values.
- NP102 ``cuda-device-check`` (``device_checks.py``): the same strings in comparisons (``device.type == 'cuda'``,
  ``'cuda' in d``).
- NP103 ``cuda-method-call`` (``method_calls.py``): ``x.cuda()`` / ``x.cuda(i)`` / ``x.cuda(non_blocking=True)``.
- NP104 ``is-cuda-attribute`` (``is_cuda.py``): ``x.is_cuda``.
- NP105 ``legacy-cuda-tensor-type`` (``legacy_tensor_types.py``): ``torch.cuda.FloatTensor`` and friends.
- NP106 ``map-location-cuda`` (``map_location.py``): ``torch.load(..., map_location=lambda storage, loc:
  storage.cuda())``.
- NP107 ``rank-device-index``: retired (not reused). It rewrote rank devices to the process's index 0, the
  old model of one visible core per process; TorchNeuron's core is ``neuron:<LOCAL_RANK>``, so a rank index is
  renamed like any other (NP101, NP103, NP106, NP201) or left as it is (``.to(local_rank)``).

NP101 and NP102 share one classification of where a string sits (``DeviceStringRule`` in
``string_roles.py``), so every literal belongs to exactly one of them, and neither touches strings that
are not devices: docstrings, prose, ``getattr(torch, 'cuda')``, log messages, or strings other families own
(autocast ``device_type``, Hugging Face ``device_map``, Lightning ``accelerator``, ``init_device_mesh`` which
is NP504).

Shared by several modules: ``common.py`` (argument commas, the ``storage.cuda()`` lambda of NP103 and
NP106) and ``tables.py`` (the data).
"""
