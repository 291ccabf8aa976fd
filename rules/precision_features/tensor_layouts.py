"""NP803 / NP804: tensor layouts Neuron does not support: sparse tensors (layouts, ``to_sparse()``,
sparse gradients) and nested (ragged) tensors.
"""

from __future__ import annotations

import libcst as cst

from neuron_port.rules.helpers.names import is_true
from neuron_port.rules.helpers.nodes import children
from neuron_port.rules.precision_features.common import ReferenceRule
from neuron_port.rules.spec import Invalid, RunPremise, Valid


SPARSE_MESSAGE = (
    "`{name}`: sparse tensors are not supported on Neuron: use dense tensors (with a mask), or keep the "
    "sparse part on the CPU"
)


class SparseTensor(ReferenceRule):
    """Reports sparse tensors: not supported on Neuron.

    ## What it does
    Reports ``torch.sparse_coo_tensor`` / ``sparse_csr_tensor`` / ``torch.sparse.*`` /
    ``torch.sparse_coo`` layouts, ``x.to_sparse()`` (and ``to_sparse_csr`` / ``_csc`` / ``_bsr``),
    ``nn.Embedding(..., sparse=True)`` / ``nn.EmbeddingBag`` / ``F.embedding(sparse=True)``,
    ``torch.gather(..., sparse_grad=True)`` and ``torch.optim.SparseAdam``.

    ## Why is this bad?
    TorchNeuron has no sparse layouts: sparse embedding gradients raise
    ``NotImplementedError("Sparse is currently not supported for embedding.")`` and ``gather`` with
    ``sparse_grad=True`` raises ``"sparse_grad=True is not supported on Neuron"``.

    ## Example
    ```python
    emb = nn.Embedding(vocab, dim, sparse=True)
    opt = torch.optim.SparseAdam(emb.parameters())
    ```
    Use instead:
    ```python
    emb = nn.Embedding(vocab, dim)
    opt = torch.optim.AdamW(emb.parameters())
    ```

    ## Fix safety
    No automatic fix: dense gradients of a very large embedding cost memory; sparse matrix products
    need a dense (masked) formulation.

    ## References
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/compile/reference-torch-compile.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/api/index.html, https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/frameworks/torch/pytorch-native-overview.rst (sparse embedding grads, ``gather(sparse_grad=True)``)
    """

    CODE = "NP803"
    RUN_PREMISE = RunPremise("no sparse tensor reached the device",
                             features=("sparse", "sparse_embedding", "gather_sparse_grad"))
    NAME = "sparse-tensor"
    SEVERITY = "error"
    EFFORT = "medium"
    MESSAGE = SPARSE_MESSAGE.format(name="sparse")
    TRIGGERS = (r"\.[ \t]*(?:to_)?sparse", r"sparse(?<!\wsparse)\w*[ \t]*(?:\.[A-Za-z_]|\()", r"sparse(?<!\wsparse)(?:_grad)?\s*=(?!=)", 'SparseAdam', r"import\b[^\n]*\bsparse", r"sparse(?<=[\s(,]sparse)\w*[ \t]*(?:[,)\\]|as\b|\r?$)")
    TABLE = {
        "torch.sparse": (SPARSE_MESSAGE, "medium"),
        "torch.sparse_": (SPARSE_MESSAGE, "medium"),
        "torch.optim.SparseAdam": (SPARSE_MESSAGE, "low"),
    }
    SPARSE_KEYWORD_CALLEES = frozenset({
        "torch.nn.Embedding", "torch.nn.EmbeddingBag", "torch.nn.functional.embedding",
        "torch.nn.functional.embedding_bag", "torch.nn.Embedding.from_pretrained",
        "torch.nn.EmbeddingBag.from_pretrained",
    })
    TO_SPARSE = frozenset({"to_sparse", "to_sparse_csr", "to_sparse_csc", "to_sparse_bsr", "to_sparse_bsc",
                           "to_sparse_coo"})

    VALID = [
        Valid("import torch.nn as nn\nemb = nn.Embedding(1000, 64)\nemb2 = nn.Embedding(10, 4, sparse=False)\n"),
        Valid("import torch\ny = torch.gather(x, 1, idx)\n"),
    ]
    INVALID = [
        Invalid("import torch.nn as nn\nemb = nn.Embedding(1000, 64, sparse=True)\n", None),
        Invalid("import torch\ni = torch.sparse_coo_tensor(idx, vals, (3, 3))\ny = torch.sparse.mm(i, d)\n", None),
        Invalid("s = dense.to_sparse()\n", None),
        Invalid("import torch\ny = torch.gather(x, 1, idx, sparse_grad=True)\n", None, target="accelerator"),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value in self.TO_SPARSE:
            self.report(node, SPARSE_MESSAGE.format(name=f".{func.attr.value}()"))
            return
        for arg in node.args:
            if arg.keyword is None or not is_true(arg.value):
                continue
            if arg.keyword.value == "sparse_grad" or (
                arg.keyword.value == "sparse" and self.context.qualname(func) in self.SPARSE_KEYWORD_CALLEES
            ):
                self.report(arg, SPARSE_MESSAGE.format(name=f"{arg.keyword.value}=True"), effort="low")


NESTED_MESSAGE = (
    "`{name}`: nested (ragged) tensors are not supported on Neuron: pad to a fixed length and pass a mask"
)


class NestedTensor(ReferenceRule):
    """Reports NestedTensor (``torch.nested``): ragged shapes are not supported on Neuron.

    ## What it does
    Reports ``torch.nested.*`` (``nested_tensor``, ``as_nested_tensor``, ``narrow``, ...) and the
    ``torch.jagged`` layout.

    ## Why is this bad?
    Nested tensors are not in TorchNeuron's supported feature set (its support is **not confirmed** by
    any readable source), and they are ragged by design, while the neuron compile backend needs static
    shapes.

    ## Example
    ```python
    batch = torch.nested.nested_tensor([a, b, c], layout=torch.jagged)
    ```
    Use instead:
    ```python
    batch = torch.nn.utils.rnn.pad_sequence([a, b, c], batch_first=True)  # plus a padding mask
    ```

    ## Fix safety
    No automatic fix: padding changes every op that consumes the batch (masks in attention and losses).

    ## References
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/compile/reference-torch-compile.html, https://docs.pytorch.org/docs/2.13/generated/torch.compile.html (static shapes), https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/api/index.html, https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/frameworks/torch/pytorch-native-overview.rst (NestedTensor: NOT confirmed)
    """

    CODE = "NP804"
    RUN_PREMISE = RunPremise("no nested tensor reached the device", features=("nested_tensor",))
    NAME = "nested-tensor"
    SEVERITY = "error"
    EFFORT = "medium"
    MESSAGE = NESTED_MESSAGE.format(name="torch.nested")
    TRIGGERS = (r"\.[ \t]*(?:nested|jagged)\b", r"import\b[^\n]*\b(?:nested|jagged)\b", r"nested(?<=[\s(,]nested)\b[ \t]*(?:[,)\\]|as\b|\r?$)", r"jagged(?<=[\s(,]jagged)\b[ \t]*(?:[,)\\]|as\b|\r?$)")
    TABLE = {"torch.nested": (NESTED_MESSAGE, "medium"), "torch.jagged": (NESTED_MESSAGE, "medium")}

    VALID = [Valid("import torch\nbatch = torch.nn.utils.rnn.pad_sequence(seqs, batch_first=True)\nnested = 1\n")]
    INVALID = [
        Invalid("import torch\nnt = torch.nested.nested_tensor([a, b], layout=torch.jagged)\n", None),
        Invalid("import torch\nnt = torch.nested.as_nested_tensor(seqs, layout=torch.jagged)\n", None,
                message_contains="torch.nested.as_nested_tensor"),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        # one finding per call: the layout passed to a torch.nested constructor is the same cause
        qualname = self.context.qualname(node.func)
        if qualname is None or self.lookup(qualname) != "torch.nested":
            return
        pending: list[cst.CSTNode] = [arg.value for arg in node.args]
        while pending:
            child = pending.pop()
            if isinstance(child, (cst.Name, cst.Attribute)):
                self.not_uses.add(child)
            pending.extend(children(child))
