"""NP409 ``cuda-graphs``: CUDA graph capture and replay (``torch.cuda.CUDAGraph``, ``torch.cuda.graph``,
``make_graphed_callables``, ``use_cuda_graph=True`` keywords), which have no Trainium equivalent."""

from __future__ import annotations

import libcst as cst

from neuron_port.rules.compile.tables import CUDA_GRAPH_APIS, CUDA_GRAPH_C_NAMES, CUDA_GRAPH_KEYWORDS
from neuron_port.rules.helpers.names import is_true
from neuron_port.rules.helpers.table_rule import covering_key
from neuron_port.rules.spec import Invalid, PythonRule, Valid


class CudaGraphs(PythonRule):
    """Reports CUDA graphs, which have no Trainium equivalent.

    ## What it does
    Reports ``torch.cuda.CUDAGraph``, ``torch.cuda.graph(...)`` capture contexts,
    ``torch.cuda.make_graphed_callables``, ``torch.cuda.graph_pool_handle``,
    ``torch.cuda.is_current_stream_capturing`` (any import spelling, also via ``torch.cuda.graphs``),
    the private CUDA-graph helpers (``torch.cuda._graph_annotations`` and what it holds,
    ``torch.cuda._annotate_cuda_graph_trace``, ``torch.cuda._POOL_HANDLE``, ``torch._C._CUDAGraph``,
    ``torch._C._graph_pool_handle``), and ``use_cuda_graph=True``-style keyword arguments of library
    calls, each with advice and an effort level. Kernel annotations and trace post-processing are
    warnings (without CUDA they do nothing); the rest are errors. ``torch.compile(mode="reduce-overhead")`` and the ``"cudagraphs"`` backend are reported by
    NP403 and NP402.

    ## Why is this bad?
    CUDA graphs capture a sequence of GPU kernel launches and replay it to save launch overhead. There
    is no capture/replay API on Trainium ("Not in the initial release"); the code raises on a Trainium
    host. The nearest equivalent is whole-graph compilation with ``torch.compile(backend="neuron")``,
    which removes per-op launch overhead by compiling the step into one NEFF.

    ## Example
    ```python
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        static_out = model(static_in)
    g.replay()
    ```
    Use instead:
    ```python
    step = torch.compile(model, backend="neuron", fullgraph=True)
    out = step(x)
    ```

    ## Fix safety
    No automatic fix: capture code keeps static buffers, warm-up streams and replay calls whose
    removal restructures the program.

    ## References
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/compile/about-torch-compile.html (no CUDA-graph equivalent) and https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/torchneuron-resources.html, https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/frameworks/torch/pytorch-native-overview.rst
    - https://docs.pytorch.org/docs/stable/notes/cuda.html#cuda-graphs
    """

    CODE = "NP409"
    NAME = "cuda-graphs"
    SEVERITY = "error"
    EFFORT = "high"
    MESSAGE = "CUDA graphs have no Trainium equivalent (`{name}`): {advice}"
    TRIGGERS = ("CUDAGraph", r"graph\(", "graphed_callables", "graph_pool", "capturing", "cuda_graph",
                "cudagraphs", "_graph_annotations", "POOL_HANDLE")
    # entries whose code only labels or post-processes graphs: without CUDA it does nothing
    WARNINGS = frozenset({"_graph_annotations", "_annotate_cuda_graph_trace"})

    VALID = [
        Valid("import torch\nstep = torch.compile(model, backend='neuron', fullgraph=True)\n"),
        Valid("from torch.cuda import graphs\n"),
        Valid("build(use_cuda_graph=False)\n"),
    ]
    INVALID = [
        Invalid("import torch\ng = torch.cuda.CUDAGraph()\nwith torch.cuda.graph(g):\n    out = model(x)\n", None),
        Invalid("from torch.cuda import make_graphed_callables\nmodel = make_graphed_callables(model, (x,))\n",
                None, message_contains="make_graphed_callables"),
        Invalid("import torch as th\ng = th.cuda.graphs.CUDAGraph()\n", None),
        Invalid("engine = build_engine(model, use_cuda_graph=True)\n", None, message_contains="use_cuda_graph"),
        Invalid("import torch\ng = torch.cuda.CUDAGraph()\n", None, target="accelerator"),
        Invalid("from torch.cuda._graph_annotations import mark_kernels\n"
                "with mark_kernels('attention'):\n    y = attn(x)\n", None, message_contains="_graph_annotations"),
        Invalid("import torch\npool = torch._C._graph_pool_handle()\n", None),
    ]

    def _check(self, node: cst.BaseExpression, last: str) -> None:
        # cheap test first: the last name of the chain must be a table entry (or a local alias of one)
        if (last not in CUDA_GRAPH_APIS and last not in self.context.aliases) or not self.context.is_reference(node):
            return
        qualname = self.context.qualname(node)
        if qualname is None:
            return
        if qualname.startswith("torch._C.") and qualname[len("torch._C."):] in CUDA_GRAPH_C_NAMES:
            key: str | None = qualname[len("torch._C."):]
        elif qualname.startswith("torch.cuda."):
            key = qualname[len("torch.cuda."):]
            if key.startswith("graphs."):
                key = key[len("graphs."):]
            # a private helper module covers what it holds (torch.cuda._graph_annotations.mark_kernels)
            key = key if key in CUDA_GRAPH_APIS else covering_key(key, [k for k in CUDA_GRAPH_APIS if k[0] == "_"])
        else:
            return
        if key in CUDA_GRAPH_APIS:
            advice, effort = CUDA_GRAPH_APIS[key]
            self.report(node, self.MESSAGE.format(name=qualname, advice=advice), effort=effort,
                        severity="warning" if key in self.WARNINGS else None)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self._check(node, node.attr.value)

    def visit_Name(self, node: cst.Name) -> None:
        self._check(node, node.value)

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is not None and node.keyword.value in CUDA_GRAPH_KEYWORDS and is_true(node.value):
            self.report(node, self.MESSAGE.format(
                name=f"{node.keyword.value}=True",
                advice="set it to False on Trainium (or compile the step with torch.compile(backend=\"neuron\"))"),
                effort="low")
