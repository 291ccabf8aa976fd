"""`neuron-port server`: the language server (LSP over stdin/stdout, pygls).

The rules are loaded once, by the first analysis, and stay loaded: an edit costs the engine's pass over
the buffer, not a process start. Each open buffer is analysed on open and save at once, and after an
edit at once when it follows a pause with no analysis running, else once the edits pause for DEBOUNCE
seconds; one analysis runs at a time (a worker thread, so the
server keeps reading messages), and a result for a version of the buffer that has since changed is
dropped. When a fix applies, the rewrite takes one more pass over the whole buffer to reach its fixed point
(what `rewrite --check` reports): the first pass's problems are published as soon as it ends, and the
fixed point's only when they differ (a fix that uncovers or settles another finding). The last analysis
of each buffer is kept for its code actions:

- ``quickfix`` "Fix NP103: ..." for each fix that `neuron-port rewrite` applies to the buffer (safe fixes,
  unsafe ones too under ``unsafe-fixes = true``), and "Fix all safe fixes in this file";
- ``quickfix`` "Apply unsafe fix NP...: ... (unsafe: review it)" for each unsafe fix left out;
- ``source.fixAll.neuron-port``: the fix-all action, for editors' "fix all on save".

Diagnostics carry the rule code, the severity (error, warning, info -> information), a link to the rule's
page (``codeDescription``) and ``source`` "neuron-port". Findings are what `neuron-port rewrite --check`
reports for the file (neuron_port/server/analysis.py); settings are the project's ``[tool.neuron-port]``,
its excludes included. Nothing here imports torch.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from neuron_port import __version__
from neuron_port.config import ConfigError
from neuron_port.server.analysis import Analysis, Configs, Problem, analyse, configuration_problem
from neuron_port.server.edits import Edit
from neuron_port.server.links import rule_page

SOURCE = "neuron-port"
OPEN_FILES_PARSED = 16  # buffers whose parsed pieces are kept (the least recently analysed go first)
DEBOUNCE = 0.05  # seconds without an edit before a changed buffer is analysed
FIX_ALL = f"{types.CodeActionKind.SourceFixAll.value}.neuron-port"
SEVERITY = {"error": types.DiagnosticSeverity.Error, "warning": types.DiagnosticSeverity.Warning,
            "info": types.DiagnosticSeverity.Information}
log = logging.getLogger("neuron_port.server")


@dataclass
class Analysed:
    version: Optional[int]
    analysis: Analysis


class NeuronPortServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("neuron-port", __version__, text_document_sync_kind=types.TextDocumentSyncKind.Incremental)
        self.analysed: dict[str, Analysed] = {}
        self.pending: dict[str, asyncio.Task] = {}
        self.running: dict[tuple[str, Optional[int]], tuple[str, asyncio.Future]] = {}
        self.worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="neuron-port-analysis")
        # (uri, version) -> the diagnostics published from the first pass of that version's analysis
        self.early: dict[tuple[str, Optional[int]], list[types.Diagnostic]] = {}
        self.changed_at: dict[str, float] = {}  # each buffer's last change (the event loop's clock)
        self.configs = Configs()

    # -- analysis ----------------------------------------------------------------------------------
    def schedule(self, uri: str, delay: float) -> None:
        task = self.pending.pop(uri, None)
        if task is not None:
            task.cancel()
        self.pending[uri] = asyncio.ensure_future(self._analyse_and_publish(uri, delay))

    async def _analyse_and_publish(self, uri: str, delay: float) -> None:
        if delay:
            await asyncio.sleep(delay)
        current = await self.current(uri)
        if current is not None and self.version_of(uri) == current.version:
            early = self.early.pop((uri, current.version), None)
            if early is None or early != self.diagnostics(uri, current.analysis):
                self.publish(uri, current)  # else the first pass's diagnostics, already shown, are the fixed point's

    async def current(self, uri: str) -> Optional[Analysed]:
        """The analysis of the buffer as it is now (the kept one when the buffer has not changed)."""
        document = self.workspace.text_documents.get(uri)
        if document is None:
            return None
        version, text = document.version, document.source
        kept = self.analysed.get(uri)
        if kept is not None and kept.version == version and kept.analysis.text == text:
            return kept
        future = self._submit(uri, version, text)
        try:
            analysis = await asyncio.shield(future)  # one waiter's end must not end the others' analysis
        except asyncio.CancelledError:
            if future.cancelled():
                return None  # dropped before it started: a newer version of the buffer is analysed instead
            raise
        except Exception as exc:  # a bug of ours must not end the server: say so, keep serving
            log.exception("analysis of %s failed", uri)
            self.window_log_message(types.LogMessageParams(
                types.MessageType.Error, f"neuron-port: internal error analysing {uri}: {type(exc).__name__}: {exc}"))
            return None
        if self.version_of(uri) != version:
            return None  # the buffer changed meanwhile: its own analysis is scheduled
        self.analysed[uri] = Analysed(version, analysis)
        return self.analysed[uri]

    def _submit(self, uri: str, version: Optional[int], text: str) -> asyncio.Future:
        """The analysis of this version of the buffer: the one under way when there is one (an editor asks
        for code actions at every move of the cursor), else a new one for the worker; the queued analyses of
        the buffer's older versions are dropped before they start."""
        key = (uri, version)
        running = self.running.get(key)
        if running is not None and running[0] == text:
            return running[1]
        for (other_uri, other_version), (_text, future) in list(self.running.items()):
            if other_uri == uri and other_version != version:
                future.cancel()  # only a job that has not started yet is cancelled
        loop = asyncio.get_running_loop()

        def first_pass(analysis: Analysis) -> None:  # in the worker thread: published by the loop's
            sent = threading.Event()

            def publish() -> None:
                try:
                    self._publish_first_pass(uri, version, analysis)
                finally:
                    sent.set()

            loop.call_soon_threadsafe(publish)
            # the worker waits (briefly) for the message to be out: its next pass would hold the GIL, and the
            # loop's thread would write it only between the pass's switch intervals
            sent.wait(0.25)

        future = loop.run_in_executor(self.worker, self.analyse_text, uri, text, first_pass)
        self.running[key] = (text, future)
        future.add_done_callback(lambda done: self.running.pop(key, None) if self.running.get(key, (0, 0))[1] is done
                                 else None)
        return future

    def _publish_first_pass(self, uri: str, version: Optional[int], analysis: Analysis) -> None:
        """The problems of the rewrite's first pass over this version of the buffer, shown while the
        fixed point is computed (a fix makes one more pass over the whole buffer); dropped when the buffer
        has changed or its whole analysis is already kept."""
        kept = self.analysed.get(uri)
        if self.version_of(uri) != version or (kept is not None and kept.version == version):
            return
        diagnostics = self.diagnostics(uri, analysis)
        self.early[(uri, version)] = diagnostics
        for key in [k for k in self.early if k[0] == uri and k[1] != version]:
            del self.early[key]
        self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri, diagnostics, version))

    def analyse_text(self, uri: str, text: str, first_pass=None) -> Analysis:
        fs_path = to_fs_path(uri) if uri.startswith("file:") else None
        if fs_path is None:  # an unsaved buffer: Python, with the workspace's settings
            root = self._root_for(None)
            path, file = "untitled.py", (root or Path.cwd()) / "untitled.py"
        else:
            file = Path(fs_path)
            root, path = self._root_for(file), str(file)
        try:
            settings = self.configs.settings(file, root)
        except ConfigError as exc:
            from neuron_port.config import Settings

            failed = Analysis(text=text, path=path, settings=Settings())
            failed.problems.append(configuration_problem(exc))
            return failed
        early = None
        if first_pass is not None:
            def early(problems: list[Problem]) -> None:
                first_pass(Analysis(text=text, path=path, settings=settings, problems=problems))
        return analyse(text, path, settings, root, early=early)

    def _root_for(self, file: Optional[Path]) -> Optional[Path]:
        """The workspace folder holding ``file`` (the deepest), else the workspace's root."""
        folders = [Path(p) for p in (to_fs_path(f.uri) for f in self.workspace.folders.values()) if p]
        if file is not None:
            holding = [f for f in folders if f == file.parent or f in file.parents]
            if holding:
                return max(holding, key=lambda f: len(f.parts))
        root = self.workspace.root_path
        return Path(root) if root else None

    def typing(self, uri: str) -> bool:
        """True when this change comes DEBOUNCE seconds or less after the buffer's last one, or while an
        analysis runs: it waits for the edits to pause. The first change after a pause, with the worker
        idle, is analysed at once (a debounce's leading edge: no wait after a single edit)."""
        now = asyncio.get_running_loop().time()
        last, self.changed_at[uri] = self.changed_at.get(uri), now
        return bool(self.running) or (last is not None and now - last <= DEBOUNCE)

    def version_of(self, uri: str) -> Optional[int]:
        document = self.workspace.text_documents.get(uri)
        return document.version if document is not None else -1

    # -- to the client ----------------------------------------------------------------------------
    def publish(self, uri: str, analysed: Analysed) -> None:
        diagnostics = self.diagnostics(uri, analysed.analysis)
        self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri, diagnostics, analysed.version))

    def diagnostics(self, uri: str, analysis: Analysis) -> list[types.Diagnostic]:
        """In the buffer's order (the fixed point lists its applied fixes first, then what is left), so that
        the first pass's diagnostics and the fixed point's compare equal when they are."""
        problems = sorted(analysis.problems, key=lambda p: (p.line, p.column, p.end_line, p.end_column,
                                                            p.code or "", p.message))
        return [self.diagnostic(uri, analysis, p) for p in problems]

    def _position(self, uri: str, lines: list[str], line: int, column: int) -> types.Position:
        codec = self.workspace.get_text_document(uri).position_codec
        text = lines[line] if line < len(lines) else ""
        return types.Position(line, codec.client_num_units(text[:column]))

    def _range(self, uri: str, lines: list[str], line: int, column: int, end_line: int, end_column: int) -> types.Range:
        return types.Range(self._position(uri, lines, line, column), self._position(uri, lines, end_line, end_column))

    def diagnostic(self, uri: str, analysis: Analysis, problem: Problem) -> types.Diagnostic:
        lines = analysis.lines()
        diagnostic = types.Diagnostic(
            range=self._range(uri, lines, problem.line, problem.column, problem.end_line, problem.end_column),
            message=problem.message, severity=SEVERITY.get(problem.severity, types.DiagnosticSeverity.Warning),
            source=SOURCE)
        if problem.finding is not None:
            diagnostic.code = problem.finding.code
            href = rule_page(problem.finding.code)
            if href:
                diagnostic.code_description = types.CodeDescription(href=href)
            diagnostic.data = {"fix": problem.pending or ("unsafe" if problem.unsafe_fix_offered() else None)}
        if problem.related:
            diagnostic.related_information = [
                types.DiagnosticRelatedInformation(
                    types.Location(uri, self._range(uri, lines, line, column, line, column)),
                    f"{code}: folded into this finding") for line, column, code in problem.related]
        return diagnostic

    def text_edits(self, uri: str, analysis: Analysis, edits: list[Edit]) -> list[types.TextEdit]:
        lines = analysis.lines()
        return [types.TextEdit(self._range(uri, lines, e.line, e.column, e.end_line, e.end_column), e.text)
                for e in edits]

    def action(self, uri: str, analysed: Analysed, title: str, kind: str, edits: list[Edit],
               problems: list[Problem], preferred: bool = False) -> types.CodeAction:
        analysis = analysed.analysis
        edit = types.WorkspaceEdit(document_changes=[types.TextDocumentEdit(
            types.OptionalVersionedTextDocumentIdentifier(uri, analysed.version),
            self.text_edits(uri, analysis, edits))])
        return types.CodeAction(title=title, kind=kind, edit=edit, is_preferred=preferred or None,
                                diagnostics=[self.diagnostic(uri, analysis, p) for p in problems] or None)


