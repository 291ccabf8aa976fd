"""NP901 / NP902 / NP910: eager execution costs seen at run time: ops that fell back to the CPU, shapes
that keep changing after warm-up (one NEFF compile per new shape), and an uneven last batch.
"""

from __future__ import annotations

from neuron_port.rules.spec import Invalid, RuntimeRule, Valid


class CpuFallback(RuntimeRule):
    """An op that TorchNeuron does not run natively fell back to the CPU.

    ## What it does
    Reports every ATen op that reached the simulated neuron device without a native TorchNeuron
    implementation (per the op policy in `rules/op_policy.toml`), with the number of calls and the
    user line that issued it. Complex signatures of ops without a framework decomposition count too
    (`TORCH_NEURONX_COMPLEX_DECOMPOSE` on: "other operations follow the existing fallback policy"),
    e.g. `torch.fft.rfft` or a complex `cumsum`.

    ## Why is this bad?
    On Trainium such an op copies its inputs to the host, runs on the CPU and copies the results back:
    correct, but each call costs host round trips (0.7-3.5 ms per transfer measured on trn2) and breaks
    Adaptive Eager Execution's fusion.

    ## Example
    ```python
    idx = torch.multinomial(probs, num_samples=1)  # sampling on the device
    ```
    Use instead: move the op off the hot path, replace it with supported ops (e.g. Gumbel-max:
    `torch.argmax(logits - torch.log(-torch.log(torch.rand_like(logits))), -1)`), or write an NKI kernel
    registered as a PyTorch op.

    ## Fix safety
    No automatic fix: the replacement depends on the op.

    ## References
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/best-practices-pytorch-neuron.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/api/index.html, https://github.com/parmoham-aws/test-repo-parmoham/blob/98154b86/csrc/core/NeuronBindings.cpp (CPU fallback), https://github.com/parmoham-aws/test-repo-parmoham/blob/98154b86/tools/list-implemented-ops (native ops)
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/best-practices-pytorch-neuron.html
    """

    CODE = "NP901"
    NAME = "cpu-fallback"
    SEVERITY = "warning"
    EFFORT = "medium"
    MESSAGE = "`{op}` falls back to the CPU on Trainium ({calls} call(s) here)"
    VALID = [Valid("import torch\nx = torch.ones(4, device='neuron')\nprint((x * 2).sum().item())\n")]
    INVALID = [Invalid(
        "import torch\np = torch.ones(2, 4, device='neuron') / 4\n"
        "print(torch.multinomial(p, num_samples=1).cpu())\n",
        message_contains="multinomial",
    )]


