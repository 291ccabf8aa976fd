"""The rewrite as text edits (neuron_port/server/edits.py), in process: applied as an editor applies them,
the edits give the rewritten text, whatever the line ends."""

from __future__ import annotations

import pytest

from neuron_port.server.edits import apply, hunks

CASES = [
    ("x = a.cuda()\ny = 1\n", 'x = a.to("neuron")\ny = 1\n'),  # one changed span in a line
    ("import torch\nx = 1\n", "import torch\nimport torch_neuronx\nx = 1\n"),  # a line added
    ("a\nb\nc", "a\nc"),  # a line removed, no final line end
    ("a\nb", "a\nB"),  # the last line, no final line end
    ("a\r\nb\r\n", "a\r\nB\r\n"),  # CRLF kept
    ("a\rb\rc\r", "a\rX\rc\r"),  # old Mac line ends
    ("a\n\x0cb = 1\nc\n", "a\n\x0cb = 2\nc\n"),  # a form feed is not a line end
    ("a\nb\n", "a\r\nb\n"),  # a changed line end replaces the line
    ("", "x\n"),
    ("x\n", ""),
]


@pytest.mark.parametrize("old, new", CASES)
def test_the_edits_give_the_rewritten_text(old, new):
    assert apply(old, hunks(old, new)) == new


def test_an_edit_within_a_line_is_trimmed_to_the_changed_columns():
    (edit,) = hunks("x = a.cuda()\n", 'x = a.to("neuron")\n')
    assert (edit.line, edit.column, edit.end_line, edit.end_column) == (0, 6, 0, 11)  # "cuda(" -> "to(\"neuron\""
    assert edit.text == 'to("neuron"'
