"""The codemod engine: parse once, run every enabled rule in one batched pass, apply the allowed
replacements and needed imports, and repeat until a pass finds nothing to change.

Rules report; this module is the only place that edits a tree. The loop ends when a pass proposes no
allowed fix, which is exactly the "second run changes nothing" guarantee; if that does not happen
within MAX_PASSES the file is left alone and reported as an error.

The report is the fixed point's (issue 34): the fixes applied, at their lines in the file as it was,
and what is left as the last pass (the rules run again on the rewritten text) found it, at its lines in
the rewritten text: exactly what a second run reports. A file no fix changed costs no second pass. When the
rewrite is not written, the report moves what is left back to the file's own lines (rewrite/line_map.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable, Optional, Pattern, Sequence

import libcst as cst

from neuron_port.results import Finding, Fix
from neuron_port.rewrite.errors import RewriteError  # noqa: F401 (raised here; callers import it from here too)
from neuron_port.rewrite.kept_whitespace import KeptIndentation, carrying, keep_indentation, restore_tail, split_tail
from neuron_port.rewrite.known_texts import copies as known_copies, known
from neuron_port.rewrite.positions import node_positions
from neuron_port.rewrite.prefilter import could_match, may_occur, rule_pattern
from neuron_port.rewrite.splice import moved, spliced, statements_parse
from neuron_port.rewrite.syntax import (
    RUNNING,
    SHALLOW_CHARS,
    NestingError,
    cpython_syntax_error,
    describe_syntax_error,
    parse_module,
)
from neuron_port.rewrite.suppression import is_suppressed, suppressions
from neuron_port.rewrite.traversal import ancestors_of, walk_batched
from neuron_port.rules.registry import RuleRef
from neuron_port.rules.spec import PythonRule, RuleSpec
from neuron_port.rules.context import FileContext, ImportTracker, Violation
from neuron_port.rules.helpers.per_file import module_walk
from neuron_port.rewrite.scope_folding import fold_kept_scopes, scope_rules_not_in

MAX_PASSES = 4
# A fix pass's new text, syntax check and left findings' places from the edited statements alone
# (rewrite/splice.py); False: from the whole new tree, as before (the tests compare the two).
INCREMENTAL = True


@dataclass(frozen=True)
class EngineOptions:
    target: str = "neuron"
    unsafe_fixes: bool = False


@dataclass
class SourceOutcome:
    code: str
    findings: list[Finding] = field(default_factory=list)
    fixes_applied: int = 0
    skipped: bool = False

    @property
    def changed(self) -> bool:
        return self.fixes_applied > 0


def python_rules(rules: Iterable[type[RuleSpec]]) -> list[type[PythonRule]]:
    """The rules this engine runs: line and runtime rules in a selection are someone else's."""
    return [rule for rule in rules if rule.KIND == "python"]  # type: ignore[misc]


def triggers_for(rules: Iterable[type[RuleSpec]]) -> tuple[str, ...]:
    """The TRIGGERS patterns of the Python rules among ``rules``."""
    out: set[str] = set()
    for rule in python_rules(rules):
        out.update(rule.TRIGGERS)
    return tuple(sorted(out))


def prefilter_for(rules: Iterable[type[RuleSpec]]) -> Optional[Pattern[str]]:
    """The pre-filter of these rules: a text it does not match cannot produce a finding."""
    return rule_pattern(triggers_for(rules))


class _ApplyReplacements(cst.CSTTransformer):
    """Swap reported nodes for their replacements; a replaced node's children are not visited, so of
    two nested fixes the outer one wins in this pass and the inner one is found again in the next.
    Only ``ancestors`` of replaced nodes are entered (all nodes when None): visiting a node rebuilds it,
    and rebuilding the whole tree for a few fixes cost a third of a pass."""

    def __init__(self, replacements: dict[cst.CSTNode, cst.CSTNode],
                 ancestors: Optional[set[cst.CSTNode]] = None, kept: Optional[KeptIndentation] = None) -> None:
        super().__init__()
        self.replacements = replacements
        self.ancestors = ancestors
        self.kept = kept
        self.applied: set[cst.CSTNode] = set()
        self.updated: dict[cst.CSTNode, object] = {}  # each rebuilt or replaced node -> its new node

    def on_visit(self, node: cst.CSTNode) -> bool:
        return node not in self.replacements and (self.ancestors is None or node in self.ancestors)

    def on_leave(self, original_node, updated_node):  # type: ignore[override]
        replacement = self.replacements.get(original_node)
        if replacement is None:
            if self.kept is not None:
                self.kept.carry(original_node, updated_node)
            self.updated[original_node] = updated_node
            return updated_node
        self.applied.add(original_node)
        self.updated[original_node] = replacement
        if self.kept is not None:
            self.kept.carry(original_node, replacement)
        return replacement