class EagerShapeVariance(RuntimeRule):
    """An op kept getting new shapes (or new values of a Python number) after warm-up: each is another eager NEFF compile.

    ## What it does
    Records when each (op, shapes, dtypes, scalars) signature is first seen, in steps, per op, line
    and module. On Trainium each distinct signature compiles a NEFF once and the cache serves it after
    that, so every signature of the first steps is warm-up: a one-time cost, however many layers share
    the line (an `nn.Sequential`, the `loss.backward()` line, a weight-init loop, `zero_grad`). This
    rule reports only a dimension that keeps changing after warm-up: it names the dimension, its values
    with the step at which each first appeared, the steps after warm-up that brought new ones, and
    padding buckets that would bound the compiles.

    Steps and phases: the run is cut into phases where the outermost module is called in another mode
    (grad enabled or not, `model.train()` or `model.eval()`). A phase in which optimizer steps complete is
    training: a step ends at every `optimizer.step()` (PyTorch's global optimizer step hook; with several
    optimizers, the one that stepped most), over all training phases together. An evaluation (its calls
    take DataLoader batches) or a generation (they do not: a sampling or decoding loop) is judged on its
    own clock, one step per call of its outermost module, with its own warm-up: a KV cache that grows
    with every generated token is reported in the generation, after training. A single call under
    `no_grad` inside training (a frozen teacher) belongs to its training step. A script with neither
    modules nor an optimizer counts the k-th new signature of an op at a line as its step k.

    Warm-up: the first two steps (0 and 1). Optimizer state is created lazily in the first `step()`,
    and gradients accumulated into existing `.grad` tensors (or zeroed with
    `zero_grad(set_to_none=False)`) first appear in the second step.

    Reported: a dimension of one op at one line and module that took new values at two or more steps
    after warm-up, or at one step after warm-up when it already changed between steps 0 and 1, or three
    or more new values inside one step after warm-up when the line had run at an earlier step (a loop
    over images whose box counts differ: many compiles in one step; the message says how many). A line
    that first runs late (a loop over the parameters that starts at step 5) is that line's warm-up.
    Not reported: new signatures at a single later step (a one-time compile, counted in
    `runtime.shapes.after_warmup`); a smaller last batch (NP910).

    Scalars: TorchNeuron's eager kernels lift a Python int or float argument to a 0-d tensor input and
    key the NEFF cache on its type, not its value ("For scalars, include only type (not value). Values
    are runtime parameters, not compile-time constants": torch_neuronx/kernels/base.py:146; the lifting:
    python_ops/processors/argument_processor.py:106-109; source mirror
    https://github.com/parmoham-aws/test-repo-parmoham/tree/98154b86, docs/sources/scalar-arguments.md).
    So a learning rate from a scheduler (`lr` of `_fused_adamw_`) or Adam's bias corrections (the
    `_foreach_*.ScalarList` calls of a foreach Adam) reuse one NEFF; the simulator keys them the same
    way. The exceptions are the arguments an op's TorchNeuron registration declares static: their value
    is compiled in (`alpha` of `add_`/`sub_`/`_foreach_add_`, `exponent` of `pow`, `p` of dropout, `eps`
    of the norms: rules/op_policy.toml [static_scalars]). When no shape kept changing but such an
    argument did, by the same test, the message says so, names the argument and the fix: pass the
    number in a tensor position (`p.add_(g * -lr)` rather than `p.add_(g, alpha=-lr)`) or keep it
    fixed. The case met in training: `torch.optim.SGD` (foreach, the default on the device) with a
    scheduler steps with `_foreach_add_(params, grads, alpha=-lr)`, a new `alpha` every step.
    The finding is at the user's line that issued the op (`optimizer.step()`, `scaler.step(optimizer)`).

    In the estimate, the signatures of the scalar message in the training steps after warm-up are compiles
    every steady step pays (a scheduled lr never repeats: no cache serves it): counted per step
    (`compile.steady_compiles_per_step`) and priced in the step time (`eager_neff_compile_seconds` each).
    Shapes stay first-run compiles: their values are bounded and each is cached once seen.

    ## Why is this bad?
    TorchNeuron compiles each new signature to a NEFF, which takes seconds (minutes for whole graphs).
    A sequence length that changes with the data, or a KV cache that grows every step, compiles again
    on every new length for as long as the job runs.

    ## Example
    ```python
    T = random.randint(16, 512)
    x = tokens[:, :T]  # every new T compiles again
    ```
    Use instead: pad to a few buckets (`T = bucket(T)`, e.g. powers of two) and mask the padding; for
    a KV cache, preallocate it at the maximum length and write into it.
    ```python
    for p in params:
        p.add_(p.grad, alpha=-scheduler.get_last_lr()[0])  # `alpha` is compiled in: new NEFF each step
    ```
    Use instead: `p.add_(p.grad * -lr)` (a number in a tensor position is a runtime input).

    ## Fix safety
    No automatic fix: padding needs masks that only the model author can place.

    ## References
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/best-practices-pytorch-neuron.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/env-vars.html (eager: each new (op, shape) compiles once, then the
      cache serves it) and https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/compile/reference-torch-compile.html
    - neuron_backend/EVENTS.md, "Steps and modules"
    """

    CODE = "NP902"
    NAME = "eager-shape-variance"
    SEVERITY = "warning"
    EFFORT = "medium"
    MESSAGE = ("`{op}` kept getting new shapes after warm-up{phase}, at steps {steps}: {dim}; "
               "{n} eager NEFF compiles here, {late} after warm-up; pad to buckets {buckets}")
    # The same cost from a Python number in the signature (shape_timeline's ``scalar`` kind)
    SCALAR_MESSAGE = ("`{op}` got a new value of {name} after warm-up{phase}, at steps {steps}: {dim}; TorchNeuron "
                      "compiles this argument into the op (static in its registration), so each new value is a "
                      "new NEFF: {n} NEFF compiles here, {late} after warm-up; {fix}")
    VALID = [
        Valid("import torch\nfor _ in range(3):\n    x = torch.ones(2, 8, device='neuron') * 2\n"),
        Valid("""
            import torch
            from torch import nn

            model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 4))
            model = model.to("neuron")
            for p in model.parameters():  # one line, many shapes: all in warm-up
                nn.init.normal_(p, std=0.02)
            # a scheduled lr: Adam's lr and bias corrections are runtime inputs of its eager ops (one NEFF)
            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
            scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: (s + 1) / 10)
            for step in range(6):
                x = torch.randn(16, 8, device="neuron")
                loss = model(x).square().mean()
                loss.backward()
                optimizer.step()
                optimizer.zero_grad(set_to_none=False)
                scheduler.step()
            """),
    ]
    INVALID = [
        Invalid("import torch\nfor n in (8, 16, 32):\n    x = torch.ones(2, n, device='neuron') * 2\n",
                message_contains="dim 1"),
        Invalid("""
            import torch
            from torch import nn

            model = nn.Sequential(nn.Embedding(64, 16), nn.Linear(16, 64)).to("neuron")
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for step in range(8):
                T = 8 + 4 * step  # the sequence length grows with the data
                tokens = torch.randint(64, (4, T), device="neuron")
                logits = model(tokens)
                loss = nn.functional.cross_entropy(logits.flatten(0, 1), tokens.flatten())
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
            """, message_contains="at steps 2, 3, 4, 5, 6, 7: dim 1"),
        Invalid("""
            import torch
            from torch import nn

            model = nn.Linear(8, 4).to("neuron")
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: (s + 1) / 10)
            for step in range(6):
                model(torch.randn(16, 8, device="neuron")).square().mean().backward()
                optimizer.step()
                optimizer.zero_grad()
                scheduler.step()
            """, message_contains="`aten::_foreach_add_.List` got a new value of `alpha` after warm-up, at steps 2, 3, 4, 5"),
    ]


