"""The pre-filter (neuron_port/rewrite/prefilter.py): one regular expression built from the rules' TRIGGERS
patterns. It must never cost a finding: every INVALID example of every rule passes it, and the fixture
projects give the same findings with it as with every rule run on every file (NEURON_PORT_PREFILTER=off).
It must keep plain files cheap: the real CLI on a file without CUDA idioms imports neither LibCST nor a
rule module, and prose, regexes and doctests do not send a file to the parser. The suite compares the
fixture projects of SAMPLE_PROJECTS; NEURON_PORT_FULL_SWEEPS=1 compares every fixture project."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FIXTURES, FULL_SWEEPS, REPO
from neuron_port.rewrite.prefilter import could_match, pattern_for, rule_pattern
from neuron_port.rules.registry import all_rules, rule_index

ALL_CODES = tuple(entry.code for entry in rule_index())


def _invalid_examples(kind: str):
    for rule in all_rules():
        if rule.KIND == kind:
            for number, example in enumerate(rule.INVALID):
                yield pytest.param(rule, example, id=f"{rule.CODE}-{number}")


def test_generated_index_is_up_to_date():
    """rules/triggers_generated.py matches the rules (else: .venv/bin/python scripts/generate_triggers.py)."""
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "generate_triggers.py"), "--check"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, "stale rule index (run .venv/bin/python scripts/generate_triggers.py):\n" + proc.stderr


def test_index_agrees_with_the_rule_classes():
    by_code = {entry.code: entry for entry in rule_index()}
    for rule in all_rules():
        entry = by_code.pop(rule.CODE)
        assert (entry.name, entry.kind, entry.targets) == (rule.NAME, rule.KIND, tuple(rule.TARGETS))
        assert entry.triggers == tuple(getattr(rule, "TRIGGERS", ()))
    assert by_code == {}


@pytest.mark.parametrize("rule,example", list(_invalid_examples("python")))
def test_every_invalid_example_passes_its_rule_and_the_combined_prefilter(rule, example):
    source = example.source()
    assert could_match(source, rule_pattern(tuple(rule.TRIGGERS))), f"{rule.CODE}: {source!r}"
    assert could_match(source, pattern_for(ALL_CODES)), f"{rule.CODE}: {source!r}"


@pytest.mark.parametrize("rule,example", list(_invalid_examples("line")))
def test_every_line_rule_example_passes_the_line_prefilter(rule, example):
    assert could_match(example.source(), pattern_for(ALL_CODES, kind="line")), rule.CODE


def _findings(cli, folder: Path, env: dict) -> list:
    proc = cli("rewrite", "--check", "--no-cache", "--unsafe-fixes", "--output-format", "json", "--fail-on",
               "never", "-j", "1", ".", cwd=folder, env=env)
    assert proc.returncode in (0, 1), proc.stderr
    report = json.loads(proc.stdout)
    return sorted(json.dumps(f, sort_keys=True) for f in report["findings"])


# The fixture projects the suite compares: the fewest whose findings have every code that the findings of all
# 22 projects have (44 codes: a greedy cover, taken on 2026-12-07), and one project of runtime-only idioms
# (no finding with or without the pre-filter: the other nine such projects can only agree).
SAMPLE_PROJECTS = ("hf_finetune", "amp_custom_ops", "cuda_only_features", "patch_classifier", "distributed_sharding",
                   "gpt_trainer", "capability_checks", "cuda_only_branch", "ddp_rank_devices", "kernel_ops",
                   "legacy_tensor_gan", "moe_routing")


@pytest.mark.slow
def test_fixture_findings_are_the_same_without_the_prefilter(cli):
    """The fixture projects (every one with NEURON_PORT_FULL_SWEEPS=1), once with the pre-filter and once
    with every rule on every file."""
    projects = [p for p in sorted(FIXTURES.iterdir()) if p.is_dir() and p.name != "expected"]
    assert len(projects) >= 10 and set(SAMPLE_PROJECTS) <= {p.name for p in projects}
    if not FULL_SWEEPS:
        projects = [p for p in projects if p.name in SAMPLE_PROJECTS]
    with_findings = 0
    # two runs at a time (one per core: each run is one process, -j 1); each project judged on its own
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = [(project, pool.submit(_findings, cli, project, {}),
                 pool.submit(_findings, cli, project, {"NEURON_PORT_PREFILTER": "off"})) for project in projects]
        for project, with_filter, without in runs:
            assert with_filter.result() == without.result(), project.name
            with_findings += bool(with_filter.result())
    # the comparison is about real findings (some fixtures are runtime-only)
    assert with_findings >= (5 if FULL_SWEEPS else len(SAMPLE_PROJECTS) - 1)


PLAIN = '''"""Compile the regex library once; half the pipeline runs in double precision.

