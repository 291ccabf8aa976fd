"""Patching a library right after it is imported: the shape-only hooks on transformers, diffusers, safetensors
and FSDP (which a program imports after torch, when the simulator has started already), and the compile
backend's registration with torch._dynamo (compile/backend.py)."""

from __future__ import annotations

import importlib.util
import sys


class AfterImport:
    """A meta-path finder that calls ``patch(module)`` right after ``name`` is imported (once)."""

    def __init__(self, name: str, patch) -> None:
        self.name, self.patch = name, patch

    def find_spec(self, name, path=None, target=None):
        if name != self.name:
            return None
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader_exec = spec.loader.exec_module

        def exec_module(module):
            loader_exec(module)
            self.patch(module)

        spec.loader.exec_module = exec_module
        return spec


def after_import(name: str, patch) -> None:
    """``patch(module)`` now if ``name`` is imported already, else right after its import. A module still
    being imported (it imported torch, which started the simulator) is left as it is."""
    if name in sys.modules:
        if not getattr(getattr(sys.modules[name], "__spec__", None), "_initializing", False):
            patch(sys.modules[name])
    elif not any(isinstance(f, AfterImport) and f.name == name for f in sys.meta_path):
        sys.meta_path.insert(0, AfterImport(name, patch))
