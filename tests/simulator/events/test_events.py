"""The per-process events file survives an uncaught exception and SIGTERM."""

import json
import signal

import pytest

from ..conftest import PRELUDE

pytestmark = pytest.mark.slow


def _valid_jsonl(path):
    lines = path.read_text().splitlines()
    return [json.loads(line) for line in lines]


def test_events_after_uncaught_exception(run_sim):
    r = run_sim(PRELUDE + """
torch.linalg.qr(torch.randn(3, 3, device="neuron"))
raise ValueError("user bug")        # L-raise
""")
    assert r.proc.returncode == 1 and "ValueError: user bug" in r.proc.stderr
    ev = _valid_jsonl(r.event_files()[0])
    head = ev[0]
    assert head["status"] == "exception"
    assert head["exception"]["type"] == "ValueError"
    assert head["exception"]["site"]["line"] == r.line_of("# L-raise")
    assert any(e["kind"] == "fallback" and "linalg_qr" in e["op"] for e in ev)
    assert ev[-1]["complete"] is True


def test_events_after_sigterm(run_sim):
    r = run_sim(PRELUDE + """
import signal
torch.linalg.qr(torch.randn(3, 3, device="neuron"))
os.kill(os.getpid(), signal.SIGTERM)
import time; time.sleep(30)
""")
    assert r.proc.returncode == -signal.SIGTERM
    ev = _valid_jsonl(r.event_files()[0])
    assert ev[0]["status"] == "sigterm"
    assert any(e["kind"] == "fallback" and "linalg_qr" in e["op"] for e in ev)


def test_events_file_name_has_rank_and_pid(run_sim):
    r = run_sim(PRELUDE + "torch.ones(2, device='neuron').sum(); result({'pid': os.getpid()})", env={"RANK": "3"})
    files = r.event_files()
    assert [f.name for f in files] == [f"neuron-events-rank3-pid{r.result['pid']}.jsonl"]
    assert r.events()[0]["rank"] == 3


def test_events_after_hard_crash_keep_last_snapshot(run_sim):
    """SIGSEGV cannot run Python: the file holds the last periodic snapshot (status running)."""
    r = run_sim(PRELUDE + """
import ctypes, time
torch.linalg.qr(torch.randn(3, 3, device="neuron"))
time.sleep(1.2)
torch.randn(7, 7, device="neuron").cos()     # a new signature after the flush interval -> snapshot
ctypes.string_at(0)                          # SIGSEGV
""")
    assert r.proc.returncode == -signal.SIGSEGV
    ev = _valid_jsonl(r.event_files()[0])
    assert ev[0]["status"] == "running" and ev[-1]["complete"] is False
    assert any(e["kind"] == "fallback" and "linalg_qr" in e["op"] for e in ev)


def test_first_sightings_carry_the_step_clock_and_the_module(run_sim):
    """Each new signature records the optimizer step / outermost forward count at which it was first
    seen and the module running it; the summary holds the final clock. Repeats record nothing."""
    r = run_sim(PRELUDE + """
from torch import nn
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
        self.loose = [nn.Linear(4, 4)]          # not a registered submodule
    def forward(self, x):
        return self.loose[0](self.body(x)) * 2  # MARK-forward
model = Net().to("neuron")
model.loose[0].to("neuron")
loss_fn = nn.MSELoss()                          # a second outermost module, called once per step
opt = torch.optim.SGD(model.parameters(), lr=0.1)
cpu_transform = nn.Sequential(nn.Flatten(0), nn.Unflatten(0, (-1, 8)))  # data pipeline on the CPU
for step in range(4):
    B = 5 if step < 3 else 2
    x = torch.cat([cpu_transform(torch.randn(1, 8)) for _ in range(B)]).to("neuron")
    loss = loss_fn(model(x), torch.zeros(B, 4, device="neuron"))  # MARK-call
    loss.backward()
    opt.step()
with torch.no_grad():
    for _ in range(3):
        model(torch.randn(7, 8, device="neuron"))
""")
    assert r.proc.returncode == 0, r.proc.stderr[-3000:]
    compiles = r.kind("eager_compile")
    summary = r.events()[-1]
    # the model's calls: not the loss's (as many), not the CPU transform's (more, but no neuron op)
    assert (summary["optimizer_steps"], summary["forwards"]) == (4, 7)
    by_module = {(e["op"], e["site"].get("module"), e["signature"][1]): e for e in compiles
                 if e["op"] == "aten::addmm"}
    first = by_module[("aten::addmm", "body.0", "f32[5,8]")]
    assert first["site"]["line"] == r.line_of("MARK-forward")
    assert first["first_seen"]["optimizer_step"] == 0 and first["first_seen"]["forward"] == 1
    assert by_module[("aten::addmm", "body.2", "f32[5,16]")]["site"]["line"] == r.line_of("MARK-forward")
    assert ("aten::addmm", "Net.Linear", "f32[5,4]") in by_module  # the unregistered module, under its parent
    late = by_module[("aten::addmm", "body.0", "f32[2,8]")]["first_seen"]
    assert (late["optimizer_step"], late["forward"]) == (3, 4)
    no_grad = by_module[("aten::addmm", "body.0", "f32[7,8]")]["first_seen"]
    assert (no_grad["optimizer_step"], no_grad["forward"]) == (4, 5)
    seqs = [e["first_seen"]["seq"] for e in compiles]
    assert len(set(seqs)) == len(seqs)  # one sighting per signature
    mse = [e for e in compiles if e["op"] == "aten::mse_loss"]
    assert mse and all(e["site"]["module"] == "MSELoss" for e in mse)
    backward = [e for e in compiles if e["site"] and e["site"].get("thread") == "autograd"]
    assert backward and all("module" not in e["site"] for e in backward)


