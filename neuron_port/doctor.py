"""What the simulator needs (a CPU build of torch, a C++ compiler, ninja), for `neuron-port doctor` and for
`check` before it runs anything.

Nothing here imports torch: whether it is installed, and which build it is, is read from the installed
files (``torch/version.py`` and the package metadata), so the static path stays free of torch and a
broken or CUDA-only torch cannot crash the diagnosis.
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import os
import shlex
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

# The torch the simulator is tested with, from PyTorch's CPU wheel index (PyPI's Linux torch is a CUDA
# build that pulls nvidia-* and triton, several GB the simulator never uses).
SIMULATOR_TORCH = "2.13.0"
CPU_INDEX_URL = "https://download.pytorch.org/whl/cpu"
# Distributions that come only with a CUDA build of torch.
CUDA_ONLY_PREFIXES = ("nvidia-", "triton")


@dataclass(frozen=True)
class Requirement:
    name: str
    found: Optional[str]  # where it was found (or "found"); None when missing
    hint: str  # what to do when it is missing

    def line(self) -> str:
        return f"{self.name}: {self.found or 'missing: ' + self.hint}"


def cpu_torch_install_command(python: str = sys.executable) -> str:
    """The exact command that installs the simulator's torch (CPU build), numpy and ninja into ``python``."""
    return (f"{shlex.quote(python)} -m pip install \"torch=={SIMULATOR_TORCH}+cpu\" numpy \"ninja>=1.11\" "
            f"--extra-index-url {CPU_INDEX_URL}")


def _torch_cuda_version(torch_folder: Path) -> Optional[str]:
    """``torch.version.cuda`` read from ``torch/version.py`` without importing torch (None: a CPU build)."""
    try:
        tree = ast.parse((torch_folder / "version.py").read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return None
    for node in tree.body:
        target = node.target if isinstance(node, ast.AnnAssign) else (
            node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None)
        if isinstance(target, ast.Name) and target.id == "cuda" and isinstance(node.value, ast.Constant):
            return str(node.value.value) if node.value.value else None
    return None


def cuda_only_distributions() -> list[str]:
    """Installed distributions that only a CUDA build of torch brings (nvidia-cublas-cu12, triton, ...)."""
    names = set()
    for dist in importlib.metadata.distributions():
        name = (dist.metadata["Name"] or "").lower()
        if name.startswith(CUDA_ONLY_PREFIXES):
            names.add(name)
    return sorted(names)


def torch_install_problem(python: str = sys.executable) -> Optional[str]:
    """Why the simulator cannot use this interpreter's torch, with the exact commands that fix it; None
    when a CPU build of torch is installed. For `doctor`, and for `check` before it starts the command."""
    spec = importlib.util.find_spec("torch")
    install = cpu_torch_install_command(python)
    if spec is None or not spec.submodule_search_locations:
        return (f"torch is not installed (the simulator's `sim` extra); install the CPU build:\n  {install}")
    cuda = _torch_cuda_version(Path(list(spec.submodule_search_locations)[0]))
    if cuda is None:
        return None
    extra = cuda_only_distributions()
    remove = " ".join(["torch", *extra])
    return (f"torch is a CUDA build (torch.version.cuda = {cuda}{', with ' + ', '.join(extra) if extra else ''}): "
            f"the simulator needs the CPU build, and the CUDA one costs several GB; replace it:\n"
            f"  {shlex.quote(python)} -m pip uninstall -y {remove}\n  {install}")


def _compiler() -> Optional[str]:
    """The C++ compiler the simulator's build would use ($CXX, else c++, else g++), as the build looks for it."""
    return shutil.which(os.environ.get("CXX", "c++")) or shutil.which("g++")


def _tool(name: str) -> Optional[str]:
    # pip's ninja lives next to the interpreter of a venv that is not activated
    return shutil.which(name) or shutil.which(name, path=os.path.dirname(sys.executable))


def requirements() -> list[Requirement]:
    problem = torch_install_problem()
    return [Requirement("torch", None if problem else "found (CPU build)", problem or ""),
            Requirement("g++", _compiler(), "install a C++ compiler (e.g. apt-get install g++)"),
            Requirement("ninja", _tool("ninja"), f"{shlex.quote(sys.executable)} -m pip install \"ninja>=1.11\"")]


def core_is_built() -> bool:
    """Whether the simulator's C++ core is built and verified for this install (torch, Python, compiler, sources)."""
    from neuron_backend import build  # reads csrc/, torch/version.py and the cache folder; imports no torch

    return build.ready_library() is not None


def core_status_line() -> str:
    """`doctor`'s line about the core: built for this install or not, where, and a build in progress by whom."""
    from neuron_backend import build

    state = build.status()
    if state is None:
        return "simulator core: not built (it needs torch, see above)"
    if state.builder is not None:
        return (f"simulator core: being built now by {state.builder.describe()} into {state.folder} "
                f"(a first build takes {build.COLD_BUILD_TIME})")
    if state.built:
        return f"simulator core: built for this install in {state.folder}"
    what = ("not built yet for this install" if state.reason == "not built yet"
            else f"to be rebuilt ({state.reason})")
    if state.last_builder is not None:
        what += f"; the last build, by {state.last_builder.describe()}, did not finish"
    return (f"simulator core: {what}: it builds on first use ({build.COLD_BUILD_TIME}) into {state.folder}, "
            "or now with `neuron-port doctor --build`")


def build_problem() -> Optional[str]:
    """Why the simulator's C++ core can neither be loaded nor built (doctor's lines for what is missing);
    None when it is built already or the tools to build it are there. For `check` before it starts the command."""
    missing = [r for r in requirements()[1:] if not r.found]
    if not missing or core_is_built():
        return None
    return ("the simulator's C++ core is not built yet, and building it needs what is missing here:\n  "
            + "\n  ".join(r.line() for r in missing)
            + "\n(`neuron-port doctor` checks the set-up; `neuron-port doctor --build` builds the core once it passes)")


def real_trainium_notes() -> list[str]:
    if importlib.util.find_spec("torch_neuronx") is not None:
        return ["torch_neuronx: installed: this is a real Trainium setup; the simulator will not register"]
    return []
