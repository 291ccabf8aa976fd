"""NP501 ``nccl-backend``: ``"nccl"`` process-group backends (strings, ``dist.Backend.NCCL``, device maps)
-> ``"neuron"``."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from neuron_port.rules.distributed.prose import SkipProse
from neuron_port.rules.distributed.tables import BACKEND_MAP_RE, NCCL, NEURON_BACKEND
from neuron_port.rules.helpers.calls import arg_named
from neuron_port.rules.helpers.guards import AvailabilityMixin
from neuron_port.rules.helpers.names import dotted_name, last_segment, source_of, walk
from neuron_port.rules.helpers.nodes import expr, replace_string, string_value
from neuron_port.rules.spec import FRAGMENT, Invalid, Valid


# where the backend goes positionally: init_process_group(backend, ...), new_group(ranks, timeout, backend)
BACKEND_POSITION = {"init_process_group": 0, "Backend": 0, "new_group": 2}


class NcclBackend(AvailabilityMixin, SkipProse):
    """Rewrites the ``"nccl"`` process-group backend to ``"neuron"``.

    ## What it does
    Finds the string ``"nccl"`` wherever it names a backend: ``init_process_group("nccl")``,
    ``backend="nccl"``, ``"nccl" if torch.cuda.is_available() else "gloo"``, argparse defaults and
    choices of ``--dist-backend``, ``dist.get_backend() == "nccl"``; also ``dist.Backend.NCCL`` and the
    ``cuda:nccl`` entry of a ``"cpu:gloo,cuda:nccl"`` device map, and the ``dist.is_nccl_available()`` test
    that chooses such a backend (``"nccl" if dist.is_nccl_available() else "gloo"``: NCCL is never available
    on Trainium) becomes ``dist.is_backend_available("neuron")``. Other spellings (``"NCCL"``,
    ``"Nccl"``: c10d lower-cases backend names) are found where a string names a backend: a
    ``backend=`` argument, the first argument of ``init_process_group`` / ``new_group`` /
    ``Backend``, the default or choices of an argparse option whose name says backend, a variable
    named ``*backend*``, a comparison with ``get_backend()``. On the accelerator target the backend
    becomes ``torch.distributed.get_default_backend_for_device(torch.accelerator.current_accelerator())``.

    ## Why is this bad?
    NCCL does not exist on Trainium; ``init_process_group("nccl")`` fails. TorchNeuron registers the
    ``neuron`` backend (``ProcessGroupNeuron``) for the ``neuron`` device.

    ## Example
    ```python
    dist.init_process_group(backend="nccl")
    ```
    Use instead:
    ```python
    dist.init_process_group(backend="neuron")
    ```

    ## Fix safety
    Safe on the neuron target. On the accelerator target the rewrite is safe under a
    ``torch.cuda.is_available()`` test and unsafe elsewhere (``current_accelerator()`` is None on CPU-only
    hosts, so an argparse default would raise at start-up).

    ## References
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/guides/torch-distributed.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/tutorials/tutorial-torch-distributed.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/torchneuron-resources.html, https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/frameworks/torch/pytorch-native-overview.rst
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/guides/torch-distributed.html
    """

    CODE = "NP501"
    NAME = "nccl-backend"
    SEVERITY = "error"
    FIX_AVAILABILITY = "always"
    EFFORT = "low"
    MESSAGE = "NCCL does not exist on Trainium: use `{new}`"
    TRIGGERS = ("nccl", "NCCL")

    VALID = [
        Valid("import torch.distributed as dist\ndist.init_process_group(backend='neuron')\n"),
        Valid('"""Uses nccl."""\nprint("nccl")\nx = "nccl_test"\n'),
        Valid('timers["NCCL"] = 0.0\nprint("NCCL")\n'),  # upper case: only where a backend is named
    ]
    INVALID = [
        Invalid("import torch.distributed as dist\nbackend = 'nccl' if dist.is_nccl_available() else 'gloo'\n",
                "import torch.distributed as dist\nbackend = 'neuron' if dist.is_backend_available(\"neuron\") else "
                "'gloo'\n", message_contains="chooses the NCCL backend", not_runnable=FRAGMENT),
        Invalid("import torch.distributed as dist\nbackend = {'cuda': 'nccl', 'cpu': 'gloo'}[device_type]\n"
                "dist.init_process_group(backend)\n",
                "import torch.distributed as dist\nbackend = {'neuron': 'neuron', 'cpu': 'gloo'}[device_type]\n"
                "dist.init_process_group(backend)\n", message_contains="the device-type key with it",
                not_runnable=FRAGMENT),
        Invalid(
            "import torch.distributed as dist\ndist.init_process_group('nccl')\n"
            "parser.add_argument('--dist-backend', default='nccl', type=str)\n",
            "import torch.distributed as dist\ndist.init_process_group('neuron')\n"
            "parser.add_argument('--dist-backend', default='neuron', type=str)\n",
            not_runnable=FRAGMENT,
        ),
        Invalid(
            'import torch\nimport torch.distributed as dist\n'
            'backend = "nccl" if torch.cuda.is_available() else "gloo"\n'
            'dist.init_process_group(backend=dist.Backend.NCCL)\nb = "cpu:gloo,cuda:nccl"\n',
            'import torch\nimport torch.distributed as dist\n'
            'backend = "neuron" if torch.cuda.is_available() else "gloo"\n'
            'dist.init_process_group(backend="neuron")\nb = "cpu:gloo,neuron:neuron"\n',
            runs=True,
        ),
        Invalid(
            'import torch\nbackend = "nccl" if torch.cuda.is_available() else "gloo"\n',
            "import torch\nbackend = torch.distributed.get_default_backend_for_device("
            'torch.accelerator.current_accelerator()) if torch.cuda.is_available() else "gloo"\n',
            target="accelerator",
            runs=True,
        ),
        Invalid("import torch\ndist.init_process_group('nccl')\n", None, target="accelerator"),
        Invalid(
            'import torch.distributed as dist\ndist.init_process_group(backend="NCCL" if on_gpu else "gloo")\n'
            'group = dist.new_group(ranks, None, "Nccl")\nDIST_BACKEND = "NCCL"\n'
            'parser.add_argument("--backend", default="NCCL", choices=["NCCL", "GLOO"])\n'
            'if dist.get_backend() == "NCCL":\n    pass\n',
            'import torch.distributed as dist\ndist.init_process_group(backend="neuron" if on_gpu else "gloo")\n'
            'group = dist.new_group(ranks, None, "neuron")\nDIST_BACKEND = "neuron"\n'
            'parser.add_argument("--backend", default="neuron", choices=["neuron", "GLOO"])\n'
            'if dist.get_backend() == "neuron":\n    pass\n',
            not_runnable=FRAGMENT,
        ),
        Invalid(
            """
            import argparse
            import torch.distributed as dist

            parser = argparse.ArgumentParser()
            parser.add_argument('--dist-backend', default='nccl', type=str)
            args = parser.parse_args()
            dist.init_process_group(args.dist_backend)
            dist.destroy_process_group()
            """,
            """
            import argparse
            import torch.distributed as dist

            parser = argparse.ArgumentParser()
            parser.add_argument('--dist-backend', default='neuron', type=str)
            args = parser.parse_args()
            dist.init_process_group(args.dist_backend)
            dist.destroy_process_group()
            """,
            runs=True,
        ),
        Invalid(
            """
            import torch
            import torch.distributed as dist
            dist.init_process_group(backend='nccl', init_method='env://')
            group = dist.new_group(ranks=[0], backend='nccl')
            x = torch.ones(2, device='neuron')
            dist.all_reduce(x, group=group)
            dist.destroy_process_group()
            """,
            """
            import torch
            import torch.distributed as dist
            dist.init_process_group(backend='neuron', init_method='env://')
            group = dist.new_group(ranks=[0], backend='neuron')
            x = torch.ones(2, device='neuron')
            dist.all_reduce(x, group=group)
            dist.destroy_process_group()
            """,
            runs=True,
        ),
    ]

    def __init__(self, context) -> None:
        super().__init__(context)
        self._guarded: set[cst.CSTNode] = set()
        self._backend_values: set[cst.CSTNode] = set()  # expressions that name a backend (any case)
        self._map_values: set[cst.CSTNode] = set()  # "nccl" of a {"cuda": "nccl"} entry (fixed with its key)

    # -- where a string names a backend (for the spellings other than "nccl") ---------------------
    def _values(self, node: cst.BaseExpression) -> None:
        self._backend_values.add(node)
        if isinstance(node, (cst.List, cst.Tuple, cst.Set)):
            self._backend_values.update(e.value for e in node.elements)
        elif isinstance(node, cst.IfExp):  # "NCCL" if torch.cuda.is_available() else "gloo"
            self._values(node.body)
            self._values(node.orelse)

    def _on_call(self, node: cst.Call) -> None:
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value == "backend":
                self._values(arg.value)
        name = last_segment(node.func)
        if name in BACKEND_POSITION:
            named = arg_named(node, "backend", BACKEND_POSITION[name])
            if named is not None:
                self._values(named.value)
        elif name == "add_argument" and any(
                "backend" in (string_value(a.value) or "") for a in node.args if a.keyword is None):
            for keyword in ("default", "choices"):
                arg = arg_named(node, keyword)
                if arg is not None:
                    self._values(arg.value)

    def visit_Assign(self, node: cst.Assign) -> None:
        if any("backend" in (dotted_name(t.target) or "").rsplit(".", 1)[-1].lower() for t in node.targets):
            self._values(node.value)

    def visit_Comparison(self, node: cst.Comparison) -> None:
        sides = [node.left, *(c.comparator for c in node.comparisons)]
        if any(isinstance(s, cst.Call) and last_segment(s.func) == "get_backend" for s in sides):
            for side in sides:
                self._values(side)

    def visit_IfExp(self, node: cst.IfExp) -> None:
        if self.is_availability_check(node.test):
            self._guarded.add(node.body)
        self._nccl_test(node.test, (node.body, node.orelse))

    def visit_If(self, node: cst.If) -> None:
        self._nccl_test(node.test, (node.body,) + ((node.orelse,) if node.orelse is not None else ()))

    def _nccl_test(self, test: cst.BaseExpression, branches) -> None:
        """``"nccl" if dist.is_nccl_available() else "gloo"``: the test that chooses the backend this rule
        renames is renamed with it (NCCL is never available on Trainium, so the renamed choice would never be
        taken and DDP would get the other backend, silently): ``dist.is_backend_available("neuron")``."""
        if self.context.target != "neuron":
            return
        calls = [n for n in walk(test) if isinstance(n, cst.Call) and not n.args
                 and last_segment(n.func) == "is_nccl_available"
                 and (self.context.qualname(n.func) or "").startswith("torch.distributed")]
        if not calls or not any(string_value(n) == NCCL for branch in branches for n in walk(branch)
                                if isinstance(n, cst.SimpleString)):
            return
        for call in calls:
            if isinstance(call.func, cst.Attribute):
                new, imports = f"{source_of(call.func.value)}.is_backend_available(\"{NEURON_BACKEND}\")", ()
            else:
                torch_name, imports = self.context.torch_module_name()
                new = f"{torch_name}.distributed.is_backend_available(\"{NEURON_BACKEND}\")"
            self.report(call, f"`{source_of(call)}` chooses the NCCL backend renamed with it (never available on "
                        f"Trainium): use `{new}`", replacement=expr(new),
                        imports=imports)

    def visit_DictElement(self, node: cst.DictElement) -> None:
        # {"cuda": "nccl", "cpu": "gloo"}[device_type]: key and value together, or the lookup by the renamed
        # device type misses and the program silently takes another backend
        if self.context.target != "neuron" or not isinstance(node.key, cst.SimpleString) \
                or not isinstance(node.value, cst.SimpleString):
            return
        if string_value(node.key) != "cuda" or (string_value(node.value) or "").lower() != NCCL:
            return
        self._map_values.add(node.value)
        replacement = node.with_changes(key=replace_string(node.key, "neuron"),
                                        value=replace_string(node.value, NEURON_BACKEND))
        self.report(node, self.MESSAGE.format(new=source_of(replacement).strip().rstrip(",")) + " (the device-type key with it)",
                    replacement=replacement)

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        value = string_value(node)  # an empty or non-string literal is neither case below: no set is asked
        if not value or node in self._prose or node in self._map_values:
            return
        if value == NCCL or (value is not None and value.lower() == NCCL and node in self._backend_values):
            self._backend(node, node)
        elif value and "cuda:nccl" in value and BACKEND_MAP_RE.match(value) and self.context.target == "neuron":
            new = value.replace("cuda:nccl", f"neuron:{NEURON_BACKEND}")
            self.report(node, self.MESSAGE.format(new=new), replacement=replace_string(node, new))

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value == "NCCL" and self.context.qualname(node) in (
            "torch.distributed.Backend.NCCL",
            "torch.distributed.distributed_c10d.Backend.NCCL",
        ):
            self._backend(node, None)

    def _backend(self, node: cst.BaseExpression, literal: Optional[cst.SimpleString]) -> None:
        if self.context.target == "accelerator":
            torch_name, imports = self.context.torch_module_name()
            new = (
                f"{torch_name}.distributed.get_default_backend_for_device("
                f"{torch_name}.accelerator.current_accelerator())"
            )
            safety = "safe" if node in self._guarded else "unsafe"
            self.report(
                node,
                self.MESSAGE.format(new=new)
                + ("" if safety == "safe" else " (unsafe: CPU-only hosts)"),
                replacement=expr(new),
                safety=safety,
                imports=imports,
            )
            return
        replacement = replace_string(literal, NEURON_BACKEND) if literal is not None else cst.SimpleString('"neuron"')
        self.report(node, self.MESSAGE.format(new=source_of(replacement)), replacement=replacement)
