"""The crash-proof records (EVENTS.md, "Records"): the events rebuilt from them are the snapshot's, a
forked child does not count into its parent's records, and the events folder is never created."""

from __future__ import annotations

import json
from pathlib import Path

from neuron_port.check.events import read_events
from neuron_port.check.runner import RunStatus
from neuron_port.check.runtime import build_runtime
from neuron_port.check.sites import SiteMapper

from ..conftest import PRELUDE

TRAINING = PRELUDE + """
import neuron_backend.events
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2)).to("neuron")
opt = torch.optim.Adam(model.parameters())
for step in range(4):
    x = torch.randn(4 + step % 2, 8, device="neuron")
    loss = model(x).pow(2).mean()
    torch.linalg.qr(x)                                   # a CPU fallback
    (x.double() * 2).sum()                               # float64
    torch.arange(5, device="neuron").sum()               # int64
    torch.view_as_complex(torch.randn(4, 2, device="neuron"))  # a complex note
    torch.ones(3, device="neuron").to_sparse()          # unsupported: recorded, counted per call
    opt.zero_grad()
    loss.backward()
    opt.step()
neuron_backend.events.record("distributed", event="collective", op="all_reduce", count=1, bytes=4)
"""


def runtime_json(folder: Path, root: Path) -> dict:
    section, findings = build_runtime(read_events(folder, on_note=None), RunStatus(command=["python"], exit_code=0),
                                      SiteMapper(root))
    doc = section.to_json()
    doc.pop("processes")  # status and completeness differ by construction
    # entries of equal rank keep their input order: the C++ core's hash-table order, or the journal's
    doc["eager_compiles"].sort(key=lambda e: json.dumps(e, sort_keys=True))
    return {"runtime": doc, "findings": sorted(f.message for f in findings)}


def test_events_rebuilt_from_the_records_equal_the_snapshot(run_sim, tmp_path):
    r = run_sim(TRAINING, env={"NEURON_PORT_UNSUPPORTED": "record"})
    assert r.proc.returncode == 0, r.proc.stderr[-3000:]
    from_snapshot = runtime_json(r.events_dir, tmp_path)
    (snapshot,) = r.event_files()
    snapshot.unlink()  # as if the process had died before writing it
    [rebuilt] = read_events(r.events_dir, on_note=None)
    assert rebuilt.rebuilt and rebuilt.summary is not None and rebuilt.summary.optimizer_steps == 4
    assert runtime_json(r.events_dir, tmp_path) == from_snapshot
    assert from_snapshot["runtime"]["ops"]["fallback_calls"] >= 4 and from_snapshot["runtime"]["demotions"]
    assert [u["count"] for u in from_snapshot["runtime"]["unsupported"] if u["feature"] == "sparse"] == [4]


def test_a_forked_child_does_not_count_into_its_parents_records(run_sim):
    r = run_sim(PRELUDE + """
x = torch.ones(4, device="neuron")
for _ in range(3):
    x + x
pid = os.fork()
if pid == 0:                      # a DataLoader-style worker that uses the device
    for _ in range(100):
        x + x
    os._exit(0)
os.waitpid(pid, 0)
os._exit(0)                       # no snapshot: the parent's events come from its records
""")
    assert r.proc.returncode == 0, r.proc.stderr[-3000:]
    [process] = read_events(r.events_dir, on_note=None)
    assert process.rebuilt
    adds = [e for e in process.events if getattr(e, "op", None) == "aten::add.Tensor" and hasattr(e, "policy")]
    assert [e.calls for e in adds] == [3]
    # the child keeps records of its own, counting from zero at the fork: its 100 adds, not its parent's 3
    from neuron_port.check.events import lost_records

    [child] = lost_records(r.events_dir)
    assert child.parent_pid == process.process.pid and child.pid != child.parent_pid
    assert 100 <= child.calls < 103 + 10  # the adds, and the few explicit kernels they call (no parent's)


def test_the_events_folder_is_never_created(run_sim, tmp_path):
    r = run_sim(make_events_dir=False, code=PRELUDE + """
torch.linalg.qr(torch.ones(3, 3, device="neuron"))
import neuron_backend.events
neuron_backend.events.flush()
""")
    assert r.proc.returncode == 0, r.proc.stderr[-3000:]
    assert not r.events_dir.exists()
    assert "neuron-port" not in r.proc.stderr
