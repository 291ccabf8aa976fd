"""Held-out audit of the rewrite's safe fixes: the Python sources inside pinned PyPI wheels that none of the
rules were written against, rewritten file by file; per rule, how many findings, how many safe fixes, and
how many of those safe fixes change a device test (the edits issue 20 found wrong on unseen code).

    .venv/bin/python bench/held_out/audit.py [--packages peft==0.13.2,...] [--json OUT] [--sample N]

The wheels are fetched with `pip download --no-deps` (bench/rewrite/real_corpus.py: reused when already in
~/.cache/neuron-port-bench/wheels) and their ``*.py`` members extracted into a temporary folder; nothing of
them is committed. A safe fix "changes a device test" when its source range overlaps a device test that
CPython's ``ast`` finds in the original text (``x.is_cuda``, a comparison with a ``"cuda..."`` string,
``torch.cuda.is_available()``): judged from the text,
not from the rules' own analysis, so the audit cannot agree with a rule by construction. ``--sample N``
prints N of those edits at random (seeded) with their line, to be read by hand.

Every rewritten file must parse and a second rewrite of it must change nothing; a file that breaks either
is listed and makes the exit status 1. tests/rewrite/test_held_out.py runs the audit on one package and
holds its safe device-test edits to the count recorded in bench/held_out/recorded.json.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import random
import sys
import tempfile
from collections import Counter
from pathlib import Path

PACKAGES = ("peft==0.13.2", "trl==0.12.1", "lightning==2.4.0", "bitsandbytes==0.44.1", "torchao==0.6.1")
HERE = Path(__file__).resolve().parent
RECORDED = HERE / "recorded.json"


def _real_corpus():
    """bench/rewrite/real_corpus.py (the wheel download and extraction), loaded by path: bench/ is not a package."""
    spec = importlib.util.spec_from_file_location("real_corpus", HERE.parent / "rewrite" / "real_corpus.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build_corpus(packages, dest: Path, wheels: Path | None = None) -> dict[str, Path]:
    """Extract each pinned package's ``.py`` files under ``dest/<name>``; returns {requirement: folder}."""
    corpus = _real_corpus()
    wheels = wheels or corpus.DEFAULT_WHEELS
    wheels.mkdir(parents=True, exist_ok=True)
    folders = {}
    for requirement in packages:
        folder = dest / requirement.split("==")[0]
        corpus.extract_python(corpus.wheel_for(requirement, wheels), folder)
        folders[requirement] = folder
    return folders


def _is_cuda_string(node) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("cuda")


def device_test_spans(text: str) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """((line, col), (end_line, end_col)) of every device test in ``text`` (1-based lines, 0-based cols)."""
    spans = []
    for node in ast.walk(ast.parse(text)):
        test = False
        if isinstance(node, ast.Attribute) and node.attr == "is_cuda":
            test = True
        elif isinstance(node, ast.Compare):
            test = any(_is_cuda_string(part) for part in (node.left, *node.comparators))
        elif isinstance(node, ast.Call) and ast.unparse(node.func).endswith("cuda.is_available"):
            test = True
        if test:
            spans.append(((node.lineno, node.col_offset), (node.end_lineno, node.end_col_offset)))
    return spans


def _overlaps(finding, spans) -> bool:
    start, end = (finding.line, finding.column - 1), (finding.end_line, finding.end_column - 1)
    return any(s < end and start < e for s, e in spans)


def audit_folder(folder: Path, label: str, tally: dict, samples: list, broken: list) -> None:
    from neuron_port.api import rewrite_source

    for path in sorted(folder.rglob("*.py")):
        text = path.read_text(encoding="utf-8", errors="replace")
        if "cuda" not in text:
            continue
        try:
            spans = device_test_spans(text)
        except SyntaxError:
            continue  # not Python 3 of this interpreter: the rewrite would refuse it too
        shown = f"{label}/{path.relative_to(folder)}"
        new, findings = rewrite_source(text, path=shown)
        if new != text:
            try:
                ast.parse(new)
            except SyntaxError as exc:
                broken.append(f"{shown}: the rewritten file does not parse: {exc.msg} (line {exc.lineno})")
                continue
            if rewrite_source(new, path=shown)[0] != new:
                broken.append(f"{shown}: a second rewrite changes the file again")
        lines = text.splitlines()
        for finding in findings:
            tally["findings"][finding.code] += 1
            if not finding.fix.available:
                continue
            if finding.fix.safety != "safe":
                tally["unsafe"][finding.code] += 1
                continue
            tally["safe"][finding.code] += 1
            if _overlaps(finding, spans):
                tally["safe_device_test"][finding.code] += 1
                samples.append(f"{shown}:{finding.line} {finding.code}: {lines[finding.line - 1].strip()[:110]}")


def run_audit(folders: dict[str, Path]) -> dict:
    tally = {key: Counter() for key in ("findings", "safe", "unsafe", "safe_device_test")}
    samples: list[str] = []
    broken: list[str] = []
    for requirement, folder in folders.items():
        audit_folder(folder, requirement.split("==")[0], tally, samples, broken)
    return {"packages": list(folders), **{k: dict(sorted(v.items())) for k, v in tally.items()},
            "safe_device_test_edits": samples, "broken": broken}


def totals(result: dict) -> dict:
    """The per-package figures the test holds: sums over the rules."""
    return {key: sum(result[key].values()) for key in ("findings", "safe", "safe_device_test", "unsafe")}


def table(result: dict) -> str:
    rows = ["| rule | findings | safe fixes | of them device-test edits | unsafe fixes |", "|---|---:|---:|---:|---:|"]
    for code in sorted(result["findings"]):
        rows.append(f"| {code} | {result['findings'][code]} | {result['safe'].get(code, 0)} | "
                    f"{result['safe_device_test'].get(code, 0)} | {result['unsafe'].get(code, 0)} |")
    total = totals(result)
    rows.append(f"| **all** | {total['findings']} | {total['safe']} | {total['safe_device_test']} | {total['unsafe']} |")
    return "\n".join(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--packages", default=",".join(PACKAGES), help="comma-separated name==version (pinned)")
    parser.add_argument("--json", type=Path, help="write the result here (per-rule counts and the edits)")
    parser.add_argument("--sample", type=int, default=0, help="print this many safe device-test edits to read")
    parser.add_argument("--seed", type=int, default=20)
    parser.add_argument("--record", action="store_true",
                        help=f"write each package's totals to {RECORDED.relative_to(HERE.parent.parent)} (what the test holds)")
    args = parser.parse_args()
    packages = [p.strip() for p in args.packages.split(",") if p.strip()]
    if any("==" not in p for p in packages):
        parser.error("--packages: pin every package as name==version")
    with tempfile.TemporaryDirectory(prefix="held-out-") as tmp:
        folders = build_corpus(packages, Path(tmp))
        result = run_audit(folders)
        if args.record:
            record = {req: totals(run_audit({req: folder})) for req, folder in folders.items()}
            tmp_out = RECORDED.with_suffix(".tmp")
            tmp_out.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
            tmp_out.replace(RECORDED)
    print(table(result))
    if args.sample:
        edits = result["safe_device_test_edits"]
        for line in random.Random(args.seed).sample(edits, min(args.sample, len(edits))):
            print(line)
    for line in result["broken"]:
        print(f"broken: {line}", file=sys.stderr)
    if args.json:
        tmp_out = args.json.with_suffix(args.json.suffix + ".tmp")
        tmp_out.write_text(json.dumps(result, indent=1) + "\n")
        tmp_out.replace(args.json)
    return 1 if result["broken"] else 0


if __name__ == "__main__":
    sys.exit(main())
