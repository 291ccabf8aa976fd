"""What makes a built C++ core usable by this install: the build key, computed without importing torch.

Two installs share a build only when everything that makes a ``.so`` incompatible is the same: torch's
version and build (``torch/version.py``: version, git commit, debug), the Python version and ABI
(``sys.implementation.cache_tag``, ``SOABI``), the compiler (``$CXX --version``, as torch's builder
calls it), the build's flags and layout (``recipe``) and the sources' content. Where torch or the package
is installed is not part of it: the sources are copied into the build folder before they are compiled, so
the build never names the install's path.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import json
import os
import shlex
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Optional

TORCH_FIELDS = ("__version__", "git_version", "debug")


def torch_version_fields() -> Optional[dict]:
    """``torch/version.py``'s version, git commit and debug flag, read without importing torch (None when torch
    is not installed)."""
    spec = importlib.util.find_spec("torch")  # torch's own spec once it is imported
    if spec is None or not spec.submodule_search_locations:
        return None
    try:
        tree = ast.parse((Path(list(spec.submodule_search_locations)[0]) / "version.py").read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return None
    fields = {}
    for node in tree.body:
        target = node.target if isinstance(node, ast.AnnAssign) else (
            node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None)
        if isinstance(target, ast.Name) and target.id in TORCH_FIELDS and isinstance(node.value, ast.Constant):
            fields[target.id] = node.value.value
    return fields if "__version__" in fields else None


def compiler_identity() -> str:
    """The first line of ``$CXX --version`` (torch's builder compiles with ``$CXX``, else ``c++``)."""
    cxx = shlex.split(os.environ.get("CXX", "c++")) or ["c++"]
    try:
        proc = subprocess.run([*cxx, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{' '.join(cxx)}: {exc.__class__.__name__}"
    lines = proc.stdout.strip().splitlines()
    return lines[0] if lines else f"{' '.join(cxx)}: exit {proc.returncode}"


def tree_hash(folder: Path, suffixes: tuple[str, ...] = (".cpp", ".h")) -> str:
    """sha256 of the files under ``folder`` with these suffixes (relative path and content, sorted by path)."""
    h = hashlib.sha256()
    files = sorted((p for p in folder.rglob("*") if p.is_file() and p.suffix in suffixes),
                   key=lambda p: p.relative_to(folder).as_posix())
    for p in files:
        rel = p.relative_to(folder).as_posix().encode()
        data = p.read_bytes()
        # lengths first, so that moving bytes between a name and a content cannot give the same hash
        h.update(len(rel).to_bytes(8, "little") + rel + len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


def build_key(csrc: Path, recipe: dict, torch_fields: Optional[dict] = None) -> Optional[dict]:
    """The key of a build of ``csrc`` with ``recipe`` for this interpreter, torch and compiler; None without torch."""
    torch_fields = torch_fields if torch_fields is not None else torch_version_fields()
    if torch_fields is None:
        return None
    return {
        "torch": str(torch_fields["__version__"]),
        "torch_git": str(torch_fields.get("git_version", "")),
        "torch_debug": bool(torch_fields.get("debug", False)),
        "python": sys.implementation.cache_tag or sys.version.split()[0],
        "soabi": sysconfig.get_config_var("SOABI") or "",
        "compiler": compiler_identity(),
        "recipe": recipe,
        "sources": tree_hash(csrc),
    }


def folder_name(key: dict) -> str:
    """The build folder's name: readable parts first (torch version, Python tag), then a hash of the whole key."""
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    return f"{key['torch'].replace('+', '_')}-{key['python']}-{digest}"
