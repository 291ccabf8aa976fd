"""PyTorch's efficient zero tensors on the simulated device.

Autograd returns ``at::_efficientzerotensor`` where a gradient is known to be zero (sgn's backward of a real
input; torch.func.vjp through a zero input): a tensor with the ZeroTensor dispatch key over a storage with no
memory. The simulator's CPU aliases dropped the key both ways, so ``torch.sgn(x).sum().backward()`` left
``x.grad`` a plain tensor of 4 elements at address 0 and the next read of it (``x.grad.cpu()``) segfaulted.
The script runs in a subprocess: a crash fails the test instead of killing pytest.
"""

from __future__ import annotations

from .conftest import PRELUDE

SCRIPT = PRELUDE + """
def grad_of(dev, fn, compiled=False):
    torch.manual_seed(0)
    x = torch.randn(3, 4).to(dev).requires_grad_()
    f = torch.compile(fn, backend="neuron" if dev == "neuron" else "aot_eager") if compiled else fn
    f(x).sum().backward()
    return x.grad

out = {}
# the issue's repro, as a user writes it
x = torch.randn(4, device="neuron", requires_grad=True)
torch.sgn(x).sum().backward()
out["repro"] = x.grad.cpu().tolist()
out["repro_is_zero_tensor"] = x.grad._is_zerotensor()

cpu, dev = grad_of("cpu", torch.sgn), grad_of("neuron", torch.sgn)
uses = {  # what a training loop does with a parameter's gradient
    "cpu": lambda g: g.cpu(), "item": lambda g: torch.tensor(g[1, 2].item()), "add": lambda g: g + 1,
    "mul": lambda g: g * 3, "clone": lambda g: g.clone(), "view": lambda g: g.t().reshape(-1)[2:],
    "norm": lambda g: torch.linalg.vector_norm(g), "float64": lambda g: g.double(),
    "zeros_like": lambda g: torch.zeros_like(g) + 2, "stack": lambda g: torch.stack([g, g + 1]),
}
out["uses"] = {k: torch.equal(f(dev).cpu(), f(cpu)) for k, f in uses.items()}
def clip(g):
    p = torch.nn.Parameter(torch.ones_like(g.clone()))
    p.grad = g
    torch.nn.utils.clip_grad_norm_([p], 1.0)

errors = []  # a zero tensor is immutable: in place, and so clip_grad_norm_ of it, raise on the CPU too
for g in (cpu, dev):
    for f in (lambda: g.add_(1), lambda: clip(g)):
        try:
            f()
            errors.append(None)
        except RuntimeError as e:
            errors.append(str(e).splitlines()[0])
out["inplace_errors"] = errors

# compiled on neuron vs the same graph on the CPU
fn = lambda t: torch.sgn(t) * 3 + torch.sgn(t).abs() * t
out["compiled_equal"] = torch.equal(grad_of("neuron", fn, True).cpu(), grad_of("cpu", fn, True))

# optimizers over zero gradients, two steps
steps = {}
for name in ("SGD", "AdamW"):
    res = []
    for d in ("cpu", "neuron"):
        torch.manual_seed(0)
        w = torch.nn.Parameter(torch.randn(4).to(d))
        opt = torch.optim.SGD([w], lr=0.1, momentum=0.9) if name == "SGD" else torch.optim.AdamW([w], lr=0.1)
        for _ in range(2):
            torch.sgn(w).sum().backward()
            opt.step()
            opt.zero_grad()
        res.append(w.detach().cpu())
    steps[name] = torch.equal(*res)
out["optimizers_equal"] = steps

# created on the device directly (torch.func.vjp through a zero input): no device memory, CPU numbers
before = torch.neuron.memory_allocated()
z = torch._efficientzerotensor((1 << 16, 1 << 16), device="neuron")
out["zero_tensor_bytes"] = torch.neuron.memory_allocated() - before
out["zero_tensor"] = [str(z.device), z._is_zerotensor(), z[7, :3].cpu().tolist()]
vjps = []
for d in ("cpu", "neuron"):
    torch.manual_seed(0)
    lin = torch.nn.Linear(3, 2).to(d)
    y, vjp = torch.func.vjp(lin, torch._efficientzerotensor((4, 3), device=d))
    vjps.append((y.cpu(), vjp(torch.ones(4, 2, device=d))[0].cpu()))
out["vjp_equal"] = all(torch.equal(a, b) for a, b in zip(*vjps))
result(out)
"""


def test_efficient_zero_tensors_behave_as_on_cpu(run_sim):
    r = run_sim(SCRIPT, timeout=300)
    assert r.proc.returncode == 0, (
        f"exit status {r.proc.returncode} (-11: segfault)\nstdout:\n{r.proc.stdout[-2000:]}\nstderr:\n{r.proc.stderr[-4000:]}")
    out = r.result
    assert out["repro"] == [0.0] * 4 and out["repro_is_zero_tensor"] is True  # as on the CPU
    assert out["uses"] == {k: True for k in out["uses"]}, out["uses"]
    errors = out["inplace_errors"]
    assert errors[:2] == errors[2:] and all("ZeroTensors are immutable" in (e or "") for e in errors), errors
    assert out["compiled_equal"] is True
    assert out["optimizers_equal"] == {"SGD": True, "AdamW": True}
    assert out["zero_tensor_bytes"] == 0  # 16 GiB of float32 zeros take no device memory, as on CUDA
    assert out["zero_tensor"] == ["neuron:0", True, [0.0, 0.0, 0.0]]
    assert out["vjp_equal"] is True
