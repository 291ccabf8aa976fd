"""NP512 ``cuda-nccl-module``: ``torch.cuda.nccl``, PyTorch's direct NCCL bindings (``nccl.version()``,
single-process collectives), which have no Trainium counterpart."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from neuron_port.rules.helpers.names import dotted_name
from neuron_port.rules.helpers.table_rule import QualifiedNameRule
from neuron_port.rules.spec import Invalid, Valid

NCCL_MODULE = "torch.cuda.nccl"
COLLECTIVES_ADVICE = (
    "run one process per NeuronCore and use the torch.distributed collective (`neuron` backend)"
)
# torch.cuda.nccl.<name> -> (advice, effort); "" is the module itself
NCCL_ADVICE: dict[str, tuple[str, str]] = {
    "": ("there is no NCCL on Trainium: use torch.distributed with backend=\"neuron\"", "medium"),
    "version": ("it raises on Trainium (no NCCL): log the torch-neuronx version instead, or drop it", "low"),
    "is_available": ("it is False on Trainium: test torch.distributed.is_available() instead", "low"),
    "all_reduce": (COLLECTIVES_ADVICE, "medium"),
    "reduce": (COLLECTIVES_ADVICE, "medium"),
    "broadcast": (COLLECTIVES_ADVICE, "medium"),
    "all_gather": (COLLECTIVES_ADVICE, "medium"),
    "reduce_scatter": (COLLECTIVES_ADVICE, "medium"),
    "unique_id": ("NCCL communicator set-up has no Trainium counterpart: init_process_group(backend=\"neuron\") "
                  "sets up the Neuron collectives", "medium"),
    "init_rank": ("NCCL communicator set-up has no Trainium counterpart: init_process_group(backend=\"neuron\") "
                  "sets up the Neuron collectives", "medium"),
}


class CudaNcclModule(QualifiedNameRule[str]):
    """Reports ``torch.cuda.nccl``: PyTorch's direct NCCL bindings have no Trainium counterpart.

    ## What it does
    Reports imports of ``torch.cuda.nccl`` (``import torch.cuda.nccl as nccl``, ``from torch.cuda import
    nccl``, ``from torch.cuda.nccl import version``) and every use of it (``nccl.version()``,
    ``torch.cuda.nccl.is_available(tensors)``, the single-process collectives ``nccl.all_reduce`` /
    ``broadcast`` / ``reduce`` / ``all_gather`` / ``reduce_scatter``, ``unique_id`` / ``init_rank``),
    each with advice and an effort level. The import is a warning (it works; the module exists in every
    build), the uses are errors.

    ## Why is this bad?
    ``torch.cuda.nccl`` calls NCCL directly, outside ``torch.distributed``. A Trainium host has no
    NCCL: PyTorch there is built without it, so ``nccl.version()`` raises (``module 'torch._C' has no
    attribute '_nccl_version'``), ``nccl.is_available(...)`` is False with a warning, and the
    collectives cannot run on neuron tensors. Collectives on Trainium go through ``torch.distributed``
    with the ``neuron`` backend, one process per NeuronCore.

    ## Example
    ```python
    import torch.cuda.nccl as nccl
    logger.info("NCCL %s", nccl.version())
    ```
    Use instead:
    ```python
    import importlib.metadata
    logger.info("torch-neuronx %s", importlib.metadata.version("torch-neuronx"))
    ```

    ## Fix safety
    No automatic fix: what replaces the call depends on what the code does with it (a version in a
    log line, a capability test, a collective that has to move into torch.distributed).

    ## References
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/guides/torch-distributed.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/tutorials/tutorial-torch-distributed.html (the `neuron` backend, one process per logical NeuronCore) and https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/torchneuron-resources.html, https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/frameworks/torch/pytorch-native-overview.rst
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/guides/torch-distributed.html
    """

    CODE = "NP512"
    NAME = "cuda-nccl-module"
    SEVERITY = "error"
    EFFORT = "medium"
    MESSAGE = "`{name}` uses NCCL directly: {advice}"
    TRIGGERS = ("nccl",)

    VALID = [
        Valid("import torch.distributed as dist\ndist.init_process_group(backend='neuron')\n"),
        Valid("nccl = load_config()['nccl']\nprint(nccl.version)\n"),
        Valid("import torch.distributed as dist\nok = dist.is_nccl_available()\n"),
    ]
    INVALID = [
        Invalid("import torch.cuda.nccl as nccl\nprint(nccl.version())\n", None, message_contains="torch-neuronx"),
        Invalid("import torch\nif torch.cuda.nccl.is_available([x]):\n    torch.cuda.nccl.all_reduce([x])\n", None),
        Invalid("from torch.cuda import nccl\n", None),
        Invalid("from torch.cuda.nccl import version\nv = version()\n", None),
    ]

    def _advice(self, qualname: str) -> tuple[str, str]:
        rest = qualname[len(NCCL_MODULE) + 1:] if qualname != NCCL_MODULE else ""
        return NCCL_ADVICE.get(rest.split(".")[0], NCCL_ADVICE[""])

    # imports: reported once per statement
    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            name = dotted_name(alias.name)
            if name is not None and (name == NCCL_MODULE or name.startswith(NCCL_MODULE + ".")):
                self._report_import(node, name)
                return

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        # the import tracker (the first visitor of the batch) has already bound the names of this statement
        # (all but relative and star imports): what each stands for is its alias in the file context
        if node.relative or isinstance(node.names, cst.ImportStar):
            return
        for alias in node.names:
            local = alias.asname.name if alias.asname is not None else alias.name
            full = self.context.aliases.get(local.value) if isinstance(local, cst.Name) else None
            if full is not None and (full == NCCL_MODULE or full.startswith(NCCL_MODULE + ".")):
                self._report_import(node, full)
                return

    def _report_import(self, node: cst.CSTNode, name: str) -> None:
        advice, effort = self._advice(name)
        # the import itself works (the module exists in every build); its uses fail
        self.report(node, f"`{name}` (imported here) calls NCCL directly: {advice}", effort=effort,
                    severity="warning")

    # uses: the outermost reference of each chain
    def lookup(self, qualname: str) -> Optional[str]:
        if qualname == NCCL_MODULE or qualname.startswith(NCCL_MODULE + "."):
            return qualname
        return None

    def on_reference(self, node: cst.BaseExpression, qualname: str, key: str) -> None:
        advice, effort = self._advice(qualname)
        self.report(node, self.MESSAGE.format(name=qualname, advice=advice), effort=effort)
