"""rewrite/line_map.py: where the rewritten text's lines stand in the file as it is (what is left is shown
there when nothing is written). The edits a rewrite makes (a line replaced, imports added at the top or
removed, a statement dropped) map every unchanged line to itself, and a large file maps in linear time (the
first version used difflib's matcher: 85 s on a 68,000-line file with 17,000 edits)."""

from __future__ import annotations

import random

from neuron_port.rewrite.line_map import line_map, old_line


def test_unchanged_lines_map_to_themselves_under_a_rewrites_edits():
    rng = random.Random(33)
    for _ in range(300):
        old = [f"stmt_{k} = f({k})" if rng.random() < 0.85 else "" for k in range(rng.randint(1, 200))]
        new, origin = [], []
        if rng.random() < 0.5:
            new += ["import torch", ""]
            origin += [None, None]
        for k, line in enumerate(old):
            edit = rng.random()
            if edit < 0.03 and line:
                continue  # a statement dropped (set_device, an import)
            if edit < 0.12 and line:
                new.append(line.replace("f(", "g("))
                origin.append(None)  # replaced in place
            else:
                new.append(line)
                origin.append(k)
        blocks = line_map("\n".join(old), "\n".join(new))
        for index, k in enumerate(origin):
            if k is not None and old[k]:
                assert old_line(blocks, index + 1) == k + 1


def test_bytes_and_text_count_lines_alike_and_a_form_feed_ends_no_line():
    old, new = "a\r\nb\x0cc\rd\n", "a\r\nb\x0cc\rX\n"
    assert line_map(old, new) == line_map(old.encode(), new.encode())
    assert old_line(line_map(old, new), 3) == 3  # 'X' replaced 'd', the third line


def test_a_large_file_with_many_edits_maps_each_unchanged_line():
    old = "".join(f"x{i} = torch.ones(3).cuda()\n\n" if i % 7 == 0 else f"y{i} = {i}\n" for i in range(60_000))
    new = old.replace(".cuda()", ".to('neuron')")
    blocks = line_map(old, new)
    lines = old.splitlines()
    assert old_line(blocks, 59_999) == 59_999 and lines[59_998] == new.splitlines()[59_998]