def _run_rules(module: cst.Module, rules: Sequence[type[PythonRule]], options: EngineOptions, path: str,
               need_positions: bool = True, hidden: frozenset = frozenset(), code: Optional[str] = None,
               ancestors: Optional[dict] = None, contexts: Optional[dict] = None):
    context = FileContext(target=options.target, path=path, code=code)
    wrapper = cst.MetadataWrapper(module, unsafe_skip_copy=True)
    visitors: list[cst.BatchableCSTVisitor] = [ImportTracker(context)]
    visitors.extend(rule(context) for rule in rules)
    walk_batched(wrapper, visitors)
    violations = fold_kept_scopes(context, hidden)
    copies = None
    if violations and need_positions and code is not None and known(module):
        # the statements parsed alone that hold no finding are copied, not rendered (known_texts.py)
        copies = known_copies(module, module_walk(context, module).nodes, _located(violations))
    # the per-file analyses kept there hold the context (and the tree): free them now, not at the next
    # collection of reference cycles
    context.shared.clear()
    # Positions cost about as much as the parse: only resolve them when someone needs a line number.
    positions = (node_positions(module, _located(violations), ancestors, contexts, code=code, copies=copies)
                 if violations and need_positions else None)
    return violations, positions


def _located(reports: Sequence[Violation]):
    """The nodes whose places the findings of ``reports`` give: each report's, and those folded into it."""
    for report in reports:
        yield report.node
        for _, node in report.related:
            yield node


def _finding(report: Violation, rng, path: str, line_offset: int, cell: Optional[int], applied: bool,
             positions: Optional[dict] = None) -> Finding:
    related = tuple((positions[node].start.line + line_offset, positions[node].start.column + 1, code)
                    for code, node in report.related) if report.related and positions else ()
    return Finding(
        code=report.rule.CODE,
        name=report.rule.NAME,
        severity=report.severity or report.rule.SEVERITY,
        path=path,
        line=rng.start.line + line_offset,
        column=rng.start.column + 1,
        end_line=rng.end.line + line_offset,
        end_column=rng.end.column + 1,
        message=report.message,
        fix=Fix(available=report.replacement is not None, applied=applied, safety=report.safety or "none"),
        effort=report.effort,
        cell=cell,
        related=tuple(sorted(related)),
    )


def _left_findings(module: cst.Module, reports: Sequence[Violation], positions, ancestors: dict, path: str,
                   line_offset: int, cell: Optional[int], moved_from: Optional[tuple] = None) -> list[Finding]:
    """The last pass's reports (none of them applied), located in its tree: the rewritten text.
    ``moved_from``: (the previous pass's positions, its edits) when this tree is that one's with the edits
    of rewrite/splice.py: a node outside them keeps its place, moved by their lines."""
    if positions is None and reports:  # resolved here only: a pass after the first needs them for this alone
        wanted = list(dict.fromkeys(_located(reports)))
        if moved_from is not None:
            positions, missing = moved(moved_from[0], wanted, moved_from[1])
            if missing:
                positions.update(node_positions(module, missing, ancestors))
        else:
            positions = node_positions(module, wanted, ancestors)
    return [_finding(r, positions[r.node], path, line_offset, cell, False, positions) for r in reports]


def _matches(code: str, pattern: Optional[Pattern[str]], seen: dict) -> bool:
    found = seen.get(pattern)
    if found is None:
        found = seen[pattern] = could_match(code, pattern)
    return found


def _allowed(report: Violation, options: EngineOptions) -> bool:
    if report.replacement is None:
        return False
    return report.safety == "safe" or (report.safety == "unsafe" and options.unsafe_fixes)


def _fresh(replacement):
    """A deep clone of a replacement node (or of each node of a FlattenSentinel; RemoveFromParent as is)."""
    if isinstance(replacement, cst.CSTNode):
        return replacement.deep_clone()
    if isinstance(replacement, cst.FlattenSentinel):
        return cst.FlattenSentinel([node.deep_clone() for node in replacement.nodes])
    return replacement


