"""CUDA and NCCL environment variables in Python code: NP505 ``cuda-visible-devices`` (renamed to
``NEURON_RT_VISIBLE_CORES``) and NP507 ``cuda-env-var`` (``NCCL_*``, ``PYTORCH_CUDA_ALLOC_CONF``,
``CUDA_LAUNCH_BLOCKING`` ... reported). The same variables in launch scripts are NP520-NP525's."""

from __future__ import annotations

import libcst as cst

from neuron_port.rules.distributed.prose import SkipProse
from neuron_port.rules.distributed.tables import (
    CUDA_ENV_ADVICE,
    CUDA_VISIBLE_DEVICES,
    NCCL_ENV_ADVICE,
    NCCL_ENV_RE,
    NEURON_RT_VISIBLE_CORES,
)
from neuron_port.rules.helpers.nodes import replace_string, string_value
from neuron_port.rules.spec import Invalid, Valid


class CudaVisibleDevices(SkipProse):
    """Rewrites ``CUDA_VISIBLE_DEVICES`` in Python to ``NEURON_RT_VISIBLE_CORES``.

    ## What it does
    Finds the string ``"CUDA_VISIBLE_DEVICES"`` in Python code (``os.environ[...] = ...``,
    ``os.environ.get(...)``, ``os.getenv``, ``setdefault``, ``env={...}`` dicts for subprocesses) and, as an
    unsafe fix, renames it to ``NEURON_RT_VISIBLE_CORES``. The accelerator target only reports it.

    ## Why is this bad?
    The Neuron runtime ignores ``CUDA_VISIBLE_DEVICES``; core selection is ``NEURON_RT_VISIBLE_CORES``
    (``NEURON_RT_NUM_CORES`` for a count).

    ## Example
    ```python
    os.environ["CUDA_VISIBLE_DEVICES"] = str(local_rank)
    ```
    Use instead:
    ```python
    os.environ["NEURON_RT_VISIBLE_CORES"] = str(local_rank)
    ```

    A value that selects no GPU (``"-1"``, ``""``: the program hides the GPUs to run on the CPU) is
    reported without a fix: ``NEURON_RT_VISIBLE_CORES`` has no value for no core.

    ## Fix safety
    Unsafe: the values mean different things. CUDA takes a comma list of GPU indices ("0,1"); the Neuron
    runtime takes logical NeuronCore indices, documented as ranges ("0-1"), and a GPU index is not a core
    index (4 cores per Trainium2 chip at LNC=2). Also, ``init_process_group`` sets the variable from
    ``LOCAL_RANK`` itself when it is unset, so under ``torchrun`` the line can usually be deleted.

    ## References
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/get-started/quickstart-build-first-model.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/neuron-runtime/api/nrt-env-var-reference.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/guides/torch-distributed.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/tutorials/tutorial-torch-distributed.html
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/neuron-runtime/api/nrt-env-var-reference.html
    """

    CODE = "NP505"
    NAME = "cuda-visible-devices"
    SEVERITY = "warning"
    FIX_AVAILABILITY = "sometimes"
    FIX_SAFETY = "unsafe"
    EFFORT = "low"
    MESSAGE = (
        "CUDA_VISIBLE_DEVICES has no effect on Trainium: use NEURON_RT_VISIBLE_CORES (NeuronCore indices or "
        "ranges like \"0-3\")"
    )
    TRIGGERS = (CUDA_VISIBLE_DEVICES,)

    def __init__(self, context) -> None:
        super().__init__(context)
        self._hiding: set[cst.CSTNode] = set()  # the names set to a value that selects no GPU

    VALID = [
        Valid('import os\nos.environ["NEURON_RT_VISIBLE_CORES"] = "0-3"\n'),
        Valid('"""Set CUDA_VISIBLE_DEVICES before running."""\n'),
    ]
    INVALID = [
        Invalid(
            "import os\nos.environ['CUDA_VISIBLE_DEVICES'] = str(local_rank)\n"
            "gpus = os.environ.get('CUDA_VISIBLE_DEVICES', '')\n",
            "import os\nos.environ['NEURON_RT_VISIBLE_CORES'] = str(local_rank)\n"
            "gpus = os.environ.get('NEURON_RT_VISIBLE_CORES', '')\n",
            unsafe_fixes=True,
        ),
        Invalid("import os\nos.environ['CUDA_VISIBLE_DEVICES'] = '0'\n", None),
        Invalid("import os\nos.environ['CUDA_VISIBLE_DEVICES'] = '-1'\n", None, unsafe_fixes=True,
                message_contains="hides every GPU"),
        Invalid("import os\nos.environ['CUDA_VISIBLE_DEVICES'] = '0'\n", None, target="accelerator", unsafe_fixes=True),
    ]

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:  # os.environ["CUDA_VISIBLE_DEVICES"] = "-1"
            if isinstance(target.target, cst.Subscript) and len(target.target.slice) == 1:
                index = target.target.slice[0].slice
                if isinstance(index, cst.Index):
                    self._note_value(index.value, node.value)

    def _on_call(self, node: cst.Call) -> None:
        # os.environ.setdefault(NAME, "-1") / os.putenv(NAME, "-1") (not a read's default: environ.get(NAME, ""))
        setter = isinstance(node.func, cst.Attribute) and node.func.attr.value in ("setdefault", "putenv")
        if setter and len(node.args) >= 2 and node.args[0].keyword is None:
            self._note_value(node.args[0].value, node.args[1].value)

    def visit_DictElement(self, node: cst.DictElement) -> None:
        self._note_value(node.key, node.value)

    def _note_value(self, key: cst.BaseExpression, value: cst.BaseExpression) -> None:
        if string_value(key) == CUDA_VISIBLE_DEVICES and hides_every_gpu(string_value(value)):
            self._hiding.add(key)

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        if string_value(node) != CUDA_VISIBLE_DEVICES or node in self._prose:
            return
        if node in self._hiding:
            self.report(node, "CUDA_VISIBLE_DEVICES set to no device hides every GPU (the program runs on the CPU); "
                        "NEURON_RT_VISIBLE_CORES has no value for no core: left as it is")
            return
        if self.context.target == "accelerator":
            self.report(node)
            return
        self.report(node, replacement=replace_string(node, NEURON_RT_VISIBLE_CORES), safety="unsafe")


