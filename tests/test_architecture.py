"""The shape of the code base, as the architecture asks for it: no import circles between our modules
(every import counts: function-level ones and ``if TYPE_CHECKING:`` ones too, a reader follows them all),
no module importing another module's ``_private`` names, no module over 500 lines, and a thin ``cli.py``."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Iterator

from conftest import REPO

# installed package name -> source folder (pyproject.toml maps rules/ to neuron_port.rules)
ROOTS = {"neuron_port": REPO / "neuron_port", "neuron_port.rules": REPO / "rules",
         "neuron_backend": REPO / "neuron_backend"}
MAX_LINES = 500
MAX_CLI_LINES = 300


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


def test_modules_stay_small_and_the_cli_thin():
    sizes = {module: len(path.read_text(encoding="utf-8").splitlines()) for module, path in MODULES.items()}
    assert {m: n for m, n in sizes.items() if n > MAX_LINES} == {}
    assert sizes["neuron_port.cli"] <= MAX_CLI_LINES