def _apply(module: cst.Module, reports: Sequence[Violation], ancestors: Optional[dict] = None,
           kept: Optional[KeptIndentation] = None) -> tuple[cst.Module, int, dict, Optional[set]]:
    """``ancestors``: each reported node's ancestors in ``module``, when the positions' render found them
    (else the tree is walked for them). ``kept``: indentation the tree cannot hold, carried to the new one.
    Also returns each rebuilt or replaced node's new node, and the replaced nodes (None when imports were
    added: the module's header changed too)."""
    replacements: dict[cst.CSTNode, cst.CSTNode] = {}
    imports: list[tuple[str, Optional[str], Optional[str]]] = []
    for report in reports:
        assert report.replacement is not None
        if report.node in replacements:
            continue  # two rules fixing the same node: the first one wins this pass
        # a clone: the next pass runs on this tree, where every node object must stand at one place only
        # (rules key their state by node), and a rule may hand the same replacement object to many nodes
        replacements[report.node] = _fresh(report.replacement)
    if ancestors and all(node in ancestors for node in replacements):
        rebuilt: Optional[set[cst.CSTNode]] = {above for node in replacements for above in ancestors[node]}
    else:
        rebuilt = ancestors_of(module, replacements)
    applier = _ApplyReplacements(replacements, rebuilt, kept)
    new_module = module.visit(applier)
    for report in reports:
        if report.node in applier.applied:
            imports.extend(report.imports)
    if imports:
        # imported here: libcst.codemod pulls in libcst.matchers (~0.5 s), needed only when a fix adds imports
        from libcst.codemod import CodemodContext
        from libcst.codemod.visitors import AddImportsVisitor

        context = CodemodContext()
        for module_name, obj, asname in dict.fromkeys(imports):
            AddImportsVisitor.add_needed_import(context, module_name, obj, asname)
        adder = AddImportsVisitor if kept is None else carrying(AddImportsVisitor, kept)
        new_module = adder(context).transform_module(new_module)
    return new_module, len(applier.applied), applier.updated, applier.applied if not imports else None


def _parse(code: str, path: str) -> cst.Module:
    try:
        return parse_module(code, path)  # in a big-stack thread: deep nesting is an error, not a crash
    except cst.ParserSyntaxError as exc:
        raise RewriteError(f"{path}:{exc.raw_line}:{exc.raw_column + 1}: syntax error: {exc.message}") from None
    except SyntaxError as exc:  # CPython's verdict on a long text, already described
        raise RewriteError(str(exc)) from None
    except NestingError as exc:
        raise RewriteError(f"{path}: {exc}; file left unchanged") from None


def _check_output(source: str, code: str, path: str) -> None:
    """The rewritten code must be valid Python for this interpreter. When the original is not either (it
    uses a newer Python's syntax, or is invalid here), that is the file's problem, not the rewrite's."""
    try:
        error = cpython_syntax_error(code)
    except NestingError as exc:
        raise RewriteError(f"{path}: {exc}; file left unchanged") from None
    if error is None:
        return
    try:
        original_error = cpython_syntax_error(source)
    except NestingError:
        original_error = error
    if original_error is not None:
        message = describe_syntax_error(source, original_error, path)
        if not message.endswith("left unchanged"):
            message += f" (Python {RUNNING}); file left unchanged"
        raise RewriteError(message)
    raise RewriteError(
        f"{path}:{error.lineno}: internal error, the rewritten file is not valid Python ({error.msg}); "
        "file left unchanged"
    )


