"""NP720 ``cuda-only-branch``: ``x.is_cuda`` / ``device.type == "cuda"`` tests that guard CUDA-only code
(Triton kernels, CUDA extensions, flash-attn, xformers, CUDA graphs, ``torch.cuda`` APIs with no Trainium
equivalent); NP102 and NP104 leave those tests alone (the analysis: ``cuda_only_guards.py``), and NP201 the
``torch.cuda.is_available()`` tests that guard such code, so Trainium keeps taking the other branch."""

from __future__ import annotations

import libcst as cst

from neuron_port.rules.helpers.kept_scopes import keep_scope
from neuron_port.rules.helpers.names import source_of
from neuron_port.rules.no_port.cuda_only_guards import (
    QUALIFIED_SEEN,
    cuda_only_guards,
    is_cuda_availability_test,
    qualified_cuda_only,
)
from neuron_port.rules.spec import Invalid, PythonRule, Valid


class CudaOnlyBranch(PythonRule):
    """Reports ``x.is_cuda`` / ``device.type == "cuda"`` tests that guard CUDA-only code, and keeps them.

    ## What it does
    Finds device tests (``x.is_cuda``, ``x.device.type == "cuda"``, ``"cuda" in str(x.device)``,
    ``str(x.device).startswith("cuda")``, their negations and ``and`` / ``or`` chains of them) whose guarded
    code calls something that runs on CUDA only: a Triton kernel (``@triton.jit``, ``kernel[grid](...)``), a
    CUDA extension (``torch.utils.cpp_extension.load``, a module imported as ``*_cuda`` / ``cuda_*``, also
    package-relative: ``from .ops import median_filter_cuda``; the import itself counts),
    flash-attn, xformers, a CUDA graph, or a ``torch.cuda`` API that has no Trainium equivalent (NP202's
    table: ``mem_get_info``, ``nvtx``, ``get_device_capability``, ``set_per_process_memory_fraction``...),
    directly or through a function of the same file that does. The guarded code is the ``if``
    body, the ``else`` of a negated test, the right side of ``and``, or the rest of the block after
    ``if not x.is_cuda: return fallback(x)``. NP102 and NP104, which otherwise turn these tests into
    ``'neuron'`` / ``is_neuron``, leave them alone; NP201 likewise keeps (and reports) a
    ``torch.cuda.is_available()`` test that guards such code. The code a kept test guards is CUDA's and
    is not edited (a ``.cuda()`` there stays): its findings fold into the test's one finding (NP720's, or
    NP201's for a kept ``is_available()``). This list is the fast path: a test deciding
    code that is on neither list nor the allow list of portable code is not kept but an unsafe fix of
    NP102 / NP104 / NP201 (``rules/helpers/portable.py``).

    ## Why is this bad?
    Rewritten to ``x.is_neuron``, the test would send neuron tensors into the CUDA-only path: a Triton
    launch, a CUDA extension or a flash-attn call fails there (or, with its import guarded, calls
    ``None``). Left as it is, the test is False on Trainium and the torch fallback runs, which works but
    is the unfused path: the kernel has to be ported to run fast.

    ## Example
    ```python
    def fused_add(x, y):
        if x.is_cuda and HAS_TRITON:
            return triton_add(x, y)  # launches a @triton.jit kernel
        return x + y
    ```
    Use instead: keep the test (Trainium takes ``x + y``), or port the kernel to NKI and branch on
    ``x.is_neuron``:
    ```python
    def fused_add(x, y):
        if x.is_neuron:
            return nki_add(x, y)  # registered with @torch_neuronx.nki_op
        return x + y
    ```

    ## Fix safety
    No fix: the test is kept on purpose. Porting the guarded code is the work (see NP701-NP703, NP708,
    NP409 for each kind).

    ## References
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/torchneuron-resources.html, https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/frameworks/torch/pytorch-native-overview.rst (Triton, flash-attention, xformers, CUDA extensions -> SDPA or NKI
      kernels registered as PyTorch ops; CUDA graphs have no equivalent)
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/index.html
    """

    CODE = "NP720"
    NAME = "cuda-only-branch"
    SEVERITY = "warning"
    EFFORT = "medium"
    MESSAGE = "`{test}` guards {what} (`{call}`): kept, so Trainium runs the other path"
    TARGETS = ("neuron", "accelerator")
    TRIGGERS = ("is_cuda", "'cuda'", '"cuda"')

    VALID = [
        Valid("if x.is_cuda:\n    x = x.pin_memory()\n"),
        Valid("import triton\nif x.is_neuron:\n    y = nki_add(x)\n"),
        Valid("if device.type == 'cuda':\n    torch.cuda.synchronize()\n"),
    ]
    INVALID = [
        Invalid(
            "import triton\n\n@triton.jit\ndef add_kernel(x_ptr, n):\n    pass\n\n\ndef triton_add(x):\n"
            "    add_kernel[(1,)](x, x.numel())\n    return x\n\n\ndef add(x):\n"
            "    if x.is_cuda and HAS_TRITON:\n        return triton_add(x)\n    return x + 1\n",
            None,
            message_contains="a Triton kernel (`triton_add`)",
        ),
        Invalid(
            "try:\n    from flash_attn import flash_attn_func\nexcept ImportError:\n    flash_attn_func = None\n\n\n"
            "def attend(q, k, v):\n    if q.device.type != 'cuda' or flash_attn_func is None:\n"
            "        return sdpa(q, k, v)\n    return flash_attn_func(q, k, v)\n",
            None,
            message_contains="flash-attn",
        ),
        Invalid(
            "import torch\nif str(x.device).startswith('cuda'):\n    free, total = torch.cuda.mem_get_info()\n",
            None,
            message_contains="a CUDA API with no Trainium equivalent (`torch.cuda.mem_get_info`)",
        ),
        Invalid(
            # a package-relative import of a CUDA extension is kept as the absolute form is
            "def median_filter(x, k):\n    if x.is_cuda:\n        from .triton_ops import median_filter_cuda\n"
            "        return median_filter_cuda(x, k)\n    return x.unfold(-1, k, 1).median(-1).values\n",
            None,
            message_contains="a CUDA extension (`from .triton_ops import median_filter_cuda`)",
        ),
    ]

    def __init__(self, context) -> None:
        super().__init__(context)
        self._seen = QUALIFIED_SEEN.setdefault(context, [False])

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if not self._seen[0] and qualified_cuda_only(self.context, node):
            self._seen[0] = True

    def leave_Module(self, original_node: cst.Module) -> None:
        guards = cuda_only_guards(self.context, original_node)
        for atom, (call, what, effort) in guards.guards.items():
            # the code a kept test guards runs on CUDA only: nothing in it is edited (a `.cuda()` there stays
            # CUDA's), its findings fold into the test's one finding (rewrite/scope_folding.py)
            if is_cuda_availability_test(atom) or isinstance(atom, cst.Name):
                # availability tests (and names holding one): NP201 reports the ones it keeps
                for reference in guards.availability_references(atom):
                    keep_scope(self.context, "NP201", reference, tuple(guards.guarded[atom]))
                continue
            self.report(atom, self.MESSAGE.format(test=source_of(atom), what=what, call=call), effort=effort)
            keep_scope(self.context, self.CODE, atom, tuple(guards.guarded[atom]))