server = NeuronPortServer()


@server.feature(types.TEXT_DOCUMENT_DID_OPEN)
def did_open(ls: NeuronPortServer, params: types.DidOpenTextDocumentParams) -> None:
    ls.schedule(params.text_document.uri, 0)


@server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
def did_change(ls: NeuronPortServer, params: types.DidChangeTextDocumentParams) -> None:
    uri = params.text_document.uri
    ls.schedule(uri, DEBOUNCE if ls.typing(uri) else 0)


@server.feature(types.TEXT_DOCUMENT_DID_SAVE)
def did_save(ls: NeuronPortServer, params: types.DidSaveTextDocumentParams) -> None:
    uri = params.text_document.uri
    if uri.endswith("/pyproject.toml"):  # the settings may have changed: every open buffer again
        for other in list(ls.workspace.text_documents):
            if other != uri:
                ls.analysed.pop(other, None)
                ls.schedule(other, 0)
        return
    ls.schedule(uri, 0)


@server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
def did_close(ls: NeuronPortServer, params: types.DidCloseTextDocumentParams) -> None:
    uri = params.text_document.uri
    task = ls.pending.pop(uri, None)
    if task is not None:
        task.cancel()
    ls.analysed.pop(uri, None)
    ls.changed_at.pop(uri, None)
    for key in [k for k in ls.early if k[0] == uri]:
        del ls.early[key]
    ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri, []))


