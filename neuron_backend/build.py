"""Build and load the C++ core of the simulated neuron device.

The extension is compiled on first use with ``torch.utils.cpp_extension.load`` into a cache folder
per torch version and source hash::

    ${NEURON_PORT_CACHE_DIR:-<user cache>/neuron-port}/torch-extensions/<torch version>-<hash>/

(the user cache as platformdirs finds it: ``$XDG_CACHE_HOME`` or ``~/.cache`` on Linux, see ``cache_root``)

Later imports load the cached ``.so`` directly (about 0.1 s). Concurrent first builds (several
ranks) are serialised by torch's own file baton (``lock`` file in the build folder): one process
builds, the others wait and then load the result. ``build(force=True)`` rebuilds;
``neuron-port doctor --build`` calls ``build()`` to prebuild.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import sys
import time
from pathlib import Path

_CSRC = Path(__file__).resolve().parent / "csrc"
_NAME = "neuron_port_sim"
_module = None
STALE_LOCK_S = 20 * 60


class BuildError(RuntimeError):
    """The C++ core could not be built; the message says what to install or fix."""


def _files(*suffixes: str) -> list[Path]:
    """Files under csrc/ (recursive) with one of the suffixes, sorted by their relative path."""
    return sorted((p for p in _CSRC.rglob("*") if p.is_file() and p.suffix in suffixes),
                  key=lambda p: p.relative_to(_CSRC).as_posix())


def sources() -> list[Path]:
    """The .cpp files of the extension (runtime/, aten/, accounting/, python/)."""
    srcs = _files(".cpp")
    # torch's ninja build names each object after the source's base name: they must be unique
    seen: dict[str, Path] = {}
    for p in srcs:
        if p.stem in seen:
            raise BuildError(f"neuron-port: two C++ sources share the name {p.stem!r} ({seen[p.stem]} and {p}); "
                             "torch.utils.cpp_extension would build both into one object file")
        seen[p.stem] = p
    return srcs


def source_hash() -> str:
    """Hash of every .cpp and .h under csrc/ (relative path and content)."""
    h = hashlib.sha256()
    for p in _files(".cpp", ".h"):
        h.update(p.relative_to(_CSRC).as_posix().encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:12]


def cache_root() -> Path:
    """``$NEURON_PORT_CACHE_DIR``, else neuron-port's folder in the user's cache as platformdirs places it
    (Linux: ``$XDG_CACHE_HOME/neuron-port`` or ``~/.cache/neuron-port``; macOS: ``~/Library/Caches/neuron-port``;
    Windows: ``%LOCALAPPDATA%\\neuron-port\\Cache``)."""
    root = os.environ.get("NEURON_PORT_CACHE_DIR")
    if root:
        return Path(root).expanduser()
    from platformdirs import user_cache_path

    folder = user_cache_path("neuron-port", appauthor=False)
    # a relative XDG_CACHE_HOME is ignored, as the XDG spec says (platformdirs would take it as it is)
    return folder if folder.is_absolute() else Path.home() / ".cache" / "neuron-port"


def build_dir_for(torch_version: str) -> Path:
    """The build folder of these sources for ``torch_version`` (a ``torch.__version__``)."""
    return cache_root() / "torch-extensions" / f"{torch_version.replace('+', '_')}-{source_hash()}"


def build_dir() -> Path:
    import torch

    return build_dir_for(torch.__version__)


def cached_library(torch_version: str) -> Path | None:
    """The built core for ``torch_version`` in the cache, or None (for `check`, which does not import torch)."""
    return _built_library(build_dir_for(torch_version))


def _built_library(d: Path) -> Path | None:
    so = d / f"{_NAME}.so"
    return so if so.exists() else None


def _check_toolchain() -> None:
    cxx = os.environ.get("CXX", "c++")
    if shutil.which(cxx) is None and shutil.which("g++") is None:
        raise BuildError(
            "neuron-port: building the simulated neuron device needs a C++ compiler, and none was found "
            f"({cxx!r} / 'g++' not on PATH). Install one, e.g. `sudo apt-get install g++` "
            "(Debian/Ubuntu) or `xcode-select --install` (macOS), then retry."
        )
    from torch.utils.cpp_extension import is_ninja_available

    if not is_ninja_available():
        bin_dir = Path(sys.executable).parent
        if (bin_dir / "ninja").exists() and str(bin_dir) not in os.environ.get("PATH", "").split(os.pathsep):
            # pip's ninja lives next to the interpreter of a venv that is not activated
            os.environ["PATH"] = str(bin_dir) + os.pathsep + os.environ.get("PATH", "")
            if is_ninja_available():
                return
        raise BuildError(
            "neuron-port: building the simulated neuron device needs ninja, and it was not found. "
            "Install it with `pip install ninja` (it is a dependency of neuron-port), then retry."
        )


def _load_prebuilt(so: Path):
    spec = importlib.util.spec_from_file_location(_NAME, so)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def build(force: bool = False, verbose: bool = False) -> Path:
    """Build the extension if needed (or always with ``force``) and return the path of the library."""
    import torch  # noqa: F401  (the extension links against libtorch)

    d = build_dir()
    so = _built_library(d)
    lock = d / "lock"  # torch's FileBaton: present while another process builds here
    if lock.exists() and time.time() - lock.stat().st_mtime > STALE_LOCK_S:
        print(f"neuron-port: removing a stale build lock {lock} (older than {STALE_LOCK_S // 60} min)",
              file=sys.stderr)
        lock.unlink(missing_ok=True)
    if so is not None and not force and not lock.exists():
        return so
    _check_toolchain()
    d.mkdir(parents=True, exist_ok=True)
    if force and so is not None:
        so.unlink()
    from torch.utils.cpp_extension import load

    if lock.exists():
        print("neuron-port: another process is building the simulated neuron device; waiting...",
              file=sys.stderr, flush=True)
    else:
        print("neuron-port: building the simulated neuron device (first use, about a minute)...",
              file=sys.stderr, flush=True)
    t0 = time.monotonic()
    global _module
    try:
        mod = load(
            name=_NAME,
            sources=[str(p) for p in sources()],
            extra_cflags=["-O2", "-fvisibility=hidden", "-Wno-unused-parameter"],
            extra_include_paths=[str(_CSRC)],
            build_directory=str(d),
            verbose=verbose,
            is_python_module=True,
        )
    except Exception as e:  # noqa: BLE001 - turned into a clear error
        raise BuildError(
            f"neuron-port: building the simulated neuron device failed in {d}: {e}\n"
            "Re-run with `neuron-port doctor --build` (or neuron_backend.build.build(force=True, verbose=True)) "
            "to see the compiler output."
        ) from e
    if _module is None:
        _module = mod
    print(f"neuron-port: simulated neuron device ready in {time.monotonic() - t0:.0f} s ({d})", file=sys.stderr,
          flush=True)
    so = _built_library(d)
    if so is None:
        raise BuildError(f"neuron-port: the build finished but {d}/{_NAME}.so is missing")
    return so


def load_extension():
    """Return the loaded C++ module, building it on first use."""
    global _module
    if _module is not None:
        return _module
    name = f"{__package__}._C"
    if name in sys.modules:
        _module = sys.modules[name]
        return _module
    so = build()  # sets _module when it had to build (torch's builder imports the module)
    if _module is None:
        _module = _load_prebuilt(so)
    sys.modules[name] = _module
    return _module
