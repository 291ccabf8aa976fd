"""ruff's command-line conventions, through the real CLI: --exit-zero, --statistics, metavars in --help
(under the newest typer and the lowest of the range pyproject.toml allows), shell completion, `check`
refusing a command that does not follow `--`, and --config requiring the [tool.neuron-port] table."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

SOURCE = ('import torch\nx = torch.zeros(2).cuda()\nd = torch.device("cuda")\nif torch.cuda.is_available():\n'
          "    torch.cuda.synchronize()\nmajor, _ = torch.cuda.get_device_capability()\n")
COMMANDS = ("rewrite", "check", "rules", "explain", "doctor")


@pytest.fixture
def project(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / "s.py").write_text(SOURCE)
    return tmp_path


# -- --exit-zero -------------------------------------------------------------------------------------------
def test_exit_zero_with_findings_but_not_with_errors(project, cli):
    assert cli("rewrite", "--check", "s.py", cwd=project).returncode == 1
    assert cli("rewrite", "--check", "--exit-zero", "s.py", cwd=project).returncode == 0
    assert cli("rewrite", "--exit-zero", "--fail-on", "info", "s.py", cwd=project).returncode == 0
    assert (project / "s.py").read_text() != SOURCE  # it still rewrote
    (project / "broken.py").write_text("x = y.cuda(\n")
    result = cli("rewrite", "--check", "--exit-zero", ".", cwd=project)
    assert result.returncode == 1 and "broken.py" in result.stderr  # a file that could not be processed
    assert cli("rewrite", "--exit-zero", "--select", "NP999", ".", cwd=project).returncode == 2  # usage


def test_check_exit_zero_keeps_a_failed_command_non_zero(project, cli):
    (project / "ok.py").write_text("print('ok')\n")
    (project / "fails.py").write_text("raise SystemExit(3)\n")
    base = ("check", ".", "--no-cache", "-q")
    assert cli(*base, "--", "python", "ok.py", cwd=project).returncode == 1  # s.py's findings
    assert cli(*base, "--exit-zero", "--", "python", "ok.py", cwd=project).returncode == 0
    assert cli(*base, "--exit-zero", "--", "python", "fails.py", cwd=project).returncode == 1
    counted = cli(*base, "--statistics", "--", "python", "ok.py", cwd=project)
    assert (counted.returncode, counted.stdout.splitlines()[0]) == (1, "2\tNP201\t[*] cuda-api-call")


# -- --statistics ------------------------------------------------------------------------------------------
def test_statistics_in_ruffs_format(project, cli):
    result = cli("rewrite", "--check", "--statistics", "s.py", cwd=project)
    assert result.returncode == 1
    assert result.stdout == ("2\tNP201\t[*] cuda-api-call\n"
                             "1\tNP101\t[*] cuda-device-string\n"
                             "1\tNP103\t[*] cuda-method-call\n"
                             "1\tNP202\t[ ] cuda-api-no-equivalent\n")
    as_json = cli("rewrite", "--check", "--statistics", "--output-format", "json", "s.py", cwd=project)
    assert json.loads(as_json.stdout) == [
        {"code": "NP201", "name": "cuda-api-call", "count": 2, "fixable": True},
        {"code": "NP101", "name": "cuda-device-string", "count": 1, "fixable": True},
        {"code": "NP103", "name": "cuda-method-call", "count": 1, "fixable": True},
        {"code": "NP202", "name": "cuda-api-no-equivalent", "count": 1, "fixable": False},
    ]
    # after writing the safe fixes only the finding without a fix is left; no fixable code: no markers
    written = cli("rewrite", "--statistics", "--exit-zero", "s.py", cwd=project)
    assert (written.returncode, written.stdout) == (0, "1\tNP202\tcuda-api-no-equivalent\n")
    clean = cli("rewrite", "--check", "--statistics", "--select", "NP1", "s.py", cwd=project)
    assert (clean.returncode, clean.stdout) == (0, "")
    sarif = cli("rewrite", "--statistics", "--output-format", "sarif", "s.py", cwd=project)
    assert sarif.returncode == 2 and "--statistics prints text or json" in sarif.stderr


def test_statistics_aligns_counts_and_codes(tmp_path, cli):
    (tmp_path / "many.py").write_text("import torch\n" + "torch.cuda.synchronize()\n" * 12
                                      + "x = y.cuda()\n")
    lines = cli("rewrite", "--check", "--statistics", "many.py", cwd=tmp_path).stdout.splitlines()
    assert lines == ["12\tNP201\t[*] cuda-api-call", " 1\tNP103\t[*] cuda-method-call"]


# -- --help, metavars, typer range, completion -------------------------------------------------------------
def help_texts(python: str, env: dict | None = None) -> dict[str, str]:
    texts = {}
    for command in COMMANDS:
        result = subprocess.run([python, "-m", "neuron_port", command, "--help"], capture_output=True, text=True,
                                env=env, cwd=REPO, timeout=120)
        assert result.returncode == 0, result.stderr
        texts[command] = result.stdout
    return texts


def check_help(texts: dict[str, str]) -> None:
    for command, text in texts.items():
        assert not re.search(r"\{\w|<(list|int|float|str|path|Path)", text), (command, text)
    assert texts["rewrite"].startswith("Usage: neuron-port rewrite [OPTIONS] PATH...\n")
    assert texts["check"].startswith("Usage: neuron-port check [OPTIONS] PATH [-- COMMAND...]\n")
    assert texts["explain"].startswith("Usage: neuron-port explain [OPTIONS] CODE\n")
    assert re.search(r"^  PATH\.\.\.\s+Files or folders to rewrite", texts["rewrite"], re.M)
    assert re.search(r"^  CODE\s+A rule code", texts["explain"], re.M)
    for metavar in ("--select CODE", "--extend-select CODE", "--output-format FORMAT", "--config FILE",
                    "--jobs N", "--exclude GLOB", "--fail-on SEVERITY", "--stdin-filename NAME", "--max-file-size MB",
                    "--target TARGET", "--instance NAME", "--exit-zero", "--statistics", "--fix"):
        assert metavar in texts["rewrite"], metavar
    for metavar in ("--timeout SECONDS", "--nproc N", "--output FILE", "--exit-zero", "--extend-ignore CODE"):
        assert metavar in texts["check"], metavar


def test_help_shows_metavars(cli):
    import typer

    check_help(help_texts(sys.executable))
    assert typer.__version__.startswith("0.29"), "the newest typer of the range is the one tested here"


def typer_requirement() -> str:
    text = (REPO / "pyproject.toml").read_text()
    return re.search(r'"(typer[^"]*)"', text).group(1)


def test_typer_is_capped_to_the_tested_range():
    assert typer_requirement() == "typer>=0.26,<0.30"


@pytest.mark.slow
def test_help_and_completion_under_the_lowest_typer(tmp_path):
    """pip installs typer 0.26.0 into a folder that shadows the venv's typer; the help and the completion
    script must be the same as under the newest release."""
    lowest = re.search(r">=([\d.]+)", typer_requirement()).group(1) + ".0"
    target = tmp_path / "typer_low"
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps",
                          "--target", str(target), f"typer=={lowest}"], capture_output=True, text=True, timeout=300)
    if pip.returncode != 0:
        pytest.skip(f"pip could not install typer=={lowest} (no package index?): {pip.stderr[-500:]}")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(target), str(REPO)]))
    version = subprocess.run([sys.executable, "-c", "import typer; print(typer.__version__)"], env=env,
                             capture_output=True, text=True).stdout.strip()
    assert version == lowest
    low = help_texts(sys.executable, env)
    check_help(low)
    assert low == help_texts(sys.executable)
    # typed in bash, as a user does: `--show-completion` shows the completion of the shell it runs in (typer
    # detects it from the parent processes; an argument after it is not read as the shell; `; exit $?` keeps
    # bash from exec-ing the command, which would leave it no shell parent)
    script = subprocess.run([shutil.which("bash") or "bash", "-c", f'"{sys.executable}" -m neuron_port --show-completion; exit $?'],
                            env=env, capture_output=True, text=True)
    assert "_NEURON_PORT_COMPLETE=complete_bash" in script.stdout, script.stderr


def test_show_completion_prints_a_script_that_completes_in_bash(tmp_path):
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("no bash")
    executable = Path(sys.executable).parent / "neuron-port"
    assert executable.exists(), "the console script of the installed package"
    env = dict(os.environ, PATH=os.pathsep.join([str(executable.parent), os.environ.get("PATH", "")]))
    # typed in bash (typer detects the shell from the parent processes; started outside a shell, as from a
    # detached job, it finds none)
    script = subprocess.run([bash, "-c", f'"{executable}" --show-completion; exit $?'], capture_output=True, text=True,
                            env=env)
    assert script.returncode == 0 and "complete -o default -F _neuron_port_completion neuron-port" in script.stdout
    (tmp_path / "completion.bash").write_text(script.stdout)
    # what bash does on <TAB>: the function the script registered, given the command and the words typed
    probe = ('source completion.bash; for words in "neuron-port rew" "neuron-port rewrite --extend-s" '
             '"neuron-port rewrite --output-format s"; do COMP_WORDS=($words); '
             'COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _neuron_port_completion neuron-port; echo "${COMPREPLY[*]}"; done')
    result = subprocess.run([bash, "-c", probe], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert result.stdout.splitlines() == ["rewrite", "--extend-select", "sarif"], result.stderr
    installed = subprocess.run([str(executable), "--help"], capture_output=True, text=True, env=env)
    assert "--install-completion" in installed.stdout and "--show-completion" in installed.stdout


# -- check: the command only after `--` --------------------------------------------------------------------
def test_check_refuses_a_command_without_dashes(project, cli):
    (project / "z.py").write_text("open('ran', 'w').write('yes')\n")
    result = cli("check", ".", "python", "z.py", "--steps", "4", "--timeout", "5", cwd=project)
    assert result.returncode == 2
    assert "put `--` before the command" in result.stderr and "python z.py --steps 4" in result.stderr
    assert not (project / "ran").exists()
    before = cli("check", ".", "python", "z.py", "--", "--steps", "4", cwd=project)
    assert before.returncode == 2 and "unexpected argument(s) before `--`: python z.py" in before.stderr
    unknown = cli("check", ".", "--bogus", "--", "python", "z.py", cwd=project)
    assert unknown.returncode == 2 and "--bogus" in unknown.stderr
    assert not (project / "ran").exists()


def test_check_gives_the_command_its_own_options_after_dashes(project, cli):
    (project / "z.py").write_text("import sys\nopen('argv', 'w').write(' '.join(sys.argv[1:]))\n")
    result = cli("check", ".", "-q", "--no-cache", "--exit-zero", "--timeout", "120", "--", "python", "z.py",
                 "--steps", "4", "--timeout", "5", cwd=project)
    assert result.returncode == 0, result.stderr
    assert (project / "argv").read_text() == "--steps 4 --timeout 5"
    (project / "argv").unlink()
    (project / "pyproject.toml").write_text("[tool.neuron-port]\ncheck-command = \"python z.py --from-config\"\n")
    assert cli("check", ".", "-q", "--no-cache", "--exit-zero", cwd=project).returncode == 0
    assert (project / "argv").read_text() == "--from-config"


# -- --config ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("text, message", [
    ('select = ["NP1"]\n', "x.toml:1: `select` is a top-level key; --config reads only the [tool.neuron-port]"),
    ('[project]\nname = "p"\n', "x.toml: no [tool.neuron-port] table"),
    ('[tool.neuron-port]\nselect = ["NP1"]\nfail_on = "warning"\n', "x.toml:3: unknown key(s) in "
                                                                   "[tool.neuron-port]: fail_on"),
    ('ignore = ["NP2"]\n[tool.neuron-port]\nselect = ["NP1"]\n', "x.toml:1: `ignore` is a top-level key"),
])
def test_config_file_needs_the_table(project, cli, text, message):
    (project / "x.toml").write_text(text)
    for command in (("rewrite", "--check", "--config", "x.toml", "s.py"),
                    ("check", ".", "--config", "x.toml", "--", "python", "-c", "pass")):
        result = cli(*command, cwd=project)
        assert result.returncode == 2, result.stderr
        assert message in result.stderr, result.stderr


def test_config_file_with_the_table_is_read(project, cli):
    (project / "neuron-port.toml").write_text('[tool.neuron-port]\nselect = ["NP202"]\n')
    result = cli("rewrite", "--check", "--statistics", "--config", "neuron-port.toml", "s.py", cwd=project)
    assert (result.returncode, result.stdout) == (0, "1\tNP202\tcuda-api-no-equivalent\n")


# -- issue 22, item 7 --------------------------------------------------------------------------------------
def option_help(text: str, option: str) -> str:
    """The help paragraph of ``option`` in a --help text, its lines joined."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith(option))
    paragraph = [lines[start].strip()[len(option):]]
    for line in lines[start + 1:]:
        if line.startswith("  -") or not line.strip():  # the next option (help lines are indented deeper)
            break
        paragraph.append(line.strip())
    return " ".join(" ".join(paragraph).split())