class UnevenLastBatch(RuntimeRule):
    """The last batch of an epoch is smaller than the others: its shapes compile once more.

    ## What it does
    Reports a step after warm-up whose new signatures are all earlier ones with one size shrunk by a
    common factor (a batch of 4 rows instead of 16, and 4*T instead of 16*T where the batch is
    flattened), at one or two steps of a training or evaluation phase, when a `DataLoader` of the run
    yielded a batch smaller than its `batch_size` by that factor: the last, partial batch of a loader
    without `drop_last=True` (once for the training loader, once for the evaluation loader). The finding
    names the line that iterated the loader, points at the first line that ran the smaller batch and
    names how many other lines compiled for it. Steps, phases and warm-up are defined as for NP902.
    Smaller inputs that no DataLoader yielded are not reported: a generation prompt, a sampling batch,
    a short table of timesteps, the ragged last chunk of a sequence cut by hand.

    ## Why is this bad?
    Mildly: every op of the forward and backward pass compiles a NEFF again for the smaller batch, once
    per run (the cache serves the next epochs). On a large model that is minutes of compilation at the
    end of the first epoch, and a job that restarts on a fresh cache pays it again.

    ## Example
    ```python
    loader = DataLoader(dataset, batch_size=16, shuffle=True)  # len(dataset) % 16 != 0
    ```
    Use instead, for training: `DataLoader(..., drop_last=True)`, or pad the last batch to the full batch
    size (and mask the padded rows in the loss). For an evaluation, pad the last batch and mask the padded
    rows in the metric: `drop_last=True` would leave samples out of it. The message says which.

    ## Fix safety
    No automatic fix: dropping samples changes what the model sees; padding needs a mask.

    ## References
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/best-practices-pytorch-neuron.html (each new (op, shapes) compiles once)
    - https://docs.pytorch.org/docs/2.13/data.html#torch.utils.data.DataLoader (drop_last)
    """

    CODE = "NP910"
    NAME = "uneven-last-batch"
    SEVERITY = "info"
    EFFORT = "low"
    MESSAGE = ("the last batch of the DataLoader iterated at {loader} is smaller ({size} instead of {normal}, first at "
               "step {step}{phase}): {n} more eager NEFF compile(s) here{others}; {advice}")
    VALID = [Valid("""
        import torch
        from torch import nn
        from torch.utils.data import DataLoader, TensorDataset

        data = TensorDataset(torch.randn(40, 8), torch.randint(3, (40,)))
        loader = DataLoader(data, batch_size=8, drop_last=True)  # 40 % 8 == 0 anyway
        model = nn.Linear(8, 3).to("neuron")
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for epoch in range(2):
            for x, y in loader:
                loss = nn.functional.cross_entropy(model(x.to("neuron")), y.to("neuron"))
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
        """)]
    INVALID = [Invalid("""
        import torch
        from torch import nn
        from torch.utils.data import DataLoader, TensorDataset

        data = TensorDataset(torch.randn(42, 8), torch.randint(3, (42,)))
        loader = DataLoader(data, batch_size=8)  # 5 batches of 8, then one of 2
        model = nn.Linear(8, 3).to("neuron")
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for epoch in range(2):
            for x, y in loader:
                loss = nn.functional.cross_entropy(model(x.to("neuron")), y.to("neuron"))
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
        """, message_contains="2 instead of 8")]
