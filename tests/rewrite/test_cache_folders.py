"""Where neuron-port keeps per-user files: the result cache's key and the simulator's build folder are in
the user cache folder platformdirs names (on Linux $XDG_CACHE_HOME, else ~/.cache), through the real CLI
and the build module in child processes with their own HOME and XDG_CACHE_HOME."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from platformdirs import user_cache_path

from conftest import REPO, run_cli


def folders(env: dict) -> dict:
    probe = ("from neuron_port.rewrite.cache_files import user_cache_folder\n"
             "from neuron_backend.build import cache_root\n"
             "print(user_cache_folder()); print(cache_root())")
    full = {k: v for k, v in os.environ.items() if k not in ("XDG_CACHE_HOME", "NEURON_PORT_CACHE_DIR")}
    full.update(env, PYTHONPATH=str(REPO))
    out = subprocess.run([sys.executable, "-c", probe], env=full, capture_output=True, text=True, check=True)
    return dict(zip(("key_folder", "build_root"), out.stdout.split()))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the XDG layout is Linux's")
def test_user_cache_folder_follows_xdg_on_linux(tmp_path):
    home, xdg = tmp_path / "home", tmp_path / "xdg"
    assert folders({"HOME": str(home), "XDG_CACHE_HOME": str(xdg)}) == {
        "key_folder": str(xdg / "neuron-port"), "build_root": str(xdg / "neuron-port")}
    default = str(home / ".cache" / "neuron-port")
    assert folders({"HOME": str(home)}) == {"key_folder": default, "build_root": default}
    # a relative XDG_CACHE_HOME is ignored, as the XDG spec says (platformdirs alone would take it)
    assert folders({"HOME": str(home), "XDG_CACHE_HOME": "relative/cache"}) == {
        "key_folder": default, "build_root": default}
    assert folders({"HOME": str(home), "NEURON_PORT_CACHE_DIR": str(tmp_path / "own")})["build_root"] == \
        str(tmp_path / "own")


def test_same_folder_as_platformdirs(tmp_path):
    expected = str(user_cache_path("neuron-port", appauthor=False))
    if not os.path.isabs(expected):
        pytest.skip("XDG_CACHE_HOME is relative in this environment")
    env = {"HOME": os.environ.get("HOME", str(tmp_path))}
    if os.environ.get("XDG_CACHE_HOME"):
        env["XDG_CACHE_HOME"] = os.environ["XDG_CACHE_HOME"]
    assert folders(env)["key_folder"] == expected


def test_rewrite_creates_its_key_there(tmp_path):
    (tmp_path / "proj" / ".git").mkdir(parents=True)
    (tmp_path / "proj" / "a.py").write_text("x = y.cuda()\n")
    xdg = tmp_path / "xdg"
    result = run_cli("rewrite", "--cache", "--check", "a.py", cwd=tmp_path / "proj", env={"XDG_CACHE_HOME": str(xdg)})
    assert result.returncode == 1, result.stderr
    key = xdg / "neuron-port" / "key"
    assert key.is_file() and oct(key.stat().st_mode & 0o777) == "0o600"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the fast path is Linux's")
@pytest.mark.parametrize("env", [
    {"HOME": "{tmp}/home"}, {"HOME": "{tmp}/home/"}, {"HOME": "/"}, {"HOME": "{tmp}/home", "XDG_CACHE_HOME": "{tmp}/x"},
    {"HOME": "{tmp}/home", "XDG_CACHE_HOME": "{tmp}/x/"}, {"HOME": "{tmp}/home", "XDG_CACHE_HOME": ""},
    {"HOME": "{tmp}/home", "XDG_CACHE_HOME": "rel"}, {"HOME": "rel", "XDG_CACHE_HOME": "{tmp}/x"}, {"HOME": "rel"}])
def test_the_key_folder_is_read_without_platformdirs_and_is_its_answer(tmp_path, env):
    """Every rewrite reads the key (rewrite/dataclass_code.py): on Linux it is found without importing
    platformdirs (~5 ms), in the folder platformdirs names (what user_cache_folder returned before)."""
    probe = ("import sys\nfrom pathlib import Path\nfrom neuron_port.rewrite.cache_files import user_cache_folder\n"
             "mine = user_cache_folder(); fast = 'platformdirs' not in sys.modules\n"
             "from platformdirs import user_cache_path\nfolder = user_cache_path('neuron-port', appauthor=False)\n"
             "print(mine, fast, folder if folder.is_absolute() else Path.home() / '.cache' / 'neuron-port')")
    full = {k: v for k, v in os.environ.items() if k not in ("XDG_CACHE_HOME", "HOME")}
    full.update({k: v.format(tmp=tmp_path) for k, v in env.items()}, PYTHONPATH=str(REPO))
    out = subprocess.run([sys.executable, "-c", probe], env=full, capture_output=True, text=True, check=True)
    mine, fast, expected = out.stdout.split()
    assert mine == expected
    assert fast == str(env != {"HOME": "rel"})  # a relative HOME is left to platformdirs (it reads pwd)
