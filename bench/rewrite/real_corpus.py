"""Build the real-code corpus of the rewrite benchmark: the Python sources inside the PyPI wheels of
pinned releases of four model libraries, one folder per package.

    .venv/bin/python bench/rewrite/real_corpus.py OUT [--wheels DIR]

The wheels are fetched with `pip download --no-deps` into DIR (default: ~/.cache/neuron-port-bench/wheels;
a wheel already there is reused, so a second run downloads nothing), then every ``*.py`` member is
extracted to ``OUT/<wheel name>/<path in the wheel>``. OUT is replaced as a whole (built in a temporary
folder next to it, then renamed), so an interrupted run never leaves half a corpus. Nothing of it is
committed: the corpus is other projects' code, rebuilt on demand.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

# Pinned: the benchmark's numbers are per corpus, so the corpus must not move under them.
PACKAGES = ("transformers==4.46.3", "timm==1.0.11", "diffusers==0.31.0", "accelerate==1.1.1")
DEFAULT_WHEELS = Path.home() / ".cache" / "neuron-port-bench" / "wheels"


def wheel_for(requirement: str, wheels: Path) -> Path:
    """The wheel of ``name==version`` in ``wheels``, downloaded with pip when it is not there yet."""
    name, version = requirement.split("==")
    pattern = f"{name.replace('-', '_')}-{version}-*.whl"
    found = sorted(wheels.glob(pattern))
    if not found:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
                        "--disable-pip-version-check", "-q", "-d", str(wheels), requirement], check=True)
        found = sorted(wheels.glob(pattern))
    if not found:
        raise SystemExit(f"real_corpus: pip download {requirement} produced no {pattern} in {wheels}")
    return found[0]


def extract_python(wheel: Path, dest: Path) -> int:
    """Extract the ``.py`` members of ``wheel`` under ``dest``; returns how many."""
    count = 0
    with zipfile.ZipFile(wheel) as archive:
        for member in archive.namelist():
            if not member.endswith(".py") or ".dist-info/" in member or member.startswith(("/", "..")):
                continue
            target = dest / member
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(archive.read(member))
            count += 1
    return count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path, help="corpus folder to (re)create")
    parser.add_argument("--wheels", type=Path, default=DEFAULT_WHEELS,
                        help=f"where wheels are downloaded and reused (default {DEFAULT_WHEELS})")
    args = parser.parse_args()
    out = args.out.resolve()
    args.wheels.mkdir(parents=True, exist_ok=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    try:
        total = 0
        for requirement in PACKAGES:
            wheel = wheel_for(requirement, args.wheels)
            count = extract_python(wheel, staging / requirement.split("==")[0])
            print(f"{wheel.name}: {count} .py files", file=sys.stderr)
            total += count
        if out.exists():
            shutil.rmtree(out)
        staging.rename(out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    print(f"real_corpus: {total} .py files in {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
