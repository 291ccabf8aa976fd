"""A non-editable install (a wheel, as users get it) finds the registry, the schema and the CLI; the
release artefacts build without setuptools warnings, the sdist carries no tests (by choice: MANIFEST.in)
and builds the wheel, and the wheel installed into a fresh venv works without torch or ninja."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import tarfile
import venv
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

from conftest import REPO

CUDA_FILE = 'import torch\n\ndevice = "cuda"\nmodel = torch.nn.Linear(4, 4).cuda()\n'


@pytest.fixture(scope="module")
def dists(tmp_path_factory) -> tuple[Path, Path, str]:
    """(wheel, sdist, build log) from `python -m build`: the sdist from the checkout, the wheel from the
    unpacked sdist, as pip and PyPI users get them."""
    out = tmp_path_factory.mktemp("dist")
    build = subprocess.run([sys.executable, "-m", "build", "--outdir", str(out), str(REPO)],
                           capture_output=True, text=True, timeout=900)
    log = build.stdout + build.stderr
    assert build.returncode == 0, log[-5000:]
    (wheel,) = out.glob("neuron_port-*.whl")
    (sdist,) = out.glob("neuron_port-*.tar.gz")
    return wheel, sdist, log


@pytest.mark.slow
def test_build_prints_no_setuptools_warning(dists):
    _wheel, _sdist, log = dists
    for warning in ("Package would be ignored", "BuildBackendWarning", "SetuptoolsDeprecationWarning",
                    "is absent from the `packages` configuration"):
        assert warning not in log, log[-5000:]


@pytest.mark.slow
def test_wheel_carries_license_data_and_one_version(dists):
    wheel, _sdist, _log = dists
    import neuron_port

    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        info = f"neuron_port-{neuron_port.__version__}.dist-info"
        metadata = Parser().parsestr(archive.read(f"{info}/METADATA").decode())
        license_text = archive.read(f"{info}/licenses/LICENSE").decode()
    assert "Apache License" in license_text and "Version 2.0, January 2004" in license_text
    assert metadata["Version"] == neuron_port.__version__
    assert metadata["License-Expression"] == "Apache-2.0"
    assert any(url.startswith("Changelog, ") for url in metadata.get_all("Project-URL"))
    requires = metadata.get_all("Requires-Dist")
    ninja = [r for r in requires if r.startswith("ninja")]
    torch = [r for r in requires if r.startswith("torch")]
    assert ninja and all('extra == "sim"' in r for r in ninja + torch), requires
    assert "neuron_port/schema/report.schema.json" in names and "neuron_port/rules/op_policy.toml" in names
    assert "neuron_backend/csrc/aten/convolution.cpp" in names or any(
        n.startswith("neuron_backend/csrc/aten/") and n.endswith(".cpp") for n in names)
    assert not any(n.startswith(("tests/", "fixtures/")) for n in names)


@pytest.mark.slow
def test_sdist_has_no_tests_and_documents_the_release(dists):
    _wheel, sdist, _log = dists
    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    assert not any(n.startswith(("tests/", "fixtures/", "bench/")) for n in names), sorted(names)
    for document in ("LICENSE", "CHANGELOG.md", "CONTRIBUTING.md", "README.md", "pyproject.toml",
                     "docs/rules/NP101.md", "docs/rules/README.md", "rules/op_policy.toml"):
        assert document in names, document
    assert any(n.startswith("neuron_backend/csrc/") and n.endswith(".cpp") for n in names)


@pytest.mark.slow
def test_wheel_in_a_fresh_venv_without_torch(dists, tmp_path):
    """What a user of the static part gets: `pip install neuron-port` (dependencies from the index)."""
    wheel, _sdist, _log = dists
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    install = subprocess.run([str(python), "-m", "pip", "install", "--quiet", str(wheel)],
                             capture_output=True, text=True, timeout=900)
    assert install.returncode == 0, install.stderr[-3000:]
    listed = subprocess.run([str(python), "-m", "pip", "list", "--format", "json"], capture_output=True, text=True,
                            check=True).stdout
    packages = {p["name"].lower() for p in json.loads(listed)}
    assert "neuron-port" in packages and "libcst" in packages
    assert not packages & {"torch", "ninja", "numpy", "triton"}, packages
    assert not any(p.startswith("nvidia-") for p in packages)

    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "NEURON_PORT_SIMULATE")}
    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text(CUDA_FILE)
    tool = str(env_dir / "bin" / "neuron-port")

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([tool, *args], cwd=project, env=clean, capture_output=True, text=True, timeout=300)

    assert "rewrite" in run("--help").stdout
    check = run("rewrite", "--check", "--diff", "train.py")
    assert check.returncode == 1 and '+device = "neuron"' in check.stdout, check.stderr
    rewrite = run("rewrite", "train.py")
    assert rewrite.returncode in (0, 1), rewrite.stderr
    assert (project / "train.py").read_text() != CUDA_FILE
    assert run("rewrite", "--check", "--select", "NP101", "train.py").returncode == 0  # second run: nothing
    rules = run("rules", "--output-format", "json")
    assert {r["code"] for r in json.loads(rules.stdout)} >= {"NP101", "NP201"}
    explained = run("explain", "NP101")
    assert explained.returncode == 0 and explained.stdout.startswith("# NP101 cuda-device-string")
    assert run("--version").stdout.strip().endswith(Parser().parsestr(
        zipfile.ZipFile(wheel).read(next(n for n in zipfile.ZipFile(wheel).namelist()
                                         if n.endswith("dist-info/METADATA"))).decode())["Version"])

    doctor = run("doctor")
    assert doctor.returncode == 1
    assert "torch: missing: torch is not installed" in doctor.stdout
    assert f'{python} -m pip install "torch==2.13.0+cpu"' in doctor.stdout
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in doctor.stdout
    # check says the same before it runs anything: a usage error with the install command, no traceback
    checked = run("check", ".", "--", "python", "train.py")
    assert checked.returncode == 2, checked.stdout + checked.stderr
    assert "torch is not installed" in checked.stderr and "Traceback" not in checked.stderr
    assert f'{python} -m pip install "torch==2.13.0+cpu"' in checked.stderr

    # a CUDA build of torch, as pip lays it out (torch/version.py, nvidia-* metadata); importing it would
    # raise, so this also proves doctor reads the files instead of importing torch
    site = tmp_path / "cuda-site"
    (site / "torch").mkdir(parents=True)
    (site / "torch" / "__init__.py").write_text("raise ImportError('doctor must not import torch')\n")
    (site / "torch" / "version.py").write_text("from typing import Optional\n__version__ = '2.14.1'\n"
                                               "cuda: Optional[str] = '12.8'\n")
    for dist in ("torch-2.14.1", "nvidia_cublas_cu12-12.8.4.1", "triton-3.5.0"):
        info = site / f"{dist}.dist-info"
        info.mkdir()
        name, version = dist.rsplit("-", 1)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name.replace('_', '-')}\nVersion: {version}\n")
    doctor = subprocess.run([tool, "doctor"], cwd=project, env={**clean, "PYTHONPATH": str(site)},
                            capture_output=True, text=True, timeout=300)
    assert doctor.returncode == 1, doctor.stdout + doctor.stderr
    assert "torch is a CUDA build (torch.version.cuda = 12.8, with nvidia-cublas-cu12, triton)" in doctor.stdout
    assert f"{python} -m pip uninstall -y torch nvidia-cublas-cu12 triton" in doctor.stdout
    assert '"torch==2.13.0+cpu"' in doctor.stdout
    checked = subprocess.run([tool, "check", ".", "--", "python", "train.py"], cwd=project,
                             env={**clean, "PYTHONPATH": str(site)}, capture_output=True, text=True, timeout=300)
    assert checked.returncode == 2 and "torch is a CUDA build" in checked.stderr, checked.stderr


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
         "from neuron_port.commands.entry import main; main()"],
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
    # A folder shipped as package data is no package of ours: check's early path entry
    # (neuron_backend/identity/early/torch_neuronx, a top-level module on the child's PYTHONPATH).
    as_data = {REPO / package.replace(".", "/") / path for package, paths in setup.get("package-data", {}).items()
               for path in paths}
    found = set()
    for installed, folder in roots.items():
        for init in folder.rglob("__init__.py"):
            if init in as_data:
                continue
            rel = init.parent.relative_to(folder)
            found.add(".".join((installed, *rel.parts)) if rel.parts else installed)
    assert found - listed == set()
    assert listed - found == set()
