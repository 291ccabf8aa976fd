"""Per rule, how many fixes change which branch a device test takes, and how many of them are safe.

    .venv/bin/python scripts/count_device_test_edits.py [FOLDER ...]   (default: the fixtures' inputs)

A device-test fix is one of NP102 (``device.type == "cuda"``), NP104 (``x.is_cuda``) and NP201 on
``torch.cuda.is_available`` (issue 20, item 1: such a fix is safe only when everything the test decides
is known to run on Trainium). The count is of findings in the Python files of each folder, through the
same engine ``neuron-port rewrite`` runs (one pass, no file written). Run it with an older checkout on
``sys.path`` to compare (the numbers in the issue-20 report were made that way).
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

from neuron_port.rewrite.engine import EngineOptions, transform_source
from neuron_port.rules.registry import rules_of_kind

ROOT = Path(__file__).resolve().parent.parent
DEVICE_TEST_RULES = ("NP102", "NP104", "NP201")


def device_test_fix(finding) -> bool:
    if finding.code not in DEVICE_TEST_RULES or not finding.fix.available:
        return False
    return finding.code != "NP201" or "`torch.cuda.is_available`" in finding.message


def count(folders: list[Path]) -> dict[str, Counter]:
    rules = [r for r in rules_of_kind("python")]
    counts: dict[str, Counter] = {code: Counter() for code in DEVICE_TEST_RULES}
    for folder in folders:
        for path in sorted(folder.rglob("*.py")):
            try:
                outcome = transform_source(path.read_text(encoding="utf-8"), rules, EngineOptions(target="neuron"))
            except Exception as error:  # a file the engine refuses is counted nowhere, but said
                print(f"{path}: skipped ({type(error).__name__})", file=sys.stderr)
                continue
            for finding in outcome.findings:
                if device_test_fix(finding):
                    counts[finding.code][finding.fix.safety] += 1
    return counts


def main(argv: list[str]) -> int:
    folders = [Path(a) for a in argv] or sorted(
        p for p in (ROOT / "fixtures").iterdir() if p.is_dir() and p.name != "expected")
    counts = count(folders)
    print(f"{'rule':6} {'safe':>5} {'unsafe':>7}")
    for code, found in counts.items():
        print(f"{code:6} {found['safe']:>5} {found['unsafe']:>7}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
