"""`neuron-port server` end to end: a real LSP client (pytest-lsp) starts the server as an editor does
(a subprocess over stdio) and opens, edits and fixes buffers of a small project. One server for the
module: each test uses its own buffer."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

pytest_lsp = pytest.importorskip("pytest_lsp")
from lsprotocol import types  # noqa: E402
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities  # noqa: E402

pytestmark = pytest.mark.asyncio(loop_scope="module")

PYPROJECT = '[project]\nname = "trainer"\n\n[tool.neuron-port]\nexclude = ["vendored"]\n'
TRAIN = 'import torch\n\nlabel = "naïve 😀"; model = torch.nn.Linear(4, 4).cuda()\nprint(model)\n'
WAIT = 30.0  # seconds: a bound for a busy machine, not a speed goal (bench/rewrite/bench_lsp.py measures)


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("lsp-project")
    (root / "pyproject.toml").write_text(PYPROJECT)
    (root / "vendored").mkdir()
    return root


@pytest_lsp.fixture(scope="module",
                    config=ClientServerConfig(server_command=[sys.executable, "-m", "neuron_port", "server"]))
async def client(lsp_client: LanguageClient, project: Path):
    await lsp_client.initialize_session(types.InitializeParams(
        capabilities=client_capabilities("visual-studio-code"), root_uri=project.as_uri(),
        workspace_folders=[types.WorkspaceFolder(project.as_uri(), "trainer")]))
    lsp_client.diagnostics = _Published(lsp_client.diagnostics)
    yield
    await lsp_client.shutdown_session()


class _Published(dict):
    """The client's latest diagnostics per buffer (pytest-lsp stores each publish here), and every publish
    in ``history``."""

    def __init__(self, *args) -> None:
        super().__init__(*args)
        self.history: dict[str, list[list[types.Diagnostic]]] = {}

    def __setitem__(self, uri: str, diagnostics: list[types.Diagnostic]) -> None:
        self.history.setdefault(uri, []).append(list(diagnostics))
        super().__setitem__(uri, diagnostics)


def _open(client: LanguageClient, path: Path, text: str) -> str:
    path.write_text(text)
    uri = path.as_uri()
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)))
    return uri


def _change(client: LanguageClient, uri: str, version: int, text: str) -> None:
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        types.VersionedTextDocumentIdentifier(uri=uri, version=version),
        [types.TextDocumentContentChangeWholeDocument(text=text)]))


async def _diagnostics(client: LanguageClient, uri: str, done) -> list[types.Diagnostic]:
    """The buffer's diagnostics once ``done(diagnostics)`` holds (polled; the server publishes them)."""
    deadline = asyncio.get_running_loop().time() + WAIT
    while True:
        found = client.diagnostics.get(uri)
        if found is not None and done(found):
            return list(found)
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"no such diagnostics for {uri} within {WAIT} s; last: {found}")
        await asyncio.sleep(0.02)


def _apply(text: str, edits: list[types.TextEdit]) -> str:
    """LSP text edits (UTF-16 positions) applied to ``text``, as an editor applies them."""
    lines = text.splitlines(keepends=True)

    def offset(position: types.Position) -> int:
        before = sum(len(line) for line in lines[:position.line])
        line = lines[position.line] if position.line < len(lines) else ""
        units, chars = 0, 0
        while units < position.character and chars < len(line):
            units += 2 if ord(line[chars]) > 0xFFFF else 1
            chars += 1
        return before + chars

    for edit in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
        text = text[:offset(edit.range.start)] + edit.new_text + text[offset(edit.range.end):]
    return text


async def _actions(client: LanguageClient, uri: str, diagnostic: types.Diagnostic) -> list[types.CodeAction]:
    return await client.text_document_code_action_async(types.CodeActionParams(
        types.TextDocumentIdentifier(uri), diagnostic.range, types.CodeActionContext([diagnostic])))


def _edits(action: types.CodeAction) -> list[types.TextEdit]:
    (change,) = action.edit.document_changes
    return list(change.edits)


