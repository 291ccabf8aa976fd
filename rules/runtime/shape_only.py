"""NP911: what a shape-only run (`check --shape-only`) did not compute: values the program read from the
device (placeholders) and output sizes that depend on values (size rules).
"""

from __future__ import annotations

from typing import ClassVar

from neuron_port.rules.spec import Invalid, RuntimeRule, Valid

SHAPE_ONLY = ("--shape-only",)


class ShapeOnlyPlaceholder(RuntimeRule):
    """A shape-only run read a value it did not compute, or sized an op by its upper bound.

    ## What it does
    In `neuron-port check --shape-only` every `neuron` tensor is fake: shapes and dtypes, no storage, no
    compute. Reports each line where the program read a device value anyway (`.item()`, `bool(t)`,
    `if (x > 0).all():`, `.tolist()`, `.cpu()`, `.numpy()`): it got a placeholder (`0`, `0.0`, `False`,
    a tensor of zeros for a copy to the CPU). Also each line whose output size depends on values
    (`nonzero`, `masked_select`, boolean-mask indexing, `unique`, `torch.where(cond)`): the run sized
    it at its upper bound (every element selected, every value distinct). A line that `--size-rule`
    sets is listed in `runtime.shape_only`, not reported. And each line that splits values it did not
    compute over bins: a router's `torch.topk` of scores (its choice of experts), taken as a balanced
    choice (row t's k choices `(t * k + j) mod E`, each expert chosen as often, the remainder one more
    each to the first), and a count into bins (`torch.histc`, `torch.bincount(..., minlength=B)`: tokens
    per expert) of values still unknown, taken as even (N values over B bins, N // B each). What they
    size (a grouped matmul's groups, an eager experts loop's tokens per expert, expert sizes read with
    `.tolist()`) then totals exactly and only the split is assumed. Severity info: this is about the
    run, not about Trainium.

    ## Why is this bad?
    It is not, on Trainium; but the rest of this run may differ from a real one. A loop that stops when
    the loss is small, a NaN check, an early exit, a branch on a count, all see the placeholder, so the
    findings after that line follow the placeholder's path. An upper-bound size makes the ops after it
    (and the memory and the estimate) those of the largest case: more than the real data will select.
    An even split is the balanced routing load-balancing losses aim for: the experts' total work is
    right, but a real router's split differs from step to step, and on the device each distinct split
    is another set of shapes to compile (a data-dependent shape).

    ## Example
    ```python
    if loss.item() < 0.1:  # 0.0 in a shape-only run: always true
        break
    ```
    Use instead: nothing to change in the program. Read the findings after such a line with the
    placeholder in mind, run without `--shape-only` where the machine can, and for a data-dependent
    size give the real one: `--size-rule train.py:57=128`.

    ## Fix safety
    No automatic fix.

    ## References
    - `neuron-port check --help` (`--shape-only`, `--size-rule FILE:LINE=N`)
    - neuron_backend/EVENTS.md, "Shape-only runs" and the `shape_only` event
    - https://docs.pytorch.org/docs/stable/torch.compiler_fake_tensor.html (fake tensors: no data)
    """

    CODE = "NP911"
    NAME = "shape-only-placeholder"
    SEVERITY = "info"
    EFFORT = "low"
    MESSAGE = ("value not computed in a shape-only run: {op} returned {value} here; control flow that depends on "
               "it may differ from a real run")
    SIZE_RULE_MESSAGE: ClassVar[str] = ("data-dependent size: {op} sized at its upper bound {shape}; set --size-rule "
                                        "FILE:LINE=N for the real size")
    EVEN_SPLIT_MESSAGE: ClassVar[str] = ("data-dependent split: {op} split values it did not compute over {bins} "
                                         "bins, assumed even; the totals it sizes are exact, but on the device each "
                                         "distinct split is another set of shapes (data-dependent shapes)")
    VALID = [Valid("import torch\nx = torch.ones(4, 8, device='neuron')\ny = (x @ x.T).relu()\n",
                   check_options=SHAPE_ONLY),
             # the values a shape-only run knows (made from numbers alone) are exact, not placeholders
             Valid("import torch\nx = torch.ones(4, device='neuron')\nif x.sum().item() > 0:\n    print('positive')\n",
                   check_options=SHAPE_ONLY)]
    INVALID = [
        # a random draw: its values are not known (a tensor made from numbers alone, torch.ones, would be)
        Invalid("import torch\nx = torch.randn(4, device='neuron')\nif x.exp().sum().item() > 0:\n    print('positive')\n",
                message_contains="returned 0.0 here", check_options=SHAPE_ONLY),
        Invalid("import torch\nx = torch.randn(16, device='neuron')\nidx = torch.nonzero(x > 0)\n",
                message_contains="sized at its upper bound [16, 1]", check_options=SHAPE_ONLY),
        # tokens per expert of a router: 12 choices over 4 experts, taken as 3 each
        Invalid("import torch\nchoice = torch.randn(12, 4, device='neuron').argmax(-1)\n"
                "per_expert = torch.histc(choice.float(), bins=4, min=0, max=3)\n",
                message_contains="histc split values it did not compute over 4 bins, assumed even",
                check_options=SHAPE_ONLY),
        # a router's choice of 2 of 8 experts per token: taken as balanced, so the sizes read from it are known
        Invalid("import torch\nweights, chosen = torch.randn(12, 8, device='neuron').topk(2, dim=-1)\n"
                "sizes = torch.zeros(12, 8, device='neuron').scatter(1, chosen, 1).sum(0).tolist()\n",
                message_contains="topk split values it did not compute over 8 bins, assumed even",
                check_options=SHAPE_ONLY),
    ]
