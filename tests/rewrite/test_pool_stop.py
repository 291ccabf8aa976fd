"""Workers.stop() (what an interrupt runs) ends the pool for good, even when it killed a worker in the middle of
sending a result: the pool's manager thread had read the start of that result and waited for the rest for
ever (the main process holds the result pipe's other end), and the interpreter's exit waited for that
thread: `neuron-port rewrite -j 2` printed "interrupted" and never exited (tests/rewrite/
test_rewrite_reliability.py's Ctrl-C test, once in CI; 3 in 80 interrupted runs on a loaded machine). Here the
cut-off result is in the pipe as a killed worker leaves it, deterministically."""

from __future__ import annotations

import os
import struct
import time

from neuron_port.rewrite.discovery import SourceFile
from neuron_port.rewrite.options import RunOptions
from neuron_port.rewrite.pool import Workers


def test_stop_ends_a_pool_whose_worker_was_killed_while_it_sent_a_result(tmp_path):
    source = tmp_path / "train.py"
    source.write_text("import torch\nx = torch.zeros(2).cuda()\n")
    done = []
    workers = Workers(2, lambda *outcome: done.append(outcome), budget=1 << 40)
    workers.submit((0, None, (SourceFile("train.py", source), RunOptions(rule_codes=("NP101",)),
                              source.read_bytes(), True)))
    workers.finish()
    assert len(done) == 1 and done[0][0] == 0  # a real pool, which ran the file
    executor = workers.executor
    manager = executor._executor_manager_thread
    # what a worker killed while sending leaves: the length of a 1 MB message and 10 bytes of it
    os.write(executor._result_queue._writer.fileno(), struct.pack("!i", 1_000_000) + b"x" * 10)
    time.sleep(0.5)  # the manager thread reads the start and waits for the rest
    began = time.monotonic()
    workers.stop()
    assert not manager.is_alive()
    assert time.monotonic() - began < 20  # before: 30 s in stop(), then the thread left waiting for ever