@server.feature(types.TEXT_DOCUMENT_CODE_ACTION,
                types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix, FIX_ALL]))
async def code_actions(ls: NeuronPortServer, params: types.CodeActionParams) -> Optional[list[types.CodeAction]]:
    uri = params.text_document.uri
    analysed = await ls.current(uri)
    if analysed is None:
        return None
    analysis = analysed.analysis
    only = params.context.only
    wanted = (lambda kind: any(kind == k or kind.startswith(f"{k}.") for k in only)) if only else (lambda kind: True)
    actions: list[types.CodeAction] = []
    start, end = params.range.start.line, params.range.end.line
    here = [p for p in analysis.problems if p.finding is not None and p.line <= end and p.end_line >= start]
    quick = types.CodeActionKind.QuickFix.value
    if wanted(quick):
        for problem in here:
            f = problem.finding
            if problem.pending is not None:
                edits = analysis.fix_edits(problem)
                label = "" if problem.pending == "safe" else " (unsafe, enabled by unsafe-fixes)"
                if edits:
                    actions.append(ls.action(uri, analysed, f"Fix {f.code}: {f.message}{label}", quick, edits,
                                             [problem], preferred=problem.pending == "safe"))
            elif problem.unsafe_fix_offered():
                edits = await asyncio.get_running_loop().run_in_executor(ls.worker, analysis.unsafe_edits, problem)
                if edits and ls.version_of(uri) == analysed.version:
                    actions.append(ls.action(uri, analysed, f"Apply unsafe fix {f.code}: {f.message} (unsafe: "
                                             "review it, `neuron-port explain " + f.code + "`)", quick, edits,
                                             [problem]))
    all_edits = analysis.fix_all_edits()
    pending = [p for p in analysis.problems if p.pending is not None]
    if all_edits and (here or not params.context.diagnostics):
        unsafe = any(p.pending == "unsafe" for p in pending)
        title = "Fix all safe fixes in this file" if not unsafe else \
            "Fix all in this file (unsafe ones included: unsafe-fixes = true)"
        if wanted(quick) and any(p.pending is not None for p in here):
            actions.append(ls.action(uri, analysed, title, quick, all_edits, pending))
        if only and wanted(FIX_ALL):  # asked for by kind (fix all on save, the source actions menu)
            actions.append(ls.action(uri, analysed, title, FIX_ALL, all_edits, pending))
    return actions


def serve() -> None:
    """Serve one client over stdin/stdout until it exits."""
    logging.basicConfig(level=logging.WARNING, format="neuron-port server: %(levelname)s: %(message)s")
    from neuron_port.rewrite.syntax import keep_parsed_pieces

    # each open buffer's top-level pieces stay parsed: an edit re-parses the pieces it touched (issue 38)
    keep_parsed_pieces(OPEN_FILES_PARSED)
    server.start_io()