def transform_source(
    source: str,
    rules: Sequence[type[RuleSpec]],
    options: EngineOptions = EngineOptions(),
    path: str = "<string>",
    triggers: Optional[Pattern[str]] = None,
    line_offset: int = 0,
    cell: Optional[int] = None, matched: bool = False,
    on_first_pass: Optional[Callable[[list[Finding]], None]] = None,
) -> SourceOutcome:
    """Rewrite one module's source with the Python rules among ``rules``. ``triggers``: their pre-filter
    when the caller has it (prefilter_for; ``matched``: ``source`` is known to pass it). ``on_first_pass``:
    called with the first pass's findings (the text as it is, at its own places; ``fix.applied``: the fix
    will be applied) when a fix applies, before the passes that reach the fixed point: the language server
    shows them while those run. Raises RewriteError."""
    rules = python_rules(rules)
    if triggers is None:
        triggers = prefilter_for(rules)
    if not rules or not (matched or could_match(source, triggers)):
        return SourceOutcome(code=source, skipped=True)
    hidden = scope_rules_not_in(rules)

    # the parse sees the last lines (blank, comments) without their indentation, which the round trip drops
    source, tail, parsed_tail = split_tail(source)
    code = source
    module = _parse(code, path)
    indentation = keep_indentation(module, source)  # None unless a form feed stands in a statement's indentation
    first_findings: list[Finding] = []
    first_allowed = 0
    has_suppressions = "neuron-port" in source
    moved_from: Optional[tuple] = None  # (the previous pass's positions, its edits): rewrite/splice.py
    # every pass's edited statements parse where they stand, in a text CPython accepted whole before
    # LibCST parsed it (a long one: syntax.parse_module): the rewritten text needs no whole-text check
    checked = INCREMENTAL and len(source) > SHALLOW_CHARS
    for pass_number in range(MAX_PASSES + 1):
        # Only the rules whose triggers occur in this text can report (a file that passed the pre-filter
        # for `re.compile` runs the compile rules, not all of them); re-checked on each pass's new text. A
        # rule given by reference (registry.RuleRef) has its module imported then, not before.
        matches: dict = {}  # pattern -> whether it matches this text: rules that share triggers search once
        literals: dict = {}  # a literal the triggers need -> whether it is in this text (most rules stop here)
        active = [rule.load() if type(rule) is RuleRef else rule for rule in (*rules, *hidden)
                  if may_occur(code, rule.TRIGGERS, literals)
                  and _matches(code, rule_pattern(tuple(rule.TRIGGERS)), matches)]
        # later passes only need positions to honour suppression comments
        ancestors: dict = {}
        contexts: dict = {}
        reports, positions = _run_rules(module, active, options, path,
                                        need_positions=pass_number == 0 or has_suppressions, hidden=hidden,
                                        code=code, ancestors=ancestors, contexts=contexts)
        found = suppressions(code.splitlines()) if reports and has_suppressions else {}
        kept: list[Violation] = []
        for report in reports:
            if positions is None:
                kept.append(report)
                continue
            rng = positions[report.node]
            if is_suppressed(report.rule.CODE, rng.start.line, rng.end.line, found):
                continue
            kept.append(report)
            if pass_number == 0:
                allowed = _allowed(report, options)
                first_allowed += allowed
                first_findings.append(_finding(report, rng, path, line_offset, cell, allowed, positions))
        to_apply = [r for r in kept if _allowed(r, options)]
        if pass_number == 0 and to_apply and on_first_pass is not None:
            on_first_pass(list(first_findings))
        if not to_apply:
            if pass_number > 0:  # the fixed point: what is left is this pass's, at its lines in the new text
                left = _left_findings(module, kept, positions, ancestors, path, line_offset, cell, moved_from)
                first_findings = [f for f in first_findings if f.fix.applied] + left
            break
        if pass_number == MAX_PASSES:
            raise RewriteError(
                f"{path}: the rewrite did not settle after {MAX_PASSES} passes; file left unchanged "
                f"(please report this with the file)"
            )
        new_module, applied, updated, replaced = _apply(module, to_apply, ancestors, indentation)
        found_edits = (spliced(code, module, new_module, (r.node for r in to_apply if r.node in replaced),
                               ancestors, contexts, updated)
                       if INCREMENTAL and replaced and indentation is None and positions is not None else None)
        if found_edits is not None:
            new_code, edits = found_edits
            moved_from = (positions, edits)
            checked = checked and statements_parse(edits)
        else:
            new_code = new_module.code if indentation is None else indentation.render(new_module)
            moved_from = None
            checked = False
        if applied == 0 or new_code == code:
            break
        code = new_code
        # The next pass runs on the fixed tree itself: it renders exactly `code`, and re-parsing the text
        # cost a fifth of a real-code run. Whether `code` is valid Python is checked once, at the end.
        module = new_module

    if code != source and not checked:
        _check_output(source, code, path)
    return SourceOutcome(code=restore_tail(code, tail, parsed_tail), findings=first_findings,
                         fixes_applied=first_allowed if code != source else 0)