>>> model = AutoModel.from_pretrained("name").cuda()
>>> torch.compile(model)
"""
import re

PATTERN = re.compile(r"\\d+")  # compile once, optimize later


def double(x):
    # the nested library pipeline: interpolate, upsample, then return the result
    return x * 2
'''


# `python -m neuron_port ARGS`, then the names in sys.modules at exit on stderr's last line. (`-X importtime`
# does not log what importlib.import_module imports, which is how the registry loads rule modules.)
_RUN_AND_LIST_MODULES = """
import atexit, runpy, sys
atexit.register(lambda: sys.__stderr__.write("\\nMODULES " + " ".join(sorted(sys.modules)) + "\\n"))
runpy.run_module("neuron_port", run_name="__main__", alter_sys=True)
"""


def _imported_modules(cli, folder: Path, name: str) -> tuple[subprocess.CompletedProcess, set[str]]:
    proc = subprocess.run([sys.executable, "-c", _RUN_AND_LIST_MODULES, "rewrite", "--check", name],
                          cwd=folder, capture_output=True, text=True, timeout=600)
    listed = [line for line in proc.stderr.splitlines() if line.startswith("MODULES ")]
    assert listed, proc.stderr[-3000:]
    return proc, set(listed[-1].split()[1:])


def test_cli_on_a_file_without_cuda_idioms_loads_neither_libcst_nor_rules(tmp_path, cli):
    (tmp_path / "plain.py").write_text(PLAIN)
    proc, modules = _imported_modules(cli, tmp_path, "plain.py")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "1 file(s) scanned, 0 would be rewritten" in proc.stdout
    assert "neuron_port.commands.entry" in modules  # the import log is what we think it is
    assert not {m for m in modules if m == "libcst" or m.startswith("libcst.")}
    families = {m for m in modules if m.startswith("neuron_port.rules.") and m.count(".") >= 2
                and m.split(".")[2] not in ("registry", "families", "vocabulary", "instances", "triggers_generated")}
    assert families == set()
    assert "neuron_port.rules.spec" not in modules and "neuron_port.rewrite.engine" not in modules


def test_cli_on_a_file_with_a_cuda_idiom_still_finds_it(tmp_path, cli):
    (tmp_path / "train.py").write_text(PLAIN + "model = model.cuda()\n")
    proc, modules = _imported_modules(cli, tmp_path, "train.py")
    assert proc.returncode == 1
    assert f"train.py:{len(PLAIN.splitlines()) + 1}:9: NP103" in proc.stdout
    assert "libcst" in modules
    assert "neuron_port.rules.device_placement" in modules  # the list has the modules the registry imports


def test_matches_on_doctest_lines_do_not_count():
    pattern = pattern_for(ALL_CODES)
    assert not could_match('"""\n    >>> model.cuda()\n"""\nx = 1\n', pattern)
    assert could_match('"""\n    >>> model.cuda()\n"""\nmodel.cuda()\n', pattern)
    assert could_match("x = 1  # >>> not a prompt\ny = z.cuda()\n", pattern)


@pytest.mark.parametrize("code", [
    "import torch\nm = torch.compile(m)\n",
    "from torch import compile as c\n",
    "from torch import (\n    nn,\n    compile,\n)\n",
    "@torch.compile\ndef f(x):\n    return x\n",
    "pipe = Pipe.from_config(cfg,\n    torch_dtype=th.half)\n",
    "trainer = L.Trainer(precision='16-mixed')\n",
    "y = F.interpolate(x, size=(int(h * 2), w),\n    mode='bicubic')\n",
    "y = x.double()\n",
    "fn = torch._dynamo.optimize('inductor')(fn)\n",
    "from transformers import (\n    AutoModel,\n    pipeline,\n)\npipe = pipeline('text-generation', device=0)\n",
    "m = AutoModel.from_pretrained(name)\n",
    "lib = torch.library.Library('x', 'DEF')\n",
])
def test_code_uses_of_the_broad_names_pass(code):
    assert could_match(code, pattern_for(ALL_CODES)), code


def test_prose_regexes_and_definitions_do_not_pass():
    assert not could_match(PLAIN, pattern_for(ALL_CODES))


def _texts():
    for path in sorted(FIXTURES.rglob("*.py")):
        yield path.read_text(encoding="utf-8", errors="replace")
    for rule in all_rules():
        for example in list(getattr(rule, "VALID", ())) + list(getattr(rule, "INVALID", ())):
            yield example if isinstance(example, str) else example.source()


def test_every_match_of_a_trigger_starts_with_its_literal_prefix():
    """The engine skips a rule whose triggers' literal prefixes are not in the text (may_occur): exact only
    while every match starts with that prefix."""
    from neuron_port.rewrite.prefilter import literal_prefix

    triggers = sorted({t for entry in rule_index() for t in entry.triggers})
    texts = list(_texts())
    matched = 0
    for trigger in triggers:
        prefix = literal_prefix(trigger)
        assert prefix == "" or trigger.startswith(prefix[0]) or trigger.startswith("\\" + prefix[0])
        for text in texts:
            for found in re.finditer(trigger, text, re.MULTILINE):
                assert found.group().startswith(prefix), (trigger, prefix, found.group())
                matched += 1
    assert matched > 1000
    assert literal_prefix(r"\.cuda\b") == ".cuda" and literal_prefix("ab?c") == "a" and literal_prefix("a*") == ""
    assert literal_prefix(r"torch\.cuda\.amp") == "torch.cuda.amp" and literal_prefix("fp(16|32)") == "fp"


def test_may_occur_is_false_only_without_any_prefix():
    from neuron_port.rewrite.prefilter import may_occur

    assert not may_occur("x = 1\n", [r"\.cuda\b", "nccl"], {})
    assert may_occur("x.cuda()\n", [r"\.cuda\b", "nccl"], {})
    assert may_occur("anything\n", ["a*"], {})  # an empty prefix proves nothing


def test_every_match_of_a_trigger_contains_what_it_requires():
    """may_occur skips a rule when, for each trigger, a text every match contains (or every one of a
    group of alternatives) is missing: exact only while every match does contain them."""
    from neuron_port.rewrite.prefilter import literal_prefix, required_texts

    triggers = sorted({t for entry in rule_index() for t in entry.triggers})
    texts = list(_texts())
    matched = 0
    for trigger in triggers:
        groups = required_texts(trigger)
        prefix = literal_prefix(trigger)
        assert prefix == "" or any(prefix in text for group in groups for text in group if len(group) == 1)
        for text in texts:
            for found in re.finditer(trigger, text, re.MULTILINE):
                assert all(any(t in found.group() for t in group) for group in groups), (trigger, groups, found)
                matched += 1
    assert matched > 1000
    assert required_texts(r"\.[ \t]*(?:to_)?sparse") == (("sparse",), (".",))
    assert required_texts(r"import\b[^\n]*\b(?:compile)\b") == (("compile",), ("import",))
    assert required_texts("cuda.amp") == (("cuda",), ("amp",))  # `.` is any character
    assert required_texts(r"\.[ \t]*(?:send|recv|isend)\b") == (("send", "recv", "isend"), (".",))
    assert required_texts("fp(16|32)") == (("fp",), ("16", "32")) and required_texts("a(?:b|c)d") == (("a",), ("d",))
    assert required_texts("x(?:ab|)y") == (("x",), ("y",))  # an empty alternative needs nothing
    assert required_texts("(?i)cuda") == ()  # inline flags: only the literal prefix (none here)
    assert required_texts("x(?i:abc)") == (("x",),) and required_texts("a*") == ()


def test_may_occur_needs_every_required_literal_of_one_trigger():
    from neuron_port.rewrite.prefilter import may_occur

    assert not may_occur("import torch\nx = 1\n", [r"import\b[^\n]*\bsparse"], {})
    assert may_occur("from torch import sparse\n", [r"import\b[^\n]*\bsparse"], {})
    assert not may_occur("x.y\n", [r"\.[ \t]*(?:to_)?sparse", "nccl"], {})
    assert may_occur("nccl\n", [r"\.[ \t]*(?:to_)?sparse", "nccl"], {})
    assert not may_occur("x.y = send\n", [r"\.[ \t]*(?:recv|isend)\b"], {})
    assert may_occur("x.y = isend\n", [r"\.[ \t]*(?:recv|isend)\b"], {})


def test_rule_refs_load_the_registry_classes_one_module_at_a_time():
    """registry.RuleRef.load() imports the rule's module alone and gives the class rule_by_code gives."""
    script = (
        "import sys\n"
        "from neuron_port.rules import registry\n"
        "codes = [e.code for e in registry.rule_index()]\n"
        "refs = registry.rule_refs(codes)\n"
        "assert refs is not None and [r.CODE for r in refs] == codes\n"
        "first = refs[0].load()\n"
        "defining = {'neuron_port.rules.' + m for m in registry.index_table('RULE_MODULES').values()}\n"
        "imported = defining & set(sys.modules)\n"
        "assert first.__module__ in imported and len(imported) < len(defining) // 4, imported\n"
        "loaded = [r.load() for r in refs]\n"
        "assert registry.all_rules.cache_info().currsize == 0\n"
        "assert loaded == [registry.rule_by_code(c) for c in codes]\n"
        "assert all((r.KIND, tuple(r.TRIGGERS)) == (c.KIND, tuple(getattr(c, 'TRIGGERS', ()))) "
        "for r, c in zip(refs, loaded))\n"
        "print('ok', len(codes))\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.startswith("ok"), proc.stderr[-3000:]


def test_cli_imports_only_the_rule_modules_a_file_can_trigger(tmp_path):
    # sys.modules at exit (-X importtime does not log imports made through importlib.import_module)
    (tmp_path / "train.py").write_text(PLAIN + "model = model.cuda()\n")
    script = ("import atexit, sys\n"
              "atexit.register(lambda: open('modules.txt', 'w').write('\\n'.join(sorted(sys.modules))))\n"
              "sys.argv = ['neuron-port', 'rewrite', '--check', 'train.py']\n"
              "from neuron_port.commands.entry import main\n"
              "main()\n")
    proc = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert f"train.py:{len(PLAIN.splitlines()) + 1}:9: NP103" in proc.stdout
    from neuron_port.rules import registry

    modules = set((tmp_path / "modules.txt").read_text().splitlines())
    defining = {f"neuron_port.rules.{m}" for m in registry.index_table("RULE_MODULES").values()}
    imported = defining & modules
    assert "neuron_port.rules.device_placement.method_calls" in imported  # NP103's module
    assert len(imported) < len(defining) // 4, sorted(imported)