def test_the_step_clock_stays_out_of_compiled_graphs(run_sim):
    r = run_sim(PRELUDE + """
import warnings
from torch import nn
warnings.simplefilter("error")  # the simulator's global hooks must not make torch.compile warn
model = nn.Sequential(nn.Linear(4, 4), nn.ReLU()).to("neuron")
compiled = torch.compile(model, backend="neuron")
for _ in range(3):
    compiled(torch.randn(2, 4, device="neuron"))
model(torch.randn(2, 4, device="neuron"))
result(neuron_backend.stats()["summary"])
""")
    assert r.proc.returncode == 0, r.proc.stderr[-3000:]
    assert [e["compile_id"] for e in r.kind("compile")] == ["0/0"]  # the hooks are no frame of their own
    # the compiled graph runs no eager neuron op: only the eager call drives the forward clock
    assert r.result["forwards"] == 1


def test_phases_and_a_dataloaders_partial_batch_are_recorded(run_sim):
    """A phase changes when the outermost module is called in another mode (grad, module.training):
    sightings carry their phase and the phase's own call count; a phase with new signatures has a `phase`
    start event (and an end event once it ended); a DataLoader's smaller last batch is a `data_loader`
    event at the line that iterated it, once per line and size, whatever the epochs."""
    r = run_sim(PRELUDE + """
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)).to("neuron")
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(torch.randn(10, 8)), batch_size=4)  # 4, 4, then 2
for epoch in range(2):
    for (x,) in loader:  # MARK-loader
        model(x.to("neuron")).square().mean().backward()
        opt.step()
model.eval()
with torch.no_grad():
    for n in range(5, 8):  # a generation-like loop: a new length per call, no DataLoader
        model(torch.randn(1, n, 8, device="neuron"))
""")
    assert r.proc.returncode == 0, r.proc.stderr[-3000:]
    phases = [e for e in r.kind("phase")]
    starts = {e["phase"]: e for e in phases if e["event"] == "start"}
    ends = {e["phase"]: e for e in phases if e["event"] == "end"}
    assert sorted(starts) == [0, 1, 2] and sorted(ends) == [0, 1]  # the last phase never ended
    assert (starts[1]["grad"], starts[1]["training"], starts[1]["loader"]) == (True, True, True)
    assert (ends[1]["optimizer_step"], ends[1]["calls"]) == (6, 6)
    assert (starts[2]["grad"], starts[2]["training"], starts[2]["loader"]) == (False, False, False)
    assert starts[2]["optimizer_step"] == 6
    late = [e for e in r.kind("eager_compile") if e["op"] == "aten::addmm" and e["signature"][1].startswith("f32[")
            and e["first_seen"]["phase"] == 2]
    assert sorted(e["first_seen"]["phase_forward"] for e in late if e["site"].get("module") == "0") == [1, 2, 3]
    [partial] = r.kind("data_loader")
    assert (partial["event"], partial["batch_size"], partial["size"], partial["drop_last"]) == (
        "partial_batch", 4, 2, False)
    assert partial["site"]["line"] == r.line_of("MARK-loader") and partial["optimizer_step"] == 2
