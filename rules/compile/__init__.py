"""NP4xx: ``torch.compile`` and CUDA-only backend flags.

- NP401-NP405 look at ``torch.compile(...)`` calls and decorators: the backend (added or renamed to
  ``"neuron"``), ``mode=`` (ignored by the neuron backend), ``dynamic=True`` and dynamic-shape settings
  (rejected), Inductor ``options=`` (ignored).
- NP406-NP408 report settings that have no effect on Trainium: ``torch._inductor.config`` tweaks, cuDNN
  / TF32 / cuBLAS flags and ``torch.set_float32_matmul_precision`` (and reads of the flags), SDPA
  kernel-selection contexts. The fix for a setting statement is to remove it (unsafe: it changes what
  the program does on a GPU); a read is reported only.
- NP409 reports CUDA graphs, which have no Trainium equivalent (also the private helpers such as
  ``torch.cuda._graph_annotations``).

Codes (stable) and the module that holds each:

- NP401 ``compile-missing-backend`` and NP402 ``compile-cuda-backend``: ``compile_backend.py``.
- NP403 ``compile-mode`` and NP405 ``compile-inductor-options``: ``compile_mode_options.py``.
- NP404 ``compile-dynamic-shapes``: ``dynamic_shapes.py``.
- NP406 ``inductor-config``: ``inductor_config.py``.
- NP407 ``cuda-backend-flag`` and NP408 ``sdpa-kernel-context``: ``backend_flags.py``.
- NP409 ``cuda-graphs``: ``cuda_graphs.py``.

``common.py`` holds the two bases they share: ``CompileCallRule`` (visits ``torch.compile`` calls) and
``StatementRule`` (reports a setting statement and offers to remove it). The names and advice are data
in ``tables.py`` (``COMPILE_FUNCS`` is also read by NP8xx); facts in https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/compile/about-torch-compile.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/compile/reference-torch-compile.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/compile/how-to-optimize-with-torch-compile.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/torchneuron-resources.html, https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/frameworks/torch/pytorch-native-overview.rst.
"""