async def test_a_cuda_call_is_an_np103_diagnostic_at_its_range(client: LanguageClient, project: Path):
    uri = _open(client, project / "train.py", TRAIN)
    found = await _diagnostics(client, uri, lambda d: len(d) > 0)
    (diagnostic,) = [d for d in found if d.code == "NP103"]
    line = TRAIN.splitlines()[2]
    start = line.index("torch.nn.Linear")
    # UTF-16 code units, as the client asked: the emoji before the call counts twice
    assert diagnostic.range == types.Range(types.Position(2, start + 1), types.Position(2, len(line) + 1))
    assert diagnostic.severity == types.DiagnosticSeverity.Error
    assert diagnostic.source == "neuron-port"
    assert diagnostic.code_description.href.endswith("/NP103.md")
    assert ".cuda()" in diagnostic.message


async def test_the_code_action_applies_the_safe_fix(client: LanguageClient, project: Path):
    text = "import torch\n\nnet = torch.nn.Linear(2, 2).cuda()\nbatch = torch.ones(2).cuda()\n"
    uri = _open(client, project / "fix.py", text)
    found = await _diagnostics(client, uri, lambda d: len(d) == 2)
    first = min(found, key=lambda d: d.range.start.line)
    actions = await _actions(client, uri, first)
    titles = [a.title for a in actions]
    assert "Fix all safe fixes in this file" in titles
    (fix,) = [a for a in actions if a.title.startswith("Fix NP103")]
    assert fix.kind == types.CodeActionKind.QuickFix and fix.is_preferred
    fixed = _apply(text, _edits(fix))
    assert fixed == "import torch\n\nnet = torch.nn.Linear(2, 2).to(\"neuron\")\nbatch = torch.ones(2).cuda()\n"
    _change(client, uri, 2, fixed)
    left = await _diagnostics(client, uri, lambda d: len(d) == 1)
    assert left[0].code == "NP103" and left[0].range.start.line == 3
    (fix_all,) = [a for a in await _actions(client, uri, left[0]) if a.title == "Fix all safe fixes in this file"]
    assert "cuda" not in _apply(fixed, _edits(fix_all))


async def test_an_edit_that_removes_the_cuda_code_clears_the_diagnostic(client: LanguageClient, project: Path):
    text = "import torch\nx = torch.zeros(3).cuda()\n"
    uri = _open(client, project / "edit.py", text)
    await _diagnostics(client, uri, lambda d: [x.code for x in d] == ["NP103"])
    _change(client, uri, 2, "import torch\nx = torch.zeros(3)\n")
    assert await _diagnostics(client, uri, lambda d: len(d) == 0) == []


async def test_a_file_the_configuration_excludes_has_no_diagnostics(client: LanguageClient, project: Path):
    excluded = _open(client, project / "vendored" / "kernels.py", "import torch\nx = torch.zeros(3).cuda()\n")
    included = _open(client, project / "kept.py", "import torch\nx = torch.zeros(3).cuda()\n")
    await _diagnostics(client, included, lambda d: [x.code for x in d] == ["NP103"])  # published after the other
    assert await _diagnostics(client, excluded, lambda d: True) == []


async def test_a_syntax_error_is_one_diagnostic_and_the_server_stays_alive(client: LanguageClient, project: Path):
    uri = _open(client, project / "broken.py", "import torch\nx = torch.zeros(3).cuda(\n\ny = 1\n")
    (diagnostic,) = await _diagnostics(client, uri, lambda d: len(d) > 0)
    assert diagnostic.severity == types.DiagnosticSeverity.Error and "syntax error" in diagnostic.message
    assert diagnostic.range.start.line in (1, 2, 3)
    _change(client, uri, 2, "import torch\nx = torch.zeros(3).cuda()\n\ny = 1\n")
    assert [d.code for d in await _diagnostics(client, uri, lambda d: any(x.code for x in d))] == ["NP103"]


