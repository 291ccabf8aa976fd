"""Decisions by dependence, not by site (issue 34, item 1; rules/helpers/decision_groups.py): each repro of
the issue's 1(a)-(f) is a small project a user rewrites with `neuron-port rewrite .` and then runs with
`neuron-port check . -- python r.py` on the simulator. Either everything tied together is ported and the
program runs on the neuron device, or it is kept together, reported at its lines, and the program runs as
the original does on a host without CUDA. Never half of a group."""

from __future__ import annotations

import textwrap

import pytest

from tests.conftest import run_cli, simulator_env
from neuron_port.api import Settings, rewrite_source

REPROS = {
    # (a) a format built under one availability test, filled under another; the module's own print wraps
    # the builtin (a distributed logger's idiom)
    "a_logger_format": ("""
        import builtins, torch
        _print = builtins.print
        def print(*a, **k):
            _print(*a, **k)
        def log_every(step):
            fmt = "step {step}"
            if torch.cuda.is_available():
                fmt += " max mem: {memory:.0f}"
            if torch.cuda.is_available():
                print(fmt.format(step=step, memory=torch.cuda.max_memory_allocated() / 2**20))
            else:
                print(fmt.format(step=step))
        log_every(0)
        """, {}),
    # (b) a state machine over three methods; one of them assigns a local named `cuda_info`
    "b_memory_trace": ("""
        import torch
        class MemoryTrace:
            def __enter__(self):
                if torch.cuda.is_available():
                    self.begin = torch.cuda.memory_allocated()
                return self
            def __exit__(self, *exc):
                if torch.cuda.is_available():
                    self.peak = torch.cuda.max_memory_allocated()
                    cuda_info = torch.cuda.memory_stats()
                    self.active = cuda_info["active_bytes.all.peak"]
            def report(self):
                if torch.cuda.is_available():
                    print("peak", self.peak - self.begin, self.active)
        with MemoryTrace() as m:
            x = torch.ones(4)
        m.report()
        """, {}),
    # (c) a helper's device-type result, and the assert that checks it in a function whose rest calls
    # another module of the project
    "c_device_type_assert": ("""
        import torch
        from model import build
        def get_device_type():
            return "cuda" if torch.cuda.is_available() else "cpu"
        def main(device_type):
            assert device_type in ["cuda", "mps", "cpu"]
            model = build().to(device_type)
            print("out", model(torch.ones(1, 2, device=device_type)).shape)
        main(get_device_type())
        """, {"model.py": "import torch\ndef build():\n    return torch.nn.Linear(2, 2)\n"}),
    # (d) a guard over set_device(local_rank) in a file without init_process_group: ported since 212b905 (a
    # plain rename; it was kept while NP502's removal was unsafe there); the unsafe body is d_unsafe_body_guard
    "d_set_device_guard": ("""
        import os, torch
        local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        if torch.cuda.is_available():
            torch.cuda.set_device(local_rank)
        print("rank", local_rank, torch.ones(2).sum().item())
        """, {}),
    # (d') a guard over a body whose own fix is unsafe (`.cuda(dev)`: `.to(None)` does not move)
    "d_unsafe_body_guard": ("""
        import torch
        dev = None
        x = torch.ones(2)
        if torch.cuda.is_available():
            x = x.cuda(dev)
        print("sum", x.sum().item())
        """, {}),
    # (e) the guard's else raises "CUDA was not found": the flip avoids that branch, it does not enter it
    "e_else_raises": ("""
        import torch
        def setup(r):
            if torch.cuda.is_available():
                torch.cuda.set_device(r)
                backend = "nccl"
            else:
                raise NotImplementedError("CUDA was not found")
            return backend
        print("backend", setup(0))
        """, {}),
    # (f) the device-selection helper reads p.name / p.total_memory; another function's p is a parameter
    "f_scoped_reads": ("""
        import torch
        def pick_device():
            if torch.cuda.is_available():
                for i in range(torch.cuda.device_count()):
                    p = torch.cuda.get_device_properties(i)
                    print(p.name, p.total_memory)
                return torch.device("cuda")
            return torch.device("cpu")
        def count(model):
            return sum(p.numel() for p in model.parameters())
        x = torch.ones(2, device=pick_device())
        print("ran on", x.device.type, count(torch.nn.Linear(2, 2)))
        """, {}),
    # (g) Hogwild: the chosen device's model is shared between processes (NP513: neuron tensors have no IPC),
    # so the choice and the test that makes it stay CUDA's, and the program runs on the CPU as without CUDA
    "g_hogwild_shared_model": ("""
        import torch
        import torch.multiprocessing as mp
        def train(rank, model, device):
            x = torch.randn(8, 4, device=device)
            model(x).pow(2).mean().backward()
            print("rank", rank, "ran on", x.device.type)
        if __name__ == "__main__":
            use_cuda = torch.cuda.is_available()
            if use_cuda:
                device = torch.device("cuda")
            else:
                device = torch.device("cpu")
            model = torch.nn.Linear(4, 1).to(device)
            model.share_memory()
            procs = [mp.Process(target=train, args=(r, model, device)) for r in range(2)]
            for p in procs:
                p.start()
            for p in procs:
                p.join()
        """, {}),
}

# what the rewritten program prints when it runs on the neuron device; None: the group is kept, and the
# program runs as the original does without CUDA, its kept tests reported at these lines
# (d: set_device(local_rank) is a plain rename since 212b905, TorchNeuron's core being neuron:<LOCAL_RANK>; it
# was kept while the removal NP502 offered was unsafe in a file without init_process_group)
PORTED = {"a_logger_format": "max mem:", "b_memory_trace": "peak", "d_set_device_guard": "rank 0",
          "e_else_raises": "backend neuron", "f_scoped_reads": "ran on neuron"}
