"""NP805: forward-mode automatic differentiation (``torch.autograd.forward_ad``, ``torch.func.jvp`` /
``jacfwd`` / ``linearize`` / ``hessian``).
"""

from __future__ import annotations

from neuron_port.rules.precision_features.common import ReferenceRule
from neuron_port.rules.spec import Invalid, RunPremise, Valid


FORWARD_AD_MESSAGE = (
    "`{name}`: forward-mode AD is not documented for TorchNeuron: use reverse mode (`torch.func.vjp`) or "
    "the CPU"
)


class ForwardModeAD(ReferenceRule):
    """Reports forward-mode automatic differentiation.

    ## What it does
    Reports ``torch.autograd.forward_ad`` (``dual_level``, ``make_dual``, ``unpack_dual``),
    ``torch.func.jvp`` / ``jacfwd`` / ``linearize`` / ``hessian`` (forward-over-reverse) and the same
    names from ``functorch``.

    ## Why is this bad?
    Forward-mode AD needs forward derivatives of every op; TorchNeuron's support for it is **not
    confirmed** by any readable source, while reverse mode is what training uses and is supported.

    ## Example
    ```python
    out, tangent = torch.func.jvp(f, (x,), (v,))
    ```
    Use instead (reverse mode, twice the cost of a backward pass):
    ```python
    out, tangent = torch.autograd.functional.jvp(f, (x,), (v,))
    ```

    ## Fix safety
    No automatic fix: the alternatives differ in cost and in ``create_graph`` handling.

    ## References
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/compile/reference-torch-compile.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/api/index.html, https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/frameworks/torch/pytorch-native-overview.rst ("Forward-mode AD ... NOT confirmed")
    """

    CODE = "NP805"
    RUN_PREMISE = RunPremise("forward-mode AD never ran on the device", features=("forward_ad",))
    NAME = "forward-mode-ad"
    SEVERITY = "error"
    EFFORT = "medium"
    MESSAGE = FORWARD_AD_MESSAGE.format(name="forward-mode AD")
    TRIGGERS = ("forward_ad", "jvp", "jacfwd", "linearize", "hessian")
    TABLE = {
        name: (FORWARD_AD_MESSAGE, "medium")
        for name in ("torch.autograd.forward_ad", "torch.func.jvp", "torch.func.jacfwd", "torch.func.linearize",
                     "torch.func.hessian", "functorch.jvp", "functorch.jacfwd", "functorch.hessian")
    }

    VALID = [
        Valid("import torch\ng = torch.func.grad(f)(x)\nj = torch.func.jacrev(f)(x)\n"),
        Valid("import torch\nout, t = torch.autograd.functional.jvp(f, (x,), (v,))\n"),
    ]
    INVALID = [
        Invalid("import torch.autograd.forward_ad as fwAD\nwith fwAD.dual_level():\n    d = fwAD.make_dual(x, t)\n",
                None),
        Invalid("from torch.func import jvp, jacfwd\nout, t = jvp(f, (x,), (v,))\nJ = jacfwd(f)(x)\n", None),
    ]
