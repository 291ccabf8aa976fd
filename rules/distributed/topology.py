"""How many devices of which type a job is laid out on: NP504 ``cuda-device-mesh``
(``init_device_mesh("cuda", ...)`` / ``DeviceMesh("cuda", ...)``) and NP506 ``gpu-count-world-size``
(``torch.cuda.device_count()`` as a world size or process count)."""

from __future__ import annotations

import libcst as cst

from neuron_port.rules.distributed.tables import CORES_ADVICE, WORLD_SIZE_NAME_RE
from neuron_port.rules.helpers.calls import arg_named
from neuron_port.rules.helpers.names import last_segment, source_of
from neuron_port.rules.helpers.nodes import expr, replace_string, string_value
from neuron_port.rules.spec import FRAGMENT, TWO_PROCESSES, Invalid, PythonRule, Valid


class CudaDeviceMesh(PythonRule):
    """Rewrites ``init_device_mesh("cuda", ...)`` and ``DeviceMesh("cuda", ...)`` to ``"neuron"``.

    ## What it does
    Finds the device type of a device mesh (first argument or ``device_type=``) when it is ``"cuda"`` and
    rewrites it to ``"neuron"`` (``torch.accelerator.current_accelerator().type`` on the accelerator
    target). The message reminds to size the mesh in NeuronCores.

    ## Why is this bad?
    A ``cuda`` mesh cannot be created on Trainium; DTensor tensor/sequence parallelism runs on a
    ``neuron`` mesh, and mesh dimensions count logical NeuronCores (4 per Trainium2 chip at LNC=2).

    ## Example
    ```python
    mesh = init_device_mesh("cuda", (dp, tp), mesh_dim_names=("dp", "tp"))
    ```
    Use instead:
    ```python
    mesh = init_device_mesh("neuron", (dp, tp), mesh_dim_names=("dp", "tp"))
    ```

    ## Fix safety
    Safe: the string is used at once to create the mesh, which fails with ``"cuda"`` on any host without
    CUDA, so neither rewrite changes behaviour where the original worked.

    ## References
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/guides/torch-distributed.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/tutorials/tutorial-torch-distributed.html
    - https://docs.pytorch.org/docs/stable/distributed.html#torch.distributed.device_mesh.init_device_mesh
    """

    CODE = "NP504"
    NAME = "cuda-device-mesh"
    SEVERITY = "error"
    FIX_AVAILABILITY = "always"
    EFFORT = "low"
    MESSAGE = "a `cuda` device mesh does not exist on Trainium: use `{new}` and size the mesh in NeuronCores"
    TRIGGERS = ("init_device_mesh", "DeviceMesh")

    VALID = [
        Valid("from torch.distributed.device_mesh import init_device_mesh\nm = init_device_mesh('neuron', (8,))\n"),
        Valid("m = init_device_mesh(device_type, (2, 4))\n"),
    ]
    INVALID = [
        Invalid(
            "from torch.distributed.device_mesh import init_device_mesh\n"
            "mesh = init_device_mesh('cuda', (dp, tp), mesh_dim_names=('dp', 'tp'))\n",
            "from torch.distributed.device_mesh import init_device_mesh\n"
            "mesh = init_device_mesh('neuron', (dp, tp), mesh_dim_names=('dp', 'tp'))\n",
            not_runnable=FRAGMENT,
        ),
        Invalid(
            "import torch\nfrom torch.distributed.device_mesh import DeviceMesh\n"
            "m = DeviceMesh(device_type=\"cuda\", mesh=[0, 1])\n",
            "import torch\nfrom torch.distributed.device_mesh import DeviceMesh\n"
            "m = DeviceMesh(device_type=torch.accelerator.current_accelerator().type, mesh=[0, 1])\n",
            target="accelerator",
            not_runnable=TWO_PROCESSES,
        ),
        Invalid(
            """
            import torch.distributed as dist
            from torch.distributed.device_mesh import init_device_mesh

            dist.init_process_group('neuron')
            mesh = init_device_mesh('cuda', (1, 1), mesh_dim_names=('dp', 'tp'))
            dist.destroy_process_group()
            """,
            """
            import torch.distributed as dist
            from torch.distributed.device_mesh import init_device_mesh

            dist.init_process_group('neuron')
            mesh = init_device_mesh('neuron', (1, 1), mesh_dim_names=('dp', 'tp'))
            dist.destroy_process_group()
            """,
            runs=True,
        ),
        Invalid(
            """
            import torch.distributed as dist
            from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
            dist.init_process_group('neuron')
            mesh = init_device_mesh(device_type='cuda', mesh_shape=(1,))
            m = DeviceMesh('cuda', [0])
            dist.destroy_process_group()
            """,
            """
            import torch.distributed as dist
            from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
            import torch

            dist.init_process_group('neuron')
            mesh = init_device_mesh(device_type=torch.accelerator.current_accelerator().type, mesh_shape=(1,))
            m = DeviceMesh(torch.accelerator.current_accelerator().type, [0])
            dist.destroy_process_group()
            """,
            target='accelerator',
            runs=True,
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        if last_segment(node.func) not in ("init_device_mesh", "DeviceMesh"):
            return
        arg = arg_named(node, "device_type", 0)
        if arg is None or string_value(arg.value) != "cuda" or not isinstance(arg.value, cst.SimpleString):
            return
        if self.context.target == "accelerator":
            torch_name, imports = self.context.torch_module_name()
            new = f"{torch_name}.accelerator.current_accelerator().type"
            self.report(arg.value, self.MESSAGE.format(new=new), replacement=expr(new), imports=imports)
            return
        replacement = replace_string(arg.value, "neuron")
        self.report(arg.value, self.MESSAGE.format(new=source_of(replacement)), replacement=replacement)


class GpuCountWorldSize(PythonRule):
    """Reports ``torch.cuda.device_count()`` used as a world size or process count.

    ## What it does
    Finds ``torch.cuda.device_count()`` assigned to a name like ``world_size`` / ``ngpus_per_node`` /
    ``nprocs``, or passed as ``nprocs=`` / ``world_size=`` (``mp.spawn(main, nprocs=torch.cuda.device_count())``),
    and reports the number of workers a Trainium host needs. NP201 renames the call itself.

    ## Why is this bad?
    On Trainium the unit of data parallelism is the logical NeuronCore, not the chip: a trn2.48xlarge has
    16 chips but 64 NeuronCores at LNC=2. Batch sizes, learning-rate scaling and mesh shapes written for
    8 GPUs need review.

    ## Example
    ```python
    mp.spawn(main, nprocs=torch.cuda.device_count())
    ```
    Use instead:
    ```python
    mp.spawn(main, nprocs=torch.neuron.device_count())  # logical NeuronCores: 64 on trn2.48xlarge
    ```

    ## Fix safety
    No fix of its own (NP201 does the rename); the advice is about the numbers around the call.

    ## References
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/get-started/quickstart-build-first-model.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/neuron-runtime/api/nrt-env-var-reference.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/guides/torch-distributed.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/tutorials/tutorial-torch-distributed.html
    """

    CODE = "NP506"
    NAME = "gpu-count-world-size"
    SEVERITY = "info"
    EFFORT = "low"
    MESSAGE = "GPU count used as {what}: " + CORES_ADVICE
    TRIGGERS = ("device_count",)

    VALID = [Valid("import torch\nif torch.cuda.device_count() > 1:\n    pass\n")]
    INVALID = [
        Invalid("import torch\nimport torch.multiprocessing as mp\nmp.spawn(main, nprocs=torch.cuda.device_count())\n"),
        Invalid("import torch\nworld_size = torch.cuda.device_count()\n", message_contains="64 on a trn2.48xlarge"),
        Invalid("from torch.cuda import device_count\nngpus_per_node = device_count()\n", target="accelerator"),
    ]

    def _is_count(self, node: cst.BaseExpression) -> bool:
        # torch.neuron's too: the count NP201's rename leaves is the same advice (reported again after the fix)
        return isinstance(node, cst.Call) and self.context.qualname(node.func) in (
            "torch.cuda.device_count", "torch.neuron.device_count")

    def visit_Assign(self, node: cst.Assign) -> None:
        if not self._is_count(node.value):
            return
        for target in node.targets:
            name = last_segment(target.target)
            if name and WORLD_SIZE_NAME_RE.match(name):
                self.report(node.value, self.MESSAGE.format(what=f"`{name}`"))
                return

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is not None and WORLD_SIZE_NAME_RE.match(node.keyword.value) and self._is_count(node.value):
            self.report(node.value, self.MESSAGE.format(what=f"`{node.keyword.value}=`"))
