"""Exactness and cost of parse reuse (issue 38 item 1: the language server keeps each buffer's top-level
pieces parsed, rewrite/syntax.keep_parsed_pieces): real files, each edited as a user edits a buffer, run
through the engine with the pieces of the previous version kept, against a fresh run of the same text.

For each ``.py`` file over ``--min-chars`` under the given folders (default: the installed accelerate and
a subset of transformers), up to ``--files`` of them: the text, then the text with one line inserted near
the middle (an assignment with a ``.cuda()`` call at that line's indentation, kept only where CPython
parses the result), then the text again. Each version goes through ``transform_source`` with every rule,
once with the pieces kept (after the previous version) and once without (fresh), and the outcomes are
compared: the rewritten code, the findings (places, messages, fixes), the fix count, or the error; and the
parsed trees themselves (``deep_equals`` and their code). Prints the count of differences (must be 0), the
pieces parsed and reused, and the CPU seconds of the parses both ways.

    .venv/bin/python bench/rewrite/bench_parse_reuse.py [FOLDER ...] [--files 300] [--min-chars 16000]
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import os
import sys
import time
from pathlib import Path

from neuron_port.rewrite import syntax
from neuron_port.rewrite.engine import EngineOptions, RewriteError, transform_source
from neuron_port.rules.registry import all_rules

RULES = list(all_rules())


def _default_folders() -> list[Path]:
    folders = []
    for name, subsets in (("accelerate", ("",)),
                          ("transformers", ("", "models/llama", "models/bert", "models/gpt2", "models/t5",
                                            "models/whisper", "models/mistral", "models/qwen2", "generation",
                                            "pipelines", "integrations", "utils", "data"))):
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.submodule_search_locations:
            continue
        root = Path(list(spec.submodule_search_locations)[0])
        folders.extend(root / subset for subset in subsets)
    return folders


def _files(folders: list[Path], min_chars: int, limit: int) -> list[Path]:
    found: dict[Path, None] = {}
    for folder in folders:
        paths = sorted(folder.glob("*.py")) if folder.is_dir() else [folder]
        for path in paths:
            try:
                if path.stat().st_size >= min_chars:
                    found[path.resolve()] = None
            except OSError:
                continue
    return list(found)[:limit]


def _edited(text: str) -> str | None:
    """``text`` with an assignment holding a ``.cuda()`` call inserted before a line near the middle, at
    its indentation; None when no nearby place gives a text CPython parses."""
    lines = text.splitlines(keepends=True)
    middle = len(lines) // 2
    for index in sorted(range(1, len(lines)), key=lambda i: abs(i - middle))[:200]:
        line = lines[index]
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        indent = line[:len(line) - len(line.lstrip())]
        new = "".join(lines[:index] + [f"{indent}_probe = torch.zeros(2).cuda()\n"] + lines[index:])
        try:
            ast.parse(new)
        except SyntaxError:
            continue
        return new
    return None


def _outcome(text: str, path: str):
    try:
        out = transform_source(text, RULES, EngineOptions(), path=path)
    except RewriteError as exc:
        return ("error", str(exc))
    return (out.code, out.findings, out.fixes_applied, out.skipped)


def _parse(text: str, path: str):
    start = time.process_time()
    try:
        tree = syntax.parse_module(text, path)
    except Exception as exc:  # the same error both ways is the same outcome
        tree = f"{type(exc).__name__}: {exc}"
    return tree, time.process_time() - start


def _same_tree(a, b) -> bool:
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    return a.code == b.code and a.deep_equals(b)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folders", nargs="*", type=Path)
    parser.add_argument("--files", type=int, default=300)
    parser.add_argument("--min-chars", type=int, default=16_000)
    args = parser.parse_args()
    files = _files(args.folders or _default_folders(), args.min_chars, args.files)
    differences, versions, parsed, reused, edited = 0, 0, 0, 0, 0
    cpu_fresh = cpu_kept = 0.0
    for number, path in enumerate(files, 1):
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        new = _edited(text)
        edited += new is not None
        sequence = [text] + ([new, text] if new is not None else [])
        name = str(path)
        syntax.keep_parsed_pieces(4)
        kept_outcomes, kept_trees = [], []
        for version in sequence:
            tree, cpu = _parse(version, name)
            if kept_trees:  # the first parse of the file has nothing to reuse
                cpu_kept += cpu
                parsed += syntax.last_reuse[0]
                reused += syntax.last_reuse[1]
            kept_trees.append(tree)
            kept_outcomes.append(_outcome(version, name))
        syntax.keep_parsed_pieces(0)
        for index, version in enumerate(sequence):
            tree, cpu = _parse(version, name)
            if index:
                cpu_fresh += cpu
            versions += 1
            same = _same_tree(tree, kept_trees[index]) and _outcome(version, name) == kept_outcomes[index]
            if not same:
                differences += 1
                print(f"DIFFERENT: {path} version {index}", file=sys.stderr, flush=True)
        if number % 25 == 0:
            print(f"{number}/{len(files)} files, {differences} differences", file=sys.stderr, flush=True)
    print(f"files: {len(files)} (>= {args.min_chars} chars), edited: {edited}, versions compared: {versions}, "
          f"load {os.getloadavg()[0]:.1f}")
    print(f"pieces after the first version: parsed {parsed}, reused {reused}")
    print(f"parse CPU s of the versions after the first: kept pieces {cpu_kept:.2f}, fresh {cpu_fresh:.2f}")
    print(f"differences (code, findings, fix counts, errors, parsed trees): {differences}")


if __name__ == "__main__":
    main()
