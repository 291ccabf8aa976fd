"""Property: the bytes of every line no fix touches are the same after `rewrite` (issue 33): random modules
whose untouched lines carry each class of whitespace Python accepts there (spaces, tabs and form feeds in
the indentation, including the form feeds LibCST's tree cannot hold; trailing whitespace; whitespace-only
lines; comments holding \\v), with LF, CRLF, CR or mixed line ends, a BOM or none, a last line with or without
its line end, parsed whole and in pieces; the one fix, `x.cuda()` -> `x.to("neuron")`, is the only change
in the written file and the only change its diff shows."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path
from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neuron_port.api import Settings, rewrite
from neuron_port.rewrite import chunks, syntax

# what may stand before a top-level statement: the tokenizer resets the column at a form feed
TOP = ("", "\f", "\f\f", "  \f", "\t\f", " \f \f", "    \f")
# before a statement of a block indented by four spaces
BODY = ("    ", "\f    ", "\t\f    ", "  \f    ", "\f\f    ")
TRAILING = ("", " ", "\t", "\f", " \t\f ")
BLANK = ("", " ", "\t", "\f", "\f\f", " \f\t ", "    ")
COMMENT = ("", " ", "\t", "\f", "  \f  ", "    ")
ENDS = ("\n", "\r\n", "\r")

EDITED = "x.cuda()"
FIXED = 'x.to("neuron")'

lines = st.lists(st.one_of(
    st.tuples(st.just("statement"), st.sampled_from(TOP), st.sampled_from(TRAILING), st.booleans()),
    st.tuples(st.just("blank"), st.sampled_from(BLANK)),
    st.tuples(st.just("comment"), st.sampled_from(COMMENT), st.sampled_from(("", "\v", "\f"))),
    st.tuples(st.just("block"), st.sampled_from(TOP), st.lists(
        st.tuples(st.sampled_from(BODY), st.sampled_from(TRAILING), st.booleans(), st.sampled_from(BLANK)),
        min_size=1, max_size=3)),
), min_size=1, max_size=12)


def module_lines(spec: list) -> list[str]:
    """The lines of a module (without line ends): each untouched unless it holds EDITED."""
    out = ["import torch"]
    for n, item in enumerate(spec):
        kind = item[0]
        if kind == "statement":
            _kind, prefix, trailing, edited = item
            out.append(f"{prefix}t_{n} = {EDITED if edited else n}{trailing}")
        elif kind == "blank":
            out.append(item[1])
        elif kind == "comment":
            out.append(f"{item[1]}# note{item[2]}{n}")
        else:
            _kind, prefix, body = item
            out.append(f"{prefix}if torch:")
            for m, (body_prefix, trailing, edited, blank) in enumerate(body):
                out.append(f"{body_prefix}u_{n}_{m} = {EDITED if edited else m}{trailing}")
                if blank != "    " and m % 2:
                    out.append(blank)  # a whitespace-only line inside the block
    return out


def _split(data: bytes) -> list[bytes]:
    return re.findall(rb"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$", data)


@settings(max_examples=120, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(lines, st.sampled_from(ENDS + ("mixed",)), st.booleans(), st.booleans(), st.booleans(),
       st.randoms(use_true_random=False))
def test_bytes_outside_the_edit_never_change(spec, ending, bom, final_end, in_pieces, rng):
    body = module_lines(spec)
    ends = [rng.choice(ENDS) if ending == "mixed" else ending for _ in body]
    if not final_end:
        ends[-1] = ""
    data = ("\ufeff" if bom else "").encode() + "".join(a + b for a, b in zip(body, ends)).encode()
    expected = data.replace(EDITED.encode(), FIXED.encode())
    split = (lambda code, parse: chunks.parse_in_pieces(code, parse, limit=1)) if in_pieces else syntax.parse_in_pieces
    with tempfile.TemporaryDirectory() as folder, mock.patch.object(syntax, "parse_in_pieces", split):
        path = Path(folder) / "m.py"
        path.write_bytes(data)
        shown = rewrite([path], Settings(), write=False, diff=True, use_cache=False, jobs=1)
        report = rewrite([path], Settings(), write=True, use_cache=False, jobs=1)
        written = path.read_bytes()
    assert not report.errors and not any(f.error for f in report.files), (report.errors, data)
    assert written == expected, (data, written)
    # the diff shows the edited lines and nothing else
    diff = "".join(f.diff or "" for f in shown.files)
    removed = [line for line in diff.split("\n") if line.startswith("-") and not line.startswith("---")]
    assert len(removed) == sum(line.count(EDITED.encode()) > 0 for line in _split(data)), diff
    assert all(EDITED in line for line in removed), diff


def test_page_breaks_survive_the_cli(tmp_path, cli):
    """GNU-style page breaks (a form feed before a top-level statement) and indented blank lines ending the
    file, as a user runs `rewrite --diff` and `rewrite`: the diff shows only the fixed line, the file keeps
    every other byte (the form feeds were dropped, and the diff cut each such line in two)."""
    source = ("import torch\n\n\x0cdef f(x):\n    return x.cuda()\n\n\x0cclass A:\n\x0c    y = 1\n"
              "\n  # the end\n\n    ")
    path = tmp_path / "paged.py"
    path.write_text(source, newline="")
    shown = cli("rewrite", "--diff", "-q", "--no-cache", "paged.py", cwd=tmp_path)
    assert shown.returncode == 1, shown.stderr
    changed = [line for line in shown.stdout.split("\n") if line[:1] in ("+", "-") and line[:3] not in ("---", "+++")]
    assert changed == ["-    return x.cuda()", '+    return x.to("neuron")'], shown.stdout
    done = cli("rewrite", "-q", "--no-cache", "paged.py", cwd=tmp_path)
    assert done.returncode in (0, 1), done.stderr
    assert path.read_bytes() == source.replace("x.cuda()", 'x.to("neuron")').encode()
