"""Meta kernels for the simulator's own PrivateUse1 ops that PyTorch gives none: without one,
FakeTensorMode learns an output's shape by running the real kernel on zero-filled device tensors (at
the model's full size, with real allocations). ``convolution_overrideable`` and its backward are
``convolution`` and ``convolution_backward`` with the bias sizes implied by the weight; registered
for shape-only runs only.
"""

from __future__ import annotations

import torch

_library = None


def _convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    return torch.ops.aten.convolution.default(input, weight, bias, stride, padding, dilation, transposed,
                                              output_padding, groups)


def _convolution_backward(grad_output, input, weight, stride, padding, dilation, transposed, output_padding, groups,
                          output_mask):
    bias_sizes = [weight.shape[1] * groups if transposed else weight.shape[0]]
    return torch.ops.aten.convolution_backward.default(grad_output, input, weight, bias_sizes, stride, padding,
                                                       dilation, transposed, output_padding, groups, output_mask)


def register() -> None:
    global _library
    if _library is not None:
        return
    _library = torch.library.Library("aten", "IMPL")
    _library.impl("convolution_overrideable", _convolution, "Meta")
    _library.impl("convolution_backward_overrideable", _convolution_backward, "Meta")