async def test_an_unsafe_fix_is_offered_labelled_unsafe(client: LanguageClient, project: Path):
    text = 'import torch\nwith torch.autocast("cuda"):\n    pass\n'
    uri = _open(client, project / "amp.py", text)
    found = await _diagnostics(client, uri, lambda d: {"NP301", "NP302"} <= {x.code for x in d})
    (unsafe,) = [d for d in found if d.code == "NP302"]
    actions = await _actions(client, uri, unsafe)
    (action,) = [a for a in actions if a.title.startswith("Apply unsafe fix NP302")]
    assert "unsafe" in action.title and not action.is_preferred
    assert _apply(text, _edits(action)) == 'import torch\nwith torch.autocast("neuron", dtype=torch.bfloat16):\n    pass\n'


async def test_a_configuration_error_is_one_diagnostic_naming_the_file_and_line(client: LanguageClient, project: Path):
    sub = project / "sub"
    sub.mkdir()
    (sub / "pyproject.toml").write_text('[tool.neuron-port]\ntarget = "neuron"\nselect = ["NP999"]\n')
    uri = _open(client, sub / "train.py", "import torch\nx = torch.zeros(3).cuda()\n")
    (diagnostic,) = await _diagnostics(client, uri, lambda d: len(d) > 0)
    assert diagnostic.severity == types.DiagnosticSeverity.Error and diagnostic.range.start.line == 0
    assert "pyproject.toml:3" in diagnostic.message and "NP999" in diagnostic.message


async def test_the_first_pass_is_shown_at_once_and_the_fixed_point_replaces_it(client: LanguageClient, project: Path):
    """A fix makes the rewrite pass over the buffer once more (its fixed point: what `rewrite --check`
    reports); the server publishes the first pass's findings before that pass, then the fixed point's when
    they differ. Here NP101's fix (the op's device type "cuda" -> "neuron") settles NP713 (a kernel for CUDA
    only): the first publish has both, the last NP101 alone."""
    text = ('import torch\n\n\n@torch.library.custom_op("demo::scale", mutates_args=(), device_types="cuda")\n'
            "def scale(x: torch.Tensor) -> torch.Tensor:\n    return x * 2\n")
    uri = _open(client, project / "custom_op.py", text)
    final = await _diagnostics(client, uri, lambda d: [x.code for x in d] == ["NP101"])
    history = client.diagnostics.history[uri]
    assert sorted(x.code for x in history[0]) == ["NP101", "NP713"], history
    assert history[-1] == final and final[0].data == {"fix": "safe"}
    (action,) = [a for a in await _actions(client, uri, final[0]) if a.title.startswith("Fix NP101")]
    assert 'device_types="neuron"' in _apply(text, _edits(action))


async def test_a_fixed_point_equal_to_the_first_pass_is_published_once(client: LanguageClient, project: Path):
    uri = _open(client, project / "once.py", TRAIN)
    (found,) = await _diagnostics(client, uri, lambda d: len(d) > 0)
    assert found.code == "NP103" and found.data == {"fix": "safe"}
    await _actions(client, uri, found)  # answered from the version's whole analysis, so it has ended
    await asyncio.sleep(0.2)
    assert [[x.code for x in d] for d in client.diagnostics.history[uri]] == [["NP103"]]


async def test_a_burst_of_edits_ends_with_the_last_versions_diagnostics(client: LanguageClient, project: Path):
    """The first change of a burst is analysed at once (the debounce's leading edge) and the others wait for
    the pause: whatever ran meanwhile, what stays shown is the last version's."""
    body = "".join(f"\n\ndef step_{i}(x):\n    return x * {i}\n" for i in range(300))
    uri = _open(client, project / "burst.py", "import torch\n" + body)
    assert await _diagnostics(client, uri, lambda d: True) == []
    for version in range(2, 13):  # one `.cuda()` call in, then out, ...; the last version has two
        probe = "x = torch.ones(1).cuda()\n" * (2 if version == 12 else version % 2)
        _change(client, uri, version, "import torch\n" + probe + body)
    await _diagnostics(client, uri, lambda d: len(d) == 2)
    await asyncio.sleep(1.0)  # a stale version's analysis, had it been published late, would show now
    assert [(d.code, d.range.start.line) for d in client.diagnostics[uri]] == [("NP103", 1), ("NP103", 2)]
