"""NP3xx: mixed precision (autocast, GradScaler, custom_fwd/custom_bwd).

The rules find the CUDA spellings of automatic mixed precision and move them to the ``neuron`` device
type (or, with ``--target accelerator``, to the device type of ``torch.accelerator``):

- ``torch.cuda.amp.autocast(...)`` (also reached as ``from torch.cuda import amp`` / ``from torch.cuda.amp
  import autocast``) and ``torch.autocast("cuda")`` / ``torch.amp.autocast(device_type="cuda")``;
- ``torch.cuda.amp.GradScaler(...)`` and ``torch.amp.GradScaler("cuda")`` / ``GradScaler()``;
- ``torch.cuda.amp.custom_fwd`` / ``custom_bwd`` decorators;
- the ``torch.cuda.amp`` imports those rewrites leave behind.

Codes (stable) and the module that holds each:

- NP301 ``cuda-autocast``: ``autocast.py``.
- NP302 ``autocast-without-dtype``: ``autocast_dtype.py``.
- NP303 ``cuda-grad-scaler`` and NP304 ``grad-scaler-with-bf16``: ``grad_scaler.py``.
- NP305 ``cuda-custom-fwd-bwd``: ``custom_fwd_bwd.py``.
- NP306 ``cuda-amp-import``: ``amp_imports.py`` (with ``import_groups.py``, the import edits it makes,
  ``amp_import_decisions.py``, what becomes of each imported name, and ``amp_import_messages.py``, what
  its findings say): ``torch.cuda.amp`` imports left behind once NP301/NP303/NP305 ported their uses
  (removed, or pointed at ``torch.amp``, version-guarded ``try``/``if`` imports kept valid).

``common.py`` holds what several of them share: the qualified names of autocast and GradScaler, the
port of ``torch.cuda.amp.autocast(...)`` to ``torch.autocast(...)`` and the device type (and fix safety)
of the ported code on each target.

Facts behind them: https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/frameworks/torch/pytorch-native-overview.rst, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/guidelines-memory-management.html, https://github.com/parmoham-aws/test-repo-parmoham/blob/98154b86/torch_neuronx/utils.py (autocast follows the CUDA op lists; the default
autocast dtype of TorchNeuron is not documented; bf16 is the recommended precision) and https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/torchneuron-resources.html.
"""
