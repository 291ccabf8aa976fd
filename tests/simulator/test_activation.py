"""Activation: off without NEURON_PORT_SIMULATE; device count from the NEURON_RT_* variables; refusal
when the real torch_neuronx is installed; clear build errors."""

import json
import os
import sys
from pathlib import Path

import pytest

from .conftest import PRELUDE


def test_visible_core_count_parsing():
    pytest.importorskip("torch")
    from neuron_backend.device.runtime import visible_core_count

    assert visible_core_count({}) == 4
    assert visible_core_count({"NEURON_RT_VISIBLE_CORES": "0-3"}) == 4
    assert visible_core_count({"NEURON_RT_VISIBLE_CORES": "2"}) == 1
    assert visible_core_count({"NEURON_RT_VISIBLE_CORES": "0,1"}) == 2
    assert visible_core_count({"NEURON_RT_VISIBLE_CORES": "0-1,4-5"}) == 4
    assert visible_core_count({"NEURON_RT_NUM_CORES": "8"}) == 8
    assert visible_core_count({"NEURON_RT_VISIBLE_CORES": "2-3", "NEURON_RT_NUM_CORES": "8"}) == 2


def test_import_is_cheap_and_does_not_import_torch():
    import subprocess

    code = "import sys, neuron_backend; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": os.path.dirname(os.path.dirname(os.path.dirname(__file__)))})
    assert out.stdout.strip() == "False", out.stderr


@pytest.mark.slow
def test_device_count_follows_env(run_sim):
    r = run_sim(PRELUDE + """
out = {"count": torch.neuron.device_count(), "accel": torch.accelerator.device_count()}
torch.neuron.set_device(1)
try:
    torch.neuron.set_device(2)
except ValueError as e:
    out["err"] = str(e)
result(out)
""", env={"NEURON_RT_VISIBLE_CORES": "2-3"})
    assert r.result == {"count": 2, "accel": 2, "err": "Invalid device id: 2. Valid range is 0 to 1"}


@pytest.mark.slow
def test_not_enabled_without_env_var(run_sim):
    r = run_sim("""
import json, sys, torch
print("RESULT:" + json.dumps({
    "backend": torch._C._get_privateuse1_backend_name(),
    "has_neuron": hasattr(torch, "neuron"),
    "core_loaded": "neuron_backend._C" in sys.modules,
}))
""", simulate=False)
    assert r.result == {"backend": "privateuseone", "has_neuron": False, "core_loaded": False}
    assert r.event_files() == []


@pytest.mark.slow
def test_autoload_through_entry_point(run_sim):
    from importlib.metadata import entry_points

    if not any(ep.value == "neuron_backend:_autoload" for ep in entry_points(group="torch.backends")):
        pytest.skip("neuron-port is not pip-installed (no torch.backends entry point)")
    r = run_sim("""
import json, torch
print("RESULT:" + json.dumps([str(torch.ones(1, device="neuron").device), torch.neuron.device_count()]))
""")
    assert r.result == ["neuron:0", 4]


@pytest.mark.slow
def test_refuses_when_real_torch_neuronx_is_installed(run_sim, tmp_path):
    fake = tmp_path / "fake_site" / "torch_neuronx"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    r = run_sim("""
import json, warnings, torch, neuron_backend
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    ok = neuron_backend.enable()
print("RESULT:" + json.dumps({"ok": ok, "warn": [str(x.message) for x in w],
                              "backend": torch._C._get_privateuse1_backend_name()}))
""", simulate=False, env={"PYTHONPATH": f"{tmp_path / 'fake_site'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"
                          f"{os.pathsep}{os.path.dirname(os.path.dirname(os.path.dirname(__file__)))}"})
    out = r.result
    assert out["ok"] is False and out["backend"] == "privateuseone"
    assert any("torch_neuronx" in m for m in out["warn"])


def test_missing_ninja_gives_clear_error(monkeypatch):
    pytest.importorskip("torch")
    import torch.utils.cpp_extension as ce

    from neuron_backend import build

    monkeypatch.setattr(ce, "is_ninja_available", lambda: False)
    monkeypatch.setattr(build.sys, "executable", "/nonexistent/python")
    with pytest.raises(build.BuildError, match="pip install ninja"):
        build._check_toolchain()


def test_missing_compiler_gives_clear_error(monkeypatch):
    from neuron_backend import build

    monkeypatch.setattr(build.shutil, "which", lambda name: None)
    with pytest.raises(build.BuildError, match="g\\+\\+"):
        build._check_toolchain()


def test_cache_dir_is_per_build_key(monkeypatch, tmp_path):
    """The build folder is named by the torch version, the Python tag and a hash of the whole build key (which
    holds no install path: two installs of the same sources, torch, Python and compiler share it)."""
    torch = pytest.importorskip("torch")
    from neuron_backend import build

    monkeypatch.setenv("NEURON_PORT_CACHE_DIR", str(tmp_path))
    d = build.build_dir()
    key = build.current_key()
    assert d.parent == tmp_path / "torch-extensions"
    assert d.name.startswith(f"{torch.__version__.replace('+', '_')}-{sys.implementation.cache_tag}-")
    assert key["torch"] == torch.__version__ and key["torch_git"] == torch.version.git_version
    assert key["sources"].startswith(build.source_hash())
    assert str(Path(build.__file__).parent) not in json.dumps(key)


def test_unity_files_include_every_source_once(tmp_path):
    """The build compiles two unity files: together they include every .cpp of csrc/ exactly once, by its path
    relative to csrc/ (the same text for every install), and a second call leaves them untouched."""
    import re

    from neuron_backend import build

    files = build.unity_sources(tmp_path)
    included = [line for f in files for line in re.findall(r'#include "(.+)"', f.read_text())]
    assert sorted(included) == sorted(p.relative_to(Path(build.__file__).parent / "csrc").as_posix() for p in build.sources())
    stamps = [f.stat().st_mtime_ns for f in files]
    assert build.unity_sources(tmp_path) == files and [f.stat().st_mtime_ns for f in files] == stamps
