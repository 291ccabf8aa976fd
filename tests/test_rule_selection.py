"""Rule selection with ruff's precedence: --select / --ignore / --extend-select / --extend-ignore on the
command line and select / ignore / extend-select / extend-ignore in [tool.neuron-port], through the real
CLI on a file with findings of four codes, plus the layering on the whole registry.

The expectations are ruff's documented behaviour (https://docs.astral.sh/ruff/configuration/#rule-selection):
with `select = ["E", "F"]` and `ignore = ["F401"]`, `--select F401` enforces F401 only and
`--extend-select B` enforces E, F (minus F401) and B; inside one layer the more specific selector wins.
"""

from __future__ import annotations

import json

import pytest

from neuron_port.config import Settings, load_settings
from neuron_port.config_selection import selected_codes
from neuron_port.errors import UsageError
from neuron_port.rules.registry import rule_index

SOURCE = ('import torch\nx = torch.zeros(2).cuda()\nd = torch.device("cuda")\nif torch.cuda.is_available():\n'
          "    torch.cuda.synchronize()\nmajor, _ = torch.cuda.get_device_capability()\n")
EVERY = {"NP101", "NP103", "NP201", "NP202"}  # what SOURCE gives with every rule


def codes_reported(cli, folder, *args: str) -> set[str]:
    result = cli("rewrite", "--check", "--output-format", "json", "--no-cache", *args, "s.py", cwd=folder)
    assert result.returncode in (0, 1), result.stderr
    return set(json.loads(result.stdout)["summary"]["by_code"])


@pytest.fixture
def project(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / "s.py").write_text(SOURCE)
    return tmp_path


def configure(folder, body: str) -> None:
    (folder / "pyproject.toml").write_text("[tool.neuron-port]\n" + body)


def test_without_selection_every_code_is_reported(project, cli):
    assert codes_reported(cli, project) == EVERY


@pytest.mark.parametrize("args, expected", [
    (("--select", "NP201"), {"NP201"}),  # the CLI's select replaces the configured one
    (("--extend-select", "NP2"), {"NP101", "NP103", "NP201", "NP202"}),  # adds NP2 back, minus nothing
    (("--ignore", "NP101"), {"NP103"}),  # on top of the configuration: its ignore (NP201) stays
    (("--extend-ignore", "NP103"), {"NP101"}),
    (("--extend-select", "NP201"), {"NP101", "NP103", "NP201"}),  # a later layer re-enables what one ignored
])
def test_cli_is_a_layer_on_top_of_the_configuration(project, cli, args, expected):
    configure(project, 'select = ["NP1"]\nignore = ["NP201"]\n')
    assert codes_reported(cli, project, *args) == expected


def test_in_one_layer_the_more_specific_selector_wins(project, cli):
    assert codes_reported(cli, project, "--select", "NP101", "--ignore", "NP1") == {"NP101"}
    assert codes_reported(cli, project, "--ignore", "NP1", "--extend-select", "NP103") == {"NP103", "NP201", "NP202"}
    assert codes_reported(cli, project, "--ignore", "ALL", "--extend-select", "NP201") == {"NP201"}
    # the same specificity: the ignore wins, and nothing at all is selected
    assert codes_reported(cli, project, "--select", "NP2", "--ignore", "NP2") == set()


def test_configuration_keys(project, cli):
    configure(project, 'ignore = ["NP1"]\nextend-select = ["NP101"]\nextend-ignore = ["NP202"]\n')
    assert codes_reported(cli, project) == {"NP101", "NP201"}
    configure(project, 'extend-select = ["NP101"]\n')  # without select: every rule stays selected
    assert codes_reported(cli, project) == EVERY
    configure(project, 'ignore = ["NP103"]\n')  # --ignore adds to the configured ignore, as in ruff
    assert codes_reported(cli, project, "--ignore", "NP101") == {"NP201", "NP202"}


def test_unknown_selectors_are_errors_naming_where(project, cli):
    configure(project, 'select = ["NP1"]\n\nextend-select = ["NP999"]\n')
    result = cli("rewrite", "--check", "s.py", cwd=project)
    assert result.returncode == 2
    assert "pyproject.toml:4: [tool.neuron-port] extend-select" in result.stderr and "NP999" in result.stderr
    (project / "pyproject.toml").unlink()
    for option in ("--extend-select", "--extend-ignore", "--ignore"):
        result = cli("rewrite", "--check", option, "NP999", "s.py", cwd=project)
        assert result.returncode == 2 and f"{option}: 'NP999' matches no rule" in result.stderr, result.stderr


def test_layers_on_the_whole_registry(tmp_path):
    every = {rule.code for rule in rule_index()}
    (tmp_path / "pyproject.toml").write_text('[tool.neuron-port]\nselect = ["NP1", "NP2"]\nignore = ["NP201"]\n')
    configured = load_settings(tmp_path)
    nps = {c for c in every if c.startswith(("NP1", "NP2"))}
    assert selected_codes(configured.select, configured.ignore) == nps - {"NP201"}
    assert configured.select == ("NP1", "NP2")  # the patterns are kept where they say exactly the result
    cases = {
        (("NP201",), None, None, None): {"NP201"},
        (None, None, ("NP9",), None): (nps - {"NP201"}) | {c for c in every if c.startswith("NP9")},
        (None, ("NP1",), None, ("NP202",)): nps - {"NP201", "NP202"} - {c for c in every if c.startswith("NP1")},
        (None, ("NP1",), ("NP105",), None): (nps - {"NP201"} - {c for c in every if c.startswith("NP1")}) | {"NP105"},
    }
    for (select, ignore, extend_select, extend_ignore), expected in cases.items():
        merged = configured.merged(select=select, ignore=ignore, extend_select=extend_select,
                                   extend_ignore=extend_ignore)
        assert selected_codes(merged.select, merged.ignore) == expected, (select, ignore, extend_select)
    nothing = Settings().merged(select=["NP1"], ignore=["NP1"])
    assert selected_codes(nothing.select, nothing.ignore) == set()
    with pytest.raises(UsageError, match="--extend-select"):
        Settings().merged(extend_select=["XY1"])
