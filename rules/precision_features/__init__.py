"""NP8xx: precision and features that TorchNeuron does not support (or only partly), seen statically.

Codes (stable), and the module that holds each rule:

- NP801 ``float64`` (``dtypes``): ``torch.float64`` / ``torch.double`` / ``.double()`` /
  ``set_default_dtype(float64)``.
- NP802 ``complex-dtype`` (``dtypes``): complex dtypes, ``view_as_complex`` / ``view_as_real`` / ``polar``,
  ``torch.fft``.
- NP803 ``sparse-tensor`` (``tensor_layouts``): sparse layouts, ``to_sparse()``, ``torch.sparse.*``,
  ``Embedding(sparse=True)``.
- NP804 ``nested-tensor`` (``tensor_layouts``): ``torch.nested.*``, ``layout=torch.jagged``.
- NP805 ``forward-mode-ad`` (``forward_ad``): ``torch.autograd.forward_ad``, ``torch.func.jvp`` / ``jacfwd`` /
  ``hessian``.
- NP806 ``interpolate-mode`` (``interpolation``): ``F.interpolate`` / ``nn.Upsample`` with bilinear, bicubic or
  trilinear mode.
- NP807 ``mha-attn-mask`` (``attention``): ``nn.MultiheadAttention`` instances called with an ``attn_mask``.
- NP808 ``channels-last`` (``memory_format``): ``memory_format=torch.channels_last`` (Neuron tensors are
  contiguous only).
- NP809 ``float8`` (``dtypes``): float8 dtypes, ``torch._scaled_mm``, ``torchao.float8``.
- NP810 ``flex-attention`` (``attention``): ``torch.nn.attention.flex_attention``.
- NP811 ``compiled-dynamic-shape`` (``dynamic_shapes``): ``nonzero`` / boolean-mask indexing /
  ``masked_select`` / ``unique`` inside code compiled with ``torch.compile``.

Shared: ``common`` (``ReferenceRule``, the base of the rules that report a qualified name found in their
table).

All are reported (only NP808 has an unsafe fix); they run on both targets, since the code is about
what the Trainium device supports, not about how it is named. Facts: https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/frameworks/torch/pytorch-native-overview.rst, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/guidelines-memory-management.html, https://github.com/parmoham-aws/test-repo-parmoham/blob/98154b86/torch_neuronx/utils.py (dtypes), https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/compile/reference-torch-compile.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/api/index.html (unsupported features), https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/compile/reference-torch-compile.html, https://docs.pytorch.org/docs/2.13/generated/torch.compile.html (static shapes).
"""