KEPT_LINES = {"c_device_type_assert": (4, 6), "d_unsafe_body_guard": (4, 5), "g_hogwild_shared_model": (8, 10, 14)}


def _project(tmp_path, name):
    source, others = REPROS[name]
    (tmp_path / ".git").mkdir()
    (tmp_path / "r.py").write_text(textwrap.dedent(source).lstrip("\n"))
    for path, text in others.items():
        (tmp_path / path).write_text(text)
    return tmp_path


@pytest.mark.parametrize("name", sorted(REPROS))
def test_repro_runs_after_the_default_rewrite(tmp_path, name, sim_build):
    project = _project(tmp_path, name)
    original = (project / "r.py").read_text()
    rewritten = run_cli("rewrite", ".", cwd=project)
    assert rewritten.returncode in (0, 1), rewritten.stderr
    code = (project / "r.py").read_text()
    checked = run_cli("check", ".", "--exit-zero", "--", "python", "r.py", cwd=project, env=simulator_env())
    assert checked.returncode == 0, checked.stdout[-3000:] + checked.stderr[-3000:]
    if name in PORTED:
        assert "cuda" not in code.replace("cuda_info", ""), code  # the whole group ported
        assert PORTED[name] in checked.stdout
        return
    # kept together: the file is as it was, and each kept test is reported at its line
    assert code == original
    for line in KEPT_LINES[name]:
        assert f"r.py:{line}:" in checked.stdout, checked.stdout[-3000:]


def _rewrite(source: str, unsafe: bool = False) -> tuple[str, list]:
    return rewrite_source(textwrap.dedent(source).lstrip("\n"), path="train.py",
                          settings=Settings(unsafe_fixes=unsafe))


def test_a_kept_group_is_flipped_whole_with_unsafe_fixes():
    code, _ = _rewrite(REPROS["d_unsafe_body_guard"][0], unsafe=True)
    assert "torch.neuron.is_available()" in code and "x = x.to(dev)" in code
    code, _ = _rewrite(REPROS["c_device_type_assert"][0], unsafe=True)
    assert code.count('"neuron"') == 2 and "torch.neuron.is_available()" in code


def test_tests_that_share_no_state_are_decided_apart():
    # two functions, each with its own local: the unsafe one (an unknown package) keeps only itself
    code, findings = _rewrite("""
        import torch, somepkg
        def a():
            if torch.cuda.is_available():
                n = torch.cuda.device_count()
                print(n)
        def b():
            if torch.cuda.is_available():
                n = somepkg.probe()
                print(n)
        """)
    assert code.count("torch.neuron.is_available()") == 1 and "torch.neuron.device_count()" in code
    assert [f.line for f in findings if not f.fix.applied] == [7]


def test_a_kept_test_keeps_the_code_it_guards_unedited():
    # the capability read keeps the test (Trainium has no .major); the device_count beside it stays CUDA's
    code, findings = _rewrite("""
        import torch
        if torch.cuda.is_available():
            n = torch.cuda.device_count()
            major = torch.cuda.get_device_properties(0).major
            print(n, major)
        """)
    assert "neuron" not in code
    count = next(f for f in findings if f.line == 3)
    assert not count.fix.available and "tied to" in count.message


ATTEND_UNPACKED = '''
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


class Attend(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.cpu_backends = [SDPBackend.MATH]
        self.cuda_backends = None
        if not torch.cuda.is_available():
            return
        if torch.cuda.get_device_properties(torch.device("cuda")).major >= 8:
            self.cuda_backends = [SDPBackend.FLASH_ATTENTION]
        else:
            self.cuda_backends = [SDPBackend.EFFICIENT_ATTENTION]

    def forward(self, q, k, v):
        _, heads, length, _, is_cuda, device = *q.shape, q.is_cuda, q.device
        backends = self.cuda_backends if is_cuda else self.cpu_backends
        with sdpa_kernel(backends):
            return F.scaled_dot_product_attention(q, k, v)


device = "cuda" if torch.cuda.is_available() else "cpu"
q = torch.randn(1, 2, 4, 8, device=device)
print("attended on", q.device.type, Attend()(q, q, q).shape)
'''


def test_a_device_test_unpacked_into_a_name_is_decided_with_what_that_name_picks(tmp_path, sim_build):
    """A diffusion library's attention: `q.is_cuda` unpacked beside the shape picks the CUDA backends, set
    only under an availability test that is not a safe flip (it guards a compute-capability read). Renamed on
    its own, a neuron tensor picked None and the program crashed; now it is decided with that test, and the
    program runs on the device with the CPU backends."""
    (tmp_path / ".git").mkdir()
    (tmp_path / "r.py").write_text(ATTEND_UNPACKED.lstrip("\n"))
    rewritten = run_cli("rewrite", ".", cwd=tmp_path)
    assert rewritten.returncode in (0, 1), rewritten.stderr
    code = (tmp_path / "r.py").read_text()
    assert "q.is_cuda, q.device" in code and 'device = "neuron" if torch.neuron.is_available()' in code, code
    assert "r.py:19:58: NP104" in rewritten.stdout and "it guards `self.cuda_backends`" in rewritten.stdout
    checked = run_cli("check", ".", "--exit-zero", "--", "python", "r.py", cwd=tmp_path, env=simulator_env())
    assert checked.returncode == 0, checked.stdout[-3000:] + checked.stderr[-3000:]
    assert "attended on neuron torch.Size([1, 2, 4, 8])" in checked.stdout, checked.stdout[-3000:]
