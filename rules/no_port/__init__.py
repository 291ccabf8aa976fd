"""NP7xx: CUDA-only code with no automatic port.

Codes (stable), and the module that holds each rule:

- NP701 ``triton-kernel`` (``triton``): Triton kernels (``@triton.jit``) and ``triton`` imports and uses.
- NP702 ``flash-attn`` (``attention``): the ``flash_attn`` package.
- NP703 ``xformers`` (``attention``): the ``xformers`` package.
- NP704 ``apex`` (``nvidia_libraries``): NVIDIA apex (``apex.amp``, ``FusedAdam``, ``FusedLayerNorm``, apex DDP).
- NP705 ``transformer-engine`` (``nvidia_libraries``): NVIDIA TransformerEngine.
- NP706 ``deepspeed`` (``training_libraries``): DeepSpeed (also ``TrainingArguments(deepspeed=...)``,
  ``DeepSpeedPlugin``).
- NP707 ``bitsandbytes`` (``training_libraries``): the ``bitsandbytes`` package (HF arguments that use it
  are NP605).
- NP708 ``cuda-extension`` (``extensions``): ``torch.utils.cpp_extension`` ``load`` / ``load_inline`` /
  ``CUDAExtension``.
- NP709 ``cuda-source-file`` (``extensions``): ``.cu`` / ``.cuh`` sources named in Python (and, by the tree
  discovery, ``.cu`` files themselves).
- NP710 ``nvtx-package`` (``nvidia_tools``): the ``nvtx`` package (``torch.cuda.nvtx`` is NP202).
- NP711 ``gpu-monitoring`` (``nvidia_tools``): ``nvidia-smi`` subprocesses, pynvml / GPUtil / gpustat / nvitop.
- NP712 ``profiler-activity-cuda`` (``nvidia_tools``): ``ProfilerActivity.CUDA`` ->
  ``ProfilerActivity.PrivateUse1``.
- NP713 ``cuda-only-custom-op`` (``custom_ops``): custom operators registered only for the CUDA dispatch key
  or device type (``torch.library.impl``, ``Library.impl``, ``register_kernel``, ``custom_op(device_types=)``).
- NP714 ``cuda-array-library`` (``raw_cuda``): CuPy, PyCUDA and cuda-python (``cuda.bindings``, ``cuda.core``).
- NP715 ``numba-cuda`` (``raw_cuda``): numba's CUDA target (``from numba import cuda``, ``@cuda.jit``).
- NP716 ``torch-private-cuda`` (``raw_cuda``): ``torch.cuda._compile_kernel`` (NVRTC) and the ``torch._C._cuda*``
  bindings.
- NP717 ``cuda-only-module`` (``cuda_only_modules``): a module importing a GPU kernel language or library at top
  level (no fallback), or a function decorated as a kernel by one: reported once, with its count of CUDA
  references, and kept unedited (``helpers/kept_scopes.py``; the engine folds the findings inside into it).
  NP701 (Triton kernels) and NP713 (custom ops whose body launches a kernel) keep their scopes the same way.
  A call into a package with no Trainium build (Isaac Gym, DALI, RAPIDS: ``tables.CUDA_ONLY_PACKAGES``) keeps
  the device arguments that mention CUDA, reported once; the module's own code is ported.
- NP718 ``cuda-extension-import`` (``extension_imports``): imports of compiled CUDA extension modules
  (``*_cuda``, ``*_cuda_*``, ``cuda_*``, known ones such as ``amp_C`` and mmcv's ``_ext``, a name ``load`` builds
  from ``.cu`` sources), with the torch alternative; the code that uses one is kept like NP717's kernel code.
- NP720 ``cuda-only-branch`` (``cuda_only_branches``): ``x.is_cuda`` / ``device.type == "cuda"`` tests that guard
  Triton, CUDA extensions, flash-attn, xformers or CUDA graphs (kept as they are, and so is the code they
  guard; NP102 and NP104 ask the analysis, ``cuda_only_guards``, and leave them alone). Its code leaves
  NP719 free for package rules.
- NP799 ``invalid-suppression`` (``suppressions``): a malformed ``# neuron-port: ignore`` comment, or a code
  in one that names no rule (no family is about neuron-port's own comments; this one has no fix either).

Shared by the package rules: ``common`` (``GuardedRule``, ``PackageRule``, the one-lower severity of
guarded code); their data: ``tables`` (per-package advice and efforts, call and pattern tables).

Each package is reported once per import statement and once per use (the outermost dotted reference;
inside a Triton kernel only the kernel itself is reported), with an effort level and the Neuron route.
Imports and uses inside the body of a ``try:`` whose handler catches ``ImportError`` (or a broader
exception), or of an ``if`` that tests availability (``if is_flash_attn_2_available():``,
``if importlib.util.find_spec("triton"):``, ``if HAS_TRITON:``, ``if flash_attn is not None:``), are
reported one severity lower: the program has a fallback, which still has to be checked. CUDA graphs
are NP409. Facts: https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/torchneuron-resources.html, https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/frameworks/torch/pytorch-native-overview.rst.
"""