def test_each_commands_exit_zero_help_names_its_own_options():
    texts = help_texts(sys.executable)
    check, rewrite = option_help(texts["check"], "--exit-zero"), option_help(texts["rewrite"], "--exit-zero")
    assert "--check" not in check and "a failed command" in check, check  # `check` has no --check
    assert "with --check, changes are pending" in rewrite, rewrite


def test_estimate_spells_output_format_as_every_command(tmp_path, cli, sim_build):
    text = cli("estimate", "--help").stdout
    assert "--output-format FORMAT" in text and "--format" not in text.replace("--output-format", "")
    (tmp_path / "t.py").write_text('import torch\nemb = torch.nn.Embedding(10, 4).to("neuron")\n'
                                   'idx = torch.zeros(2, 3, dtype=torch.long).to("neuron")\n'
                                   "for step in range(3):\n    emb(idx).sum().backward()\n")
    report = tmp_path / "r.json"
    assert cli("check", str(tmp_path), "-q", "-o", str(report), "--", "python", "t.py").returncode in (0, 1)
    new = cli("estimate", str(report), "--output-format", "json")
    assert new.returncode == 0, new.stderr
    assert json.loads(new.stdout)["per_device"]
    old = cli("estimate", str(report), "--format", "json")  # the first name still works, hidden
    assert (old.returncode, old.stdout) == (0, new.stdout)
    bad = cli("estimate", str(report), "--output-format", "yaml")
    assert bad.returncode == 2 and "--output-format 'yaml': expected text or json" in bad.stderr
    both = cli("estimate", str(report), "--output-format", "json", "--format", "text")
    assert both.returncode == 2 and "disagree" in both.stderr