def hides_every_gpu(value) -> bool:
    """A CUDA_VISIBLE_DEVICES value that selects no GPU (``"-1"``, ``""``, ``"none"``): CUDA enumerates the
    listed devices up to the first invalid one, so these leave none."""
    if value is None:
        return False
    value = value.strip().lower()
    return value == "" or value.startswith("-") or value in ("none", "nodevfiles", "void")


class CudaEnvVar(SkipProse):
    """Reports ``NCCL_*``, ``PYTORCH_CUDA_ALLOC_CONF``, ``CUDA_LAUNCH_BLOCKING`` and similar settings.

    ## What it does
    Finds environment-variable names of NCCL and of the CUDA runtime/allocator in Python strings
    (``os.environ["NCCL_DEBUG"] = "INFO"``, ``os.environ.setdefault("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1")``)
    and reports that they have no effect on Trainium, with the Neuron equivalent where one exists.

    ## Why is this bad?
    They do nothing there, and leaving them suggests tuning that is not happening (for example an NCCL
    timeout or debug level while debugging a hang).

    ## Example
    ```python
    os.environ["NCCL_DEBUG"] = "INFO"
    os.environ["CUDA_LAUNCH_BLOCKING"] = "1"
    ```
    Use instead:
    ```python
    os.environ["NEURON_LAUNCH_BLOCKING"] = "1"
    ```

    ## Fix safety
    No fix: removing a line of configuration is left to the user.

    ## References
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/index.html, https://github.com/parmoham-aws/test-repo-parmoham/blob/98154b86/torch_neuronx/__init__.py, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/guides/torch-distributed.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/tutorials/tutorial-torch-distributed.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/env-vars.html
    """

    CODE = "NP507"
    NAME = "cuda-env-var"
    SEVERITY = "info"
    EFFORT = "low"
    MESSAGE = "`{name}` has no effect on Trainium: {advice}"
    TRIGGERS = ("NCCL_", *CUDA_ENV_ADVICE)

    VALID = [Valid('import os\nos.environ["NEURON_RT_VISIBLE_CORES"] = "0"\nprint("NCCL_DEBUG")\n')]
    INVALID = [
        Invalid('import os\nos.environ["NCCL_DEBUG"] = "INFO"\n', message_contains="NCCL is not used"),
        Invalid(
            'import os\nos.environ.setdefault("CUDA_LAUNCH_BLOCKING", "1")\n', message_contains="NEURON_LAUNCH_BLOCKING"
        ),
    ]

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        value = string_value(node)
        if value is None or node in self._prose:
            return
        if value in CUDA_ENV_ADVICE:
            self.report(node, self.MESSAGE.format(name=value, advice=CUDA_ENV_ADVICE[value]))
        elif NCCL_ENV_RE.match(value):
            self.report(node, self.MESSAGE.format(name=value, advice=NCCL_ENV_ADVICE))
