"""NP106 ``map-location-cuda``: ``torch.load(..., map_location=lambda storage, loc: storage.cuda())``."""

from __future__ import annotations

import libcst as cst

from neuron_port.rules.device_placement.common import storage_lambda_call
from neuron_port.rules.helpers.calls import arg_named
from neuron_port.rules.helpers.names import source_of
from neuron_port.rules.helpers.nodes import expr
from neuron_port.rules.spec import FRAGMENT, Invalid, PythonRule, Valid


class MapLocationCuda(PythonRule):
    """Rewrites ``map_location=lambda storage, loc: storage.cuda()`` to a neuron device.

    ## What it does
    Finds the ``lambda storage, loc: storage.cuda(...)`` idiom (the ``map_location`` of ``torch.load``)
    and replaces the lambda by the device it moves to: ``"neuron"``, ``"neuron:0"``, ``f"neuron:{i}"``
    (or ``torch.accelerator.current_accelerator()`` on the accelerator target). ``storage.cuda(local_rank)``
    becomes ``f"neuron:{local_rank}"``: under ``torchrun`` the process's NeuronCore is
    ``neuron:<LOCAL_RANK>`` (see NP101). ``map_location``
    strings and ``torch.device`` values are NP101's; the keys of a ``map_location`` dict (the device the
    checkpoint was saved on) are left alone on purpose.

    ## Why is this bad?
    ``storage.cuda()`` raises on a Trainium host, and rewriting it to ``storage.to("neuron")`` is not
    an option: ``UntypedStorage.to`` takes ``device`` as a keyword-only argument.

    ## Example
    ```python
    ckpt = torch.load(path, map_location=lambda storage, loc: storage.cuda())
    ```
    Use instead:
    ```python
    ckpt = torch.load(path, map_location="neuron")
    ```

    ## Fix safety
    Safe: ``map_location`` accepts a device string and the lambda did the same move for every storage.
    An index is kept (``neuron:<local_rank>`` is the process's core under ``torchrun``). A
    ``storage.cuda(0, non_blocking=True)`` (other arguments) is reported only.

    ## References
    - https://docs.pytorch.org/docs/stable/generated/torch.load.html
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/guides/torch-distributed.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/tutorials/tutorial-torch-distributed.html
    """

    CODE = "NP106"
    NAME = "map-location-cuda"
    SEVERITY = "error"
    FIX_AVAILABILITY = "sometimes"
    EFFORT = "low"
    MESSAGE = "`storage.cuda()` in map_location fails on Trainium: use `map_location={new}`"
    TRIGGERS = (r"\.cuda\(",)

    VALID = [
        Valid("ckpt = torch.load(p, map_location=lambda storage, loc: storage)\n"),
        Valid("ckpt = torch.load(p, map_location='neuron')\n"),
    ]
    INVALID = [
        Invalid(
            "ckpt = torch.load(p, map_location=lambda storage, loc: storage.cuda())\n",
            'ckpt = torch.load(p, map_location="neuron")\n',
            not_runnable=FRAGMENT,
        ),
        Invalid(
            "ckpt = torch.load(p, map_location=lambda s, l: s.cuda(args.gpu))\n"
            "c2 = torch.load(q, lambda s, l: s.cuda(1))\n"
            "c3 = torch.load(r, map_location=lambda s, l: s.cuda(dev_index))\n",
            'ckpt = torch.load(p, map_location=f"neuron:{args.gpu}")\nc2 = torch.load(q, "neuron:1")\n'
            'c3 = torch.load(r, map_location=f"neuron:{dev_index}")\n',
            not_runnable=FRAGMENT,
        ),
        Invalid(
            "import torch\nckpt = torch.load(p, map_location=lambda storage, loc: storage.cuda())\n",
            "import torch\nckpt = torch.load(p, map_location=torch.accelerator.current_accelerator())\n",
            target="accelerator",
            not_runnable=FRAGMENT,
        ),
        Invalid(
            "ckpt = torch.load(p, map_location=lambda storage, loc: storage.cuda(0, non_blocking=True))\n",
            None,  # storage.cuda() with other arguments: reported only
            message_contains="use a neuron device string",
        ),
        Invalid(
            """
            import torch

            torch.save({'w': torch.ones(2)}, 'ckpt.pt')
            ckpt = torch.load('ckpt.pt', map_location=lambda storage, loc: storage.cuda())
            w = ckpt['w'] * 2
            """,
            """
            import torch

            torch.save({'w': torch.ones(2)}, 'ckpt.pt')
            ckpt = torch.load('ckpt.pt', map_location="neuron")
            w = ckpt['w'] * 2
            """,
            runs=True,
        ),
        Invalid(
            """
            import torch
            torch.save({'w': torch.ones(2)}, 'ckpt.pt')
            a = torch.load('ckpt.pt', map_location=lambda storage, loc: storage.cuda(0))
            b = torch.load('ckpt.pt', lambda storage, location: storage.cuda())
            print(a['w'].device, b['w'].device)
            """,
            """
            import torch
            torch.save({'w': torch.ones(2)}, 'ckpt.pt')
            a = torch.load('ckpt.pt', map_location="neuron:0")
            b = torch.load('ckpt.pt', "neuron")
            print(a['w'].device, b['w'].device)
            """,
            runs=True,
        ),
    ]

    def visit_Lambda(self, node: cst.Lambda) -> None:
        call = storage_lambda_call(node)
        if call is not None:
            self._lambda(node, call)

    def _lambda(self, node: cst.Lambda, call: cst.Call) -> None:
        device_arg = arg_named(call, "device", 0)
        others = [a for a in call.args if a is not device_arg]
        if others or any(a.star for a in call.args):
            self.report(node, "`storage.cuda(...)` in map_location fails on Trainium: use a neuron device string")
            return
        imports: tuple = ()
        if self.context.target == "accelerator":
            torch_name, imports = self.context.torch_module_name()
            if device_arg is None:
                new = f"{torch_name}.accelerator.current_accelerator()"
            else:
                new = (f"{torch_name}.device({torch_name}.accelerator.current_accelerator().type, "
                       f"{source_of(device_arg.value)})")
        elif device_arg is None:
            new = '"neuron"'
        elif isinstance(device_arg.value, cst.Integer):
            new = f'"neuron:{device_arg.value.value}"'
        elif isinstance(device_arg.value, (cst.Name, cst.Attribute)):
            new = f'f"neuron:{{{source_of(device_arg.value)}}}"'
        else:
            torch_name, imports = self.context.torch_module_name()
            new = f'{torch_name}.device("neuron", {source_of(device_arg.value)})'
        replacement = expr(new)
        message = self.MESSAGE.format(new=new)
        self.report(node, message, replacement=replacement, imports=imports, safety="safe")
