"""When the language server analyses a changed buffer: at once after a pause in the edits with its worker
idle (no wait after a single edit), else once the edits pause for DEBOUNCE seconds (a burst of keystrokes
is analysed once, at its end)."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("pygls")
from neuron_port.server import protocol  # noqa: E402


def test_a_single_edit_is_analysed_at_once_and_a_burst_waits():
    async def decisions() -> list[bool]:
        server = protocol.NeuronPortServer()
        found = [server.typing("file:///a.py")]  # the first change: at once
        found.append(server.typing("file:///a.py"))  # right after it: typing, debounced
        found.append(server.typing("file:///b.py"))  # another buffer's first change: at once
        await asyncio.sleep(protocol.DEBOUNCE * 2)
        found.append(server.typing("file:///a.py"))  # after a pause: at once again
        await asyncio.sleep(protocol.DEBOUNCE * 2)
        server.running[("file:///b.py", 3)] = ("text", asyncio.get_running_loop().create_future())
        found.append(server.typing("file:///a.py"))  # after a pause, but an analysis runs: debounced
        return found

    assert asyncio.run(decisions()) == [False, True, False, False, True]
