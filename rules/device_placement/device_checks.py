"""NP102 ``cuda-device-check``: ``'cuda'`` device strings in comparisons (``device.type == 'cuda'``,
``'cuda' in d``, ``d.startswith('cuda')``)."""

from __future__ import annotations

import libcst as cst

from neuron_port.rules.device_placement.string_roles import DeviceStringRule
from neuron_port.rules.helpers.names import source_of
from neuron_port.rules.no_port.cuda_only_guards import cuda_only_guards, unsafe_flip_note
from neuron_port.rules.spec import FRAGMENT, Invalid, Valid


class CudaDeviceCheck(DeviceStringRule):
    """Rewrites device checks against ``'cuda'`` (``device.type == 'cuda'``, ``'cuda' in device``).

    ## What it does
    Finds ``'cuda'`` / ``'cuda:N'`` strings (and the NP101 templates) used in comparisons: ``==``, ``!=``,
    ``in``, ``not in``, membership in a literal list or tuple, and ``str.startswith('cuda')``. On the
    neuron target they become ``'neuron'``. A membership test against a literal of device types
    (``p.device.type in ("cuda", "xpu")``: ``'cuda'`` and another device-type name) keeps ``'cuda'`` and gets
    ``'neuron'`` beside it: it accepts what it accepted and Trainium too (NP101 does the same for such tables
    outside a test). When the same ``if``/``elif`` chain already tests for
    ``'neuron'`` the code is multi-backend and is only reported.

    A test that guards CUDA-only code (``if q.device.type == 'cuda': return flash_attn_func(q, k, v)``:
    Triton, CUDA extensions, flash-attn, xformers, CUDA graphs, ``torch.cuda`` APIs with no Trainium
    equivalent such as ``mem_get_info`` or ``nvtx``) is left as it is and reported by NP720, so Trainium
    keeps taking the torch path.

    ## Why is this bad?
    On Trainium ``device.type`` is ``'neuron'``, so a ``== 'cuda'`` test is silently False: the program
    takes its CPU branch (no pinned memory, no fused optimizer, autocast off), which runs but slowly or
    differently, with no error.

    ## Example
    ```python
    device_type = 'cuda' if 'cuda' in device else 'cpu'
    if device.type == 'cuda':
        torch.cuda.synchronize()
    ```
    Use instead:
    ```python
    device_type = 'neuron' if 'neuron' in device else 'cpu'
    if device.type == 'neuron':
        torch.neuron.synchronize()
    ```

    ## Fix safety
    Safe on the neuron target, because NP101 rewrites the strings the compared values are made from, so
    both sides change together, and a test whose guarded code cannot run on Trainium is kept (above): a
    branch the CUDA program skipped there must not start running code that raises. Not fixed when the chain already has a neuron branch (the CUDA branch
    would shadow it) and not fixed on the accelerator target, where there is no device-agnostic spelling
    of "is this the accelerator": compare with ``torch.accelerator.current_accelerator().type`` after
    checking ``torch.accelerator.is_available()``.
    Beyond that list, the fix is safe only when everything the test decides (the ``if`` and ``else``
    bodies, both arms of a ternary, the rest of an ``and`` / ``or`` chain, the rest of a block after an
    early ``return``) is known to run on Trainium: torch APIs the simulated device implements, printing,
    logging, seeding, literals, functions of the same file whose bodies are such code
    (``rules/helpers/portable.py`` has the allow list). Anything else (an import, a call into another
    package, a ``raise`` / ``print`` / warning naming CUDA, GPU, FP8 or quantization, an attribute the file
    sets to ``None`` such as ``self.cuda_config``) makes it an unsafe fix whose message names that code.
    A test whose value leaves it (``use_fused = x.device.type == "cuda"``, ``return ...``, passed to a
    call) is judged where the value goes, as NP104 explains (``rules/helpers/escaping_tests.py``).

    ## References
    - https://docs.pytorch.org/docs/stable/accelerator.html
    """

    CODE = "NP102"
    NAME = "cuda-device-check"
    SEVERITY = "warning"
    FIX_AVAILABILITY = "sometimes"
    EFFORT = "low"
    MESSAGE = "device check against `{old}` is always False on Trainium: compare with `{new}`"
    TRIGGERS = ("'cuda", '"cuda')

    VALID = [
        Valid("if device.type == 'neuron':\n    pass\n"),
        Valid("device = 'cuda'\n"),  # NP101's business
        Valid("if x == 'cuda is slow':\n    pass\n"),
    ]
    INVALID = [
        # the comparison's value goes into a name; a test of that name decides a kernel package's call
        Invalid("def f(x):\n    use_fused = x.device.type == 'cuda'\n    if use_fused:\n"
                "        return fused_kernels.gelu(x)\n    return x * 2\n",
                None, message_contains="unsafe: it guards `fused_kernels.gelu"),
        # a kernel precondition: the rest of the function calls a CUDA library, so the flip is unsafe
        Invalid('def hist(source, lib):\n    assert source.device.type == "cuda"\n'
                '    lib.chistogram(source.data_ptr())\n', None, message_contains="unsafe: it guards `lib.chistogram"),
        Invalid(
            "device_type = 'cuda' if 'cuda' in device else 'cpu'\nif device.type == 'cuda':\n    pass\n",
            "device_type = 'cuda' if 'neuron' in device else 'cpu'\nif device.type == 'neuron':\n    pass\n",
            not_runnable=FRAGMENT,
        ),
        Invalid(
            'use_fused = args.device != "cuda:0"\nok = dev in ("cuda", "cpu")\n'
            'if d.startswith("cuda"):\n    pass\n',
            'use_fused = args.device != "neuron:0"\nok = dev in ("cuda", "neuron", "cpu")\n'
            'if d.startswith("neuron"):\n    pass\n',
            not_runnable=FRAGMENT,
        ),
        Invalid(
            "if device.type == 'cuda':\n    a()\nelif device.type == 'neuron':\n    b()\n",
            None,
            message_contains="already",
        ),
        Invalid("if device.type == 'cuda':\n    pass\n", None, target="accelerator"),
        Invalid(
            # the first test guards flash-attn (NP720): kept; the second is rewritten
            "from flash_attn import flash_attn_func\nif q.device.type == 'cuda':\n    o = flash_attn_func(q, k, v)\n"
            "pin = q.device.type == 'cuda'\n",
            "from flash_attn import flash_attn_func\nif q.device.type == 'cuda':\n    o = flash_attn_func(q, k, v)\n"
            "pin = q.device.type == 'neuron'\n",
            not_runnable='needs flash_attn, a CUDA-only package',
        ),
        Invalid(
            """
            import torch

            device = torch.device('neuron')
            x = torch.ones(2, device=device)
            if x.device.type == 'cuda':
                y = x * 2
            ok = device.type in ("cuda", "cpu")
            assert ok
            if str(y.device).startswith("cuda"):
                y = y.cpu()
            """,
            """
            import torch

            device = torch.device('neuron')
            x = torch.ones(2, device=device)
            if x.device.type == 'neuron':
                y = x * 2
            ok = device.type in ("cuda", "neuron", "cpu")
            assert ok
            if str(y.device).startswith("neuron"):
                y = y.cpu()
            """,
            runs=True,
        ),
        Invalid(
            """
            import torch

            x = torch.ones(2, device='neuron')
            if x.device.type == 'cuda':
                free, total = torch.cuda.mem_get_info()
                print(free / total)
            if str(x.device).startswith('cuda'):
                torch.cuda.nvtx.range_push('step')
            pin = x.device.type == 'cuda'
            """,
            """
            import torch

            x = torch.ones(2, device='neuron')
            if x.device.type == 'cuda':
                free, total = torch.cuda.mem_get_info()
                print(free / total)
            if str(x.device).startswith('cuda'):
                torch.cuda.nvtx.range_push('step')
            pin = x.device.type == 'neuron'
            """,
            runs=True,
        ),
        Invalid(
            # what the tests decide is about a feature Trainium lacks (FP8, GPU quantization): turned into
            # 'neuron', Trainium would skip the warning and the raise and enter the path they keep it out of
            """
            def configure(args, device, device_type):
                if device_type != "cuda":
                    print("FP8 training requires CUDA, ignoring --fp8")
                    args.fp8 = False
                if device.type != "cuda":
                    raise ValueError("Quantization is only supported on the GPU.")
                return args
            """,
            None,
            message_contains='unsafe: it guards `print("FP8',
        ),
        Invalid(
            """
            def configure(args, device_type):
                if device_type != "cuda":
                    print("FP8 training requires CUDA, ignoring --fp8")
                    args.fp8 = False
                return args
            """,
            """
            def configure(args, device_type):
                if device_type != "neuron":
                    print("FP8 training requires CUDA, ignoring --fp8")
                    args.fp8 = False
                return args
            """,
            unsafe_fixes=True,
            not_runnable=FRAGMENT,
        ),
        Invalid(
            # the rest of the expression reads an optional Triton module; the guarded code calls bitsandbytes:
            # neither is known to run on Trainium
            """
            try:
                import triton
            except ImportError:
                triton = None
            import bitsandbytes as bnb


            def use_kernel(x):
                return triton is not None and x.device.type == "cuda"


            def to_int8(layer, device):
                if device.type == "cuda":
                    layer.weight = bnb.nn.Int8Params(layer.weight.data, has_fp16_weights=False).half().cuda()
                return layer
            """,
            None,
            message_contains="`bnb.nn.Int8Params`",
        ),
    ]

    def __init__(self, context) -> None:
        super().__init__(context)
        self._checks: list[tuple[cst.CSTNode, cst.CSTNode]] = []

    def _candidate(self, role_node: cst.CSTNode, literal: cst.CSTNode, kind: str) -> None:
        if self._role(role_node) in ("check", "multibackend"):
            self._checks.append((role_node, literal))  # reported at the end: is it a CUDA-only guard?

    def leave_Module(self, original_node: cst.Module) -> None:
        if not self._checks:
            return
        guards = cuda_only_guards(self.context, original_node)
        for role_node, literal in self._checks:
            if literal not in guards.guard_nodes:  # a guard of Triton / flash-attn / a CUDA extension is NP720's
                self._check(role_node, literal, guards.unsafe.get(literal))

    def _check(self, role_node: cst.CSTNode, literal: cst.CSTNode, guarded=None) -> None:
        role = self._role(role_node)
        old = source_of(role_node)
        if literal in self._tables and role in ("check", "multibackend") and self.context.target != "accelerator":
            fix = self._table_fix(literal)
            if fix:  # `dev in ("cuda", "cpu")`: neuron accepted beside CUDA
                element, replacement = fix
                # accepting neuron flips the test for Trainium: unsafe where what it decides may not run there
                self.report(element, f"membership test against device types holding `{old}`: add `'neuron'` "
                            "beside it" + ("" if guarded is None else unsafe_flip_note(guarded)),
                            replacement=replacement, safety="safe" if guarded is None else "unsafe")
            return
        if role == "multibackend":
            self.report(
                literal,
                f"device check against `{old}` in an if/elif chain that already handles neuron: review "
                "which branch should run on Trainium",
            )
            return
        if self.context.target == "accelerator":
            self.report(
                literal,
                f"device check against `{old}` is False on other accelerators: compare with "
                "`torch.accelerator.current_accelerator().type`",
            )
            return
        replacement = self._neuron_version(literal)
        self.report(
            literal,
            self.MESSAGE.format(old=old, new=old.replace(source_of(literal), source_of(replacement), 1))
            + ("" if guarded is None else unsafe_flip_note(guarded)),
            replacement=replacement,
            safety="safe" if guarded is None else "unsafe",
        )