def test_check_says_why_a_timed_out_run_has_no_runtime_findings(project, cli):
    """The command timed out before any process used the neuron device: the panel, `-q`'s line and the
    JSON report (NP909) say so, rather than an empty runtime section with no reason."""
    (project / "slow.py").write_text("import time\ntime.sleep(60)\n")
    why = "before any process used the neuron device"
    text = cli("check", ".", "--no-cache", "--timeout", "1", "--", "python", "slow.py", cwd=project)
    assert text.returncode == 1
    outcome = next(line for line in text.stdout.splitlines() if "outcome:" in line)
    assert re.search(r"timed out after \d+ s", outcome) and why in outcome, text.stdout
    quiet = cli("check", ".", "--no-cache", "-q", "--timeout", "1", "--", "python", "slow.py", cwd=project)
    assert why in quiet.stdout.splitlines()[-1], quiet.stdout
    document = cli("check", ".", "--no-cache", "--output-format", "json", "--timeout", "1", "--", "python",
                   "slow.py", cwd=project)
    report = json.loads(document.stdout)
    assert report["runtime"]["status"]["timed_out"] and report["runtime"]["status"]["processes"] == 0
    np909 = [f["message"] for f in report["findings"] if f["code"] == "NP909"]
    assert len(np909) == 1 and why in np909[0] and "--timeout" in np909[0], np909
