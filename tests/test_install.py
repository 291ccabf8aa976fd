"""A non-editable install (a wheel, as users get it) finds the registry, the schema and the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig

import pytest

from conftest import REPO


@pytest.mark.slow
def test_wheel_install_finds_registry(tmp_path):
    target = tmp_path / "site"
    build = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
         "--target", str(target), str(REPO)],
        capture_output=True, text=True, timeout=600,
    )
    assert build.returncode == 0, build.stderr
    assert (target / "neuron_port" / "rules" / "registry.py").is_file()
    assert (target / "neuron_port" / "rules" / "op_policy.toml").is_file()
    assert (target / "neuron_port" / "schema" / "report.schema.json").is_file()
    # run from an unrelated folder with only the installed copy (plus third-party deps) importable
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(target), sysconfig.get_paths()["purelib"]])
    env["PYTHONNOUSERSITE"] = "1"
    probe = subprocess.run(
        [sys.executable, "-S", "-c",
         "import sys; sys.path[:0] = __import__('os').environ['PYTHONPATH'].split(':');"
         "import neuron_port.rules.registry as r, neuron_port;"
         "print(neuron_port.__file__); print(len(r.all_rules()))"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )
    assert probe.returncode == 0, probe.stderr
    location, count = probe.stdout.split()
    assert location.startswith(str(target))
    assert int(count) >= 2
    listing = subprocess.run(
        [sys.executable, "-S", "-c",
         "import sys; sys.path[:0] = __import__('os').environ['PYTHONPATH'].split(':');"
         "sys.argv = ['neuron-port', 'rules', '--output-format', 'json'];"
         "from neuron_port.cli import main; main()"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )
    assert listing.returncode == 0, listing.stderr
    assert {r["code"] for r in json.loads(listing.stdout)} >= {"NP201", "NP202"}


def test_every_package_is_listed_for_the_wheel():
    """pyproject.toml lists packages by hand (``rules/`` installs as ``neuron_port.rules``): a package
    folder missing there would be left out of the wheel and fail only after installation."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    setup = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(setup["packages"])
    roots = {installed: REPO / folder for installed, folder in setup["package-dir"].items()}
    found = set()
    for installed, folder in roots.items():
        for init in folder.rglob("__init__.py"):
            rel = init.parent.relative_to(folder)
            found.add(".".join((installed, *rel.parts)) if rel.parts else installed)
    assert found - listed == set()
    assert listed - found == set()
