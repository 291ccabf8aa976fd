"""NP912: device work the run's counts miss: its events folder removed while the command ran, or a forked
child (a `multiprocessing` fork) that used the device, whose calls the counts never hold.
"""

from __future__ import annotations

from neuron_port.rules.spec import Invalid, RuntimeRule, Valid

FORKED_CHILD = """import os
import torch

x = torch.ones(4, device='neuron')
pid = os.fork()
if pid == 0:
    y = torch.ones(8, device='neuron') * 3
    os._exit(0)
os.waitpid(pid, 0)
"""

FOLDER_REMOVED = """import os
import shutil
import torch

x = torch.ones(4, device='neuron') * 2
shutil.rmtree(os.environ['NEURON_PORT_EVENTS_DIR'])
"""

CPU_ONLY_CHILD = """import os
import torch

x = torch.ones(4, device='neuron')
pid = os.fork()
if pid == 0:
    y = torch.ones(8) * 3  # the CPU only, as a DataLoader worker
    os._exit(0)
os.waitpid(pid, 0)
"""


class LostRecords(RuntimeRule):
    """Device work the run's counts do not hold: its records went missing.

    ## What it does
    Reports a run whose events folder (`$NEURON_PORT_EVENTS_DIR`, made by `check` for the run) is gone
    when the command ends: the program or a process it started removed it (a clean-up of the temporary
    folder, `shutil.rmtree` of a path built from the environment), and with it the records of every
    process. Reports each forked child (`os.fork()`, `multiprocessing` with the fork start method, a
    DataLoader worker) that made calls on the `neuron` device, with its pid, its parent's and its
    command line: a forked child writes no events of its own, so its calls are not in the counts, the
    readiness, the shapes or the estimate, whether it ended normally or was killed. A child that only
    works on the CPU (the usual DataLoader worker) is not reported. Severity warning: the report is
    incomplete.

    ## Why is this bad?
    Without it such a run reads as "no op reached the neuron device" or as a clean success, and the
    counts, the shapes and the estimate leave out work the program does: what this run says about
    Trainium is then about part of the program only.

    ## Example
    ```python
    pid = os.fork()
    if pid == 0:
        y = model(x.to("neuron"))  # the child's device calls: missing from the counts
    ```
    Use instead: keep the device work in the main process (workers prepare CPU tensors), or start
    workers with `multiprocessing.get_context("spawn")`: each spawned process writes its own events.
    Leave `$NEURON_PORT_EVENTS_DIR` in place until the command ends.

    ## Fix safety
    No automatic fix.

    ## References
    - neuron_backend/EVENTS.md, "Records" (what a forked child keeps)
    - https://docs.python.org/3/library/multiprocessing.html#contexts-and-start-methods
    """

    CODE = "NP912"
    NAME = "lost-records"
    SEVERITY = "warning"
    EFFORT = "medium"
    MESSAGE = "records lost: {what}"
    VALID = [Valid(CPU_ONLY_CHILD)]
    INVALID = [
        Invalid(FORKED_CHILD, message_contains="call(s) on the neuron device that are missing from the counts"),
        Invalid(FOLDER_REMOVED, message_contains="the events folder ($NEURON_PORT_EVENTS_DIR) was removed"),
    ]
