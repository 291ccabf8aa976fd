"""The shape of the code base, as the architecture asks for it: no import circles between our modules
(every import counts: function-level ones and ``if TYPE_CHECKING:`` ones too, a reader follows them all),
no module importing another module's ``_private`` names, no module over 400 lines (generated files and
mapping tables aside), a thin ``cli.py`` with the commands' modules in ``neuron_port/commands/``, the
event kinds of the run listed once and every runtime aggregator wired through the one list."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Iterator

from conftest import REPO

# installed package name -> source folder (pyproject.toml maps rules/ to neuron_port.rules)
ROOTS = {"neuron_port": REPO / "neuron_port", "neuron_port.rules": REPO / "rules",
         "neuron_backend": REPO / "neuron_backend"}
MAX_LINES = 400
MAX_CLI_LINES = 300
# Data, not logic: the pre-filter's generated rule index and the families' mapping tables.
LONG_DATA_MODULES = {"neuron_port.rules.triggers_generated"}


def _modules() -> dict[str, Path]:
    found = {}
    for package, folder in ROOTS.items():
        for path in folder.rglob("*.py"):
            parts = path.relative_to(folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join((package, *parts))] = path
    return found


MODULES = _modules()


def _all_imports(tree: ast.AST) -> Iterator[ast.AST]:
    """Every import statement, wherever it stands."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def _resolve(name: str) -> str | None:
    """The longest module of ours that ``name`` names or lies in."""
    while name:
        if name in MODULES:
            return name
        name = name.rpartition(".")[0]
    return None


def _imports(module: str) -> Iterator[tuple[str, list[str]]]:
    """(imported module, names imported from it) for each import of ``module``."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in _all_imports(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = _resolve(alias.name)
                if target:
                    yield target, []
            continue
        base = node.module or ""
        if node.level:
            anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
            base = ".".join(anchor + ([base] if base else []))
        for alias in node.names:
            submodule = f"{base}.{alias.name}"
            if submodule in MODULES:
                yield submodule, []
            else:
                target = _resolve(base)
                if target:
                    yield target, [alias.name]


def _graph() -> dict[str, set[str]]:
    return {module: {target for target, _ in _imports(module) if target != module} for module in MODULES}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(graph.get(node, ())):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return out


def test_the_module_map_is_complete():
    assert {"neuron_port.cli", "neuron_port.api", "neuron_port.rewrite.engine", "neuron_port.check.runtime",
            "neuron_port.rules.registry", "neuron_backend.events"} <= set(MODULES)
    assert len(MODULES) > 100


def test_no_import_circles():
    assert _cycles(_graph()) == []


def test_the_cycle_finder_finds_a_circle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_module_imports_private_names_of_another():
    offenders = []
    for module in MODULES:
        for target, names in _imports(module):
            private = [n for n in names if n.startswith("_") and not n.startswith("__")]
            if private and target != module:
                offenders.append(f"{module} imports {private} from {target}")
    for path in sorted((REPO / "tests").rglob("*.py")):
        for node in _all_imports(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and _resolve(node.module):
                private = [a.name for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
                if private:
                    offenders.append(f"{path.relative_to(REPO)} imports {private} from {node.module}")
    assert offenders == []


def _is_data(module: str) -> bool:
    return module in LONG_DATA_MODULES or module.endswith(".tables")


def test_modules_stay_small_and_the_cli_thin():
    sizes = {module: len(path.read_text(encoding="utf-8").splitlines()) for module, path in MODULES.items()}
    assert {m: n for m, n in sizes.items() if n > MAX_LINES and not _is_data(m)} == {}
    assert sizes["neuron_port.cli"] <= MAX_CLI_LINES


def test_cli_py_is_the_only_cli_module_the_commands_live_in_their_folder():
    assert sorted(p.name for p in (REPO / "neuron_port").glob("cli*.py")) == ["cli.py"]
    commands = {m for m in MODULES if m.startswith("neuron_port.commands.")}
    assert {"neuron_port.commands.options", "neuron_port.commands.stdin", "neuron_port.commands.console"} <= commands
    assert all(importer in {"neuron_port.cli", "neuron_port.__main__"} or importer.startswith("neuron_port.commands")
               for importer, targets in _graph().items() for target in targets if target in commands), \
        "only cli.py and the commands themselves use neuron_port.commands"


def _class_kinds(path: Path) -> dict[str, str]:
    """class name -> its ``KIND = "..."`` of the classes of a module that declare one."""
    kinds = {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.ClassDef):
            for stmt in node.body:
                target = stmt.targets[0] if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 else \
                    stmt.target if isinstance(stmt, ast.AnnAssign) else None
                if isinstance(target, ast.Name) and target.id == "KIND" and isinstance(stmt.value, ast.Constant):
                    kinds[node.name] = stmt.value.value
    return kinds


def test_the_event_kinds_are_listed_once():
    """Each event kind is one class with its KIND; the reader's table of kinds is derived from the one
    ``Event`` union, so no second list can fall out of step with it."""
    from typing import get_args

    from neuron_port.check import events

    declared: dict[str, list[str]] = {}
    for path in sorted((REPO / "neuron_port" / "check" / "events").glob("*.py")):
        for name, kind in _class_kinds(path).items():
            declared.setdefault(kind, []).append(f"{path.name}:{name}")
    assert {k: v for k, v in declared.items() if len(v) > 1} == {}
    union = get_args(events.Event)
    assert sorted(t.__name__ for t in union) == sorted(n.split(":")[1] for names in declared.values() for n in names)
    assert events.EVENT_TYPES == {t.KIND: t for t in union}
    # the kinds are named once in events/__init__.py: in the union (and its imports), not in a second table
    source = (REPO / "neuron_port" / "check" / "events" / "__init__.py").read_text(encoding="utf-8")
    assert all(source.count(f'"{kind}"') == 0 for kind in declared), "an event kind spelled out again"


def test_every_aggregator_is_wired_through_the_one_list():
    """runtime.py builds its handler table, the section and the findings from AGGREGATORS: every
    aggregator class is in it, each declares the event kinds it takes and its section keys, and no two
    fill the same key."""
    import importlib
    from typing import get_args

    from neuron_port.check import runtime
    from neuron_port.check.aggregate.base import Aggregator
    from neuron_port.check.events import Event

    found = set()
    for module in sorted(m for m in MODULES if m.startswith("neuron_port.check.aggregate.")):
        for value in vars(importlib.import_module(module)).values():
            if isinstance(value, type) and issubclass(value, Aggregator) and value is not Aggregator:
                found.add(value)
    assert found == set(runtime.AGGREGATORS)
    keys = [key for aggregator in runtime.AGGREGATORS for key in aggregator.SECTION]
    assert len(keys) == len(set(keys)) and all(a.SECTION and a.EVENTS for a in runtime.AGGREGATORS)
    kinds = set(get_args(Event))
    for aggregator in runtime.AGGREGATORS:
        assert set(aggregator.EVENTS) <= kinds, aggregator
        assert all(callable(getattr(aggregator, method, None)) for method in aggregator.EVENTS.values()), aggregator
    # runtime.py spells out no aggregator's section key itself (docstrings aside)
    tree = ast.parse(MODULES["neuron_port.check.runtime"].read_text(encoding="utf-8"))
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef)) and node.body
                  and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    strings = {node.value for node in ast.walk(tree)
               if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings}
    assert not strings & set(keys)
