"""A watcher that outlives a SIGKILLed `check`: it ends the command's whole process tree and removes the
run's temporary folders when `check` dies without doing it (SIGKILL, the out-of-memory killer); the
command used to run on with parent 1 until its own end.

The watcher is a small fresh interpreter (it imports only the standard library and these modules),
started before the command, in a session of its own (a signal to `check`'s process group does not reach
it). It reads a pipe whose only writer is `check` (os.pipe is close-on-exec: the command never holds it,
and the rewrite scan's forked workers die with `check`): `leader PID` names the command once started,
`done` ends the watch; end of file without `done` means `check` died. It then ends every member of the
run (process_tree.py: the marker in the environment, the command's session, their descendants) with a
short grace, and once more a moment later (a child `check` was starting as it died carries the marker
only once it runs), then removes the dead run's folders (scratch.py). A watcher that cannot start leaves
`check` as before.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import Optional

DEATH_GRACE_SECONDS = 1.0  # SIGTERM, then SIGKILL: nobody is left to read the events they would flush


class Watcher:
    """`check`'s end of the watch (a no-op when the watcher could not start)."""

    def __init__(self, marker: str) -> None:
        self._pipe: Optional[int] = None
        self._proc: Optional[subprocess.Popen] = None
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        try:
            read, write = os.pipe()
        except OSError:  # out of file descriptors: `check` goes on unwatched, as before
            return
        try:  # -I -S: neither the user's environment nor site-packages; the package's own folder only
            self._proc = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
                 "from neuron_port.check.watcher import watch; watch(sys.argv[2], int(sys.argv[3]))",
                 root, marker, str(os.getpid())],
                stdin=read, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        except OSError:
            os.close(write)
        else:
            self._pipe = write
        finally:
            os.close(read)

    def _send(self, line: str) -> None:
        if self._pipe is not None:
            try:
                os.write(self._pipe, line.encode() + b"\n")
            except OSError:  # the watcher is gone: nothing to tell
                pass

    def leader(self, pid: int) -> None:
        self._send(f"leader {pid}")

    def close(self) -> None:
        """`check` ended the command's processes itself: the watcher exits."""
        self._send("done")
        if self._pipe is not None:
            os.close(self._pipe)
            self._pipe = None
        if self._proc is not None:
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()


def watch(marker: str, parent: int) -> None:
    """The watcher's side: read the pipe on stdin until `done` (exit) or its end (`check` died)."""
    leader: Optional[int] = None
    data = b""
    while True:
        try:
            chunk = os.read(0, 4096)
        except InterruptedError:
            continue
        if not chunk:
            break
        data += chunk
        *lines, data = data.split(b"\n")
        for line in lines:
            if line == b"done":
                return
            if line.startswith(b"leader "):
                leader = int(line.split()[1])
    from neuron_port.check.process_tree import ProcessTree
    from neuron_port.check.scratch import remove_dead_runs_folders

    tree = ProcessTree(marker)
    tree.leader = leader
    tree.end(DEATH_GRACE_SECONDS)
    time.sleep(0.2)
    tree.end(0)
    remove_dead_runs_folders(owner_pid=parent)
