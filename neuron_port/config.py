"""Configuration from ``[tool.neuron-port]`` in the project's pyproject.toml, merged with the CLI.

Unknown keys and bad values are configuration errors (exit 2) naming the file, the line where it can be
found and the key, so a typo never silently disables a rule.

Which pyproject.toml: the closest one that has a ``[tool.neuron-port]`` table, from the first path
upwards (ruff's rule for ``[tool.ruff]``: astral-sh/ruff docs/configuration.md, "In locating the closest
pyproject.toml file for a given path, Ruff ignores any pyproject.toml files that lack a [tool.ruff]
section"), but never above the repository root (the first folder with ``.git``) and, outside a
repository, never above the working directory: a stray pyproject.toml in a parent folder (a home folder,
/tmp) must not run its check-command or exclude the whole tree.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import stat
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Optional, Sequence

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from neuron_port.config_selection import Layer, resolve
from neuron_port.errors import UsageError
from neuron_port.rules.vocabulary import SEVERITIES, TARGETS


class ConfigError(UsageError):
    pass


# Above this a limit means nothing (LibCST needs ~1 GB of memory per MB of source); 0 is "no limit".
MAX_FILE_SIZE_LIMIT_MB = 10_000
FAIL_ON = SEVERITIES + ("never",)
TABLE = "[tool.neuron-port]"


def check_max_file_size(value: Any, where: str) -> float:
    """``value`` as a file-size limit in MB, or ConfigError naming ``where`` (a key or an option)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not 0 <= value <= MAX_FILE_SIZE_LIMIT_MB:
        raise ConfigError(f"{where} = {show(value)}: must be a number of MB from 0 to {MAX_FILE_SIZE_LIMIT_MB} "
                          "(0 = no limit)")
    return float(value)


def show(value: Any) -> str:
    """A value as TOML spells it (``true``, ``nan``, ``"text"``), for messages."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(show(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {show(v)}" for k, v in value.items()) + "}"
    return str(value)


def at(path: Path, line: Optional[int] = None) -> str:
    """``path:line`` for messages (just the path when the line is not known)."""
    return f"{display(path)}:{line}" if line else display(path)


def display(path: Path) -> str:
    """A path for messages: relative to the working directory when it is inside it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError):
        return str(path)


@dataclass(frozen=True)
class Settings:
    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    target: str = "neuron"
    fail_on: str = "error"
    unsafe_fixes: bool = False
    check_command: Optional[str] = None
    # Files above this size (MB) are reported and skipped: LibCST needs ~1 GB of memory per MB of source,
    # and files that large are nearly always generated. 0 = no limit.
    max_file_size: float = 2.0
    source: Optional[str] = None  # the pyproject.toml the settings came from

    def __post_init__(self) -> None:
        check_max_file_size(self.max_file_size, "max_file_size")  # API callers get a UsageError too

    def merged(self, **cli: Any) -> "Settings":
        """CLI values win where given (None = not given); --exclude extends the configured excludes;
        --select / --ignore / --extend-select / --extend-ignore are a layer on top of the configured
        selection, with ruff's precedence (neuron_port/config_selection.py), and may be comma-separated
        (``--select NP1,NP201``)."""
        changes: dict[str, Any] = {}
        rules = {key: cli.pop(key, None) for key in SELECTION_OPTIONS}
        if any(value is not None for value in rules.values()):
            changes["select"], changes["ignore"] = self._selection_with(**rules)
        for key, value in cli.items():
            if value is None:
                continue
            if key in ("exclude",):
                changes[key] = tuple(self.exclude) + tuple(value)
            elif key == "max_file_size":
                changes[key] = check_max_file_size(value, "--max-file-size")
            else:
                changes[key] = value
        return replace(self, **changes)

    def _selection_with(self, **options: Optional[Sequence[str]]) -> tuple[tuple[str, ...], tuple[str, ...]]:
        from neuron_port.rules.registry import UnknownCodeError, validate_patterns

        split: dict[str, tuple[str, ...]] = {}
        for key, value in options.items():
            split[key] = tuple(v.strip() for item in value or () for v in item.split(",") if v.strip())
            try:
                validate_patterns(split[key])
            except UnknownCodeError as exc:
                raise ConfigError(f"--{key.replace('_', '-')}: {exc}") from None
        layer = Layer(select=split["select"] or None, ignore=split["ignore"] + split["extend_ignore"],
                      extend_select=split["extend_select"])
        return resolve(self.select, self.ignore, layer)


KEYS = {"select", "ignore", "extend-select", "extend-ignore", "exclude", "target", "fail-on", "unsafe-fixes",
        "check-command", "extend-exclude", "max-file-size"}
SELECTION_OPTIONS = ("select", "ignore", "extend_select", "extend_ignore")

# -- issue 14 (estimate): [tool.neuron-port.estimate] is a sub-table read and checked by
# neuron_port/check/estimate/options.py from Settings.source; here it is only a known key.
KEYS |= {"estimate"}


# -- which pyproject.toml -------------------------------------------------------------------------------
def _is_regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(path.stat().st_mode)
    except OSError:
        return False


def search_folders(start: Path, cwd: Optional[Path] = None) -> list[Path]:
    """The folders whose pyproject.toml may configure ``start``, nearest first: its folder and the parents
    up to the repository root (the first with ``.git``, included); with no ``.git`` anywhere above, only
    those at or below the working directory (and ``start``'s own folder, wherever it is)."""
    start = start.resolve()
    folder = start if start.is_dir() else start.parent
    chain = [folder, *folder.parents]
    for index, candidate in enumerate(chain):
        if (candidate / ".git").exists():
            return chain[:index + 1]
    cwd = (cwd or Path.cwd()).resolve()
    return [c for index, c in enumerate(chain) if index == 0 or c == cwd or cwd in c.parents]


def project_root(start: Path, cwd: Optional[Path] = None) -> Optional[Path]:
    """The nearest folder with a pyproject.toml or ``.git`` among ``search_folders``, or None."""
    for folder in search_folders(start, cwd):
        if _is_regular(folder / "pyproject.toml") or (folder / ".git").exists():
            return folder
    return None


def find_config(start: Path, cwd: Optional[Path] = None) -> Optional[tuple[Path, str, dict]]:
    """The closest pyproject.toml with a [tool.neuron-port] table, its text and that table, or None. Every
    pyproject.toml on the way is read: one that is not valid TOML is an error, as for ruff."""
    for folder in search_folders(start, cwd):
        path = folder / "pyproject.toml"
        if not _is_regular(path):
            continue  # a FIFO or device named pyproject.toml is never opened
        text = read_config_text(path)
        table = _tool_table(_parse(text, path), text, path)
        if table is not None:
            return path, text, table
    return None


# -- reading and checking ---------------------------------------------------------------------------
def read_config_text(path: Path) -> str:
    """The text of a configuration file; ConfigError when it is not a regular file, cannot be read or is
    not UTF-8 (TOML is UTF-8), naming the file and the line of the first bad byte."""
    try:
        if not _is_regular(path):
            kind = "is a directory" if path.is_dir() else "not a regular file" if path.exists() else "no such file"
            raise ConfigError(f"{display(path)}: {kind}")
        # O_NONBLOCK: if the path became a FIFO after the check above, the open must not wait for a writer
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise ConfigError(f"{display(path)}: not a regular file")
            raw = handle.read()
    except OSError as exc:
        raise ConfigError(f"{display(path)}: cannot read: {exc.strerror or exc}") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise ConfigError(f"{display(path)}:{line}: not UTF-8 (byte {raw[exc.start]:#04x}); TOML files must be "
                          "UTF-8") from None


def _parse(text: str, path: Path) -> dict:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{display(path)}: invalid TOML: {exc}") from None


def key_line(text: str, key: str, after: Optional[str] = None) -> Optional[int]:
    """The line that assigns ``key`` (plain, quoted or dotted), the first after the line ``after`` when
    that header is in the file; None when it cannot be found (an inline table, say)."""
    lines = text.splitlines()
    start = 0
    if after is not None:
        for number, line in enumerate(lines):
            if line.strip().replace(" ", "") == after:
                start = number + 1
                break
    pattern = re.compile(rf"""^\s*(?:[\w"'.-]*\.)?["']?{re.escape(key)}["']?\s*=""")
    for number in range(start, len(lines)):
        if pattern.match(lines[number]):
            return number + 1
    return None


def _tool_table(data: dict, text: str, path: Path) -> Optional[dict]:
    tool = data.get("tool")
    if tool is None:
        return None
    if not isinstance(tool, dict):
        line = key_line(text, "tool")
        raise ConfigError(f"{at(path, line)}: `tool` must be a table (it holds {TABLE}), "
                          f"not {_toml_type(tool)}")
    table = tool.get("neuron-port")
    if table is not None and not isinstance(table, dict):
        line = key_line(text, "neuron-port")
        raise ConfigError(f"{at(path, line)}: {TABLE} must be a table, not {_toml_type(table)}")
    return table


def _toml_type(value: Any) -> str:
    names = {bool: "a boolean", int: "an integer", float: "a float", str: "a string", list: "an array",
             dict: "a table"}
    return next((name for kind, name in names.items() if isinstance(value, kind)), "a date or time")


class _Checker:
    """Type and range checks of the table's keys; errors name the file, the key's line and the key."""

    def __init__(self, path: Path, text: str, table: dict) -> None:
        self.path, self.text, self.table = path, text, table

    def fail(self, key: str, problem: str) -> ConfigError:
        where = at(self.path, key_line(self.text, key, after=TABLE))
        return ConfigError(f"{where}: {TABLE} {key} = {show(self.table[key])}: {problem}")

    def string_list(self, key: str) -> tuple[str, ...]:
        value = self.table[key]
        if isinstance(value, str):
            value = [v for v in value.split(",")]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.fail(key, "must be a list of strings")
        items = tuple(v.strip() for v in value)
        if not all(items):
            raise self.fail(key, "has an empty entry")
        return items

    def rule_patterns(self, key: str) -> tuple[str, ...]:
        patterns = self.string_list(key)
        from neuron_port.rules.registry import UnknownCodeError, validate_patterns  # the registry is big

        try:
            validate_patterns(patterns)
        except UnknownCodeError as exc:
            raise self.fail(key, str(exc)) from None
        return patterns

    def choice(self, key: str, choices: tuple[str, ...]) -> str:
        value = self.table[key]
        if not isinstance(value, str) or value not in choices:
            raise self.fail(key, f"must be one of {', '.join(choices)}")
        return value

    def boolean(self, key: str) -> bool:
        value = self.table[key]
        if not isinstance(value, bool):
            raise self.fail(key, "must be true or false")
        return value

    def size(self, key: str) -> float:
        try:
            return check_max_file_size(self.table[key], key)
        except ConfigError as exc:
            raise self.fail(key, str(exc).split(": ", 1)[1]) from None

    def command(self, key: str) -> str:
        value = self.table[key]
        if not isinstance(value, str) or not value.strip():
            raise self.fail(key, "must be a command line (a non-empty string)")
        try:
            shlex.split(value)
        except ValueError as exc:
            raise self.fail(key, f"cannot be split into arguments ({exc})") from None
        return value


def settings_from_table(path: Path, text: str, table: dict) -> Settings:
    check = _Checker(path, text, table)
    unknown = sorted(set(table) - KEYS)
    if unknown:
        line = key_line(text, unknown[0], after=TABLE)
        raise ConfigError(f"{at(path, line)}: unknown key(s) in {TABLE}: {', '.join(unknown)} "
                          f"(known: {', '.join(sorted(KEYS))})")
    values: dict[str, Any] = {}
    rules = {key: check.rule_patterns(key) if key in table else () for key in
             ("select", "ignore", "extend-select", "extend-ignore")}
    layer = Layer(select=rules["select"] or None, ignore=rules["ignore"] + rules["extend-ignore"],
                  extend_select=rules["extend-select"])
    values["select"], values["ignore"] = resolve((), (), layer)
    excludes = tuple(p for key in ("exclude", "extend-exclude") if key in table for p in check.string_list(key))
    if excludes:
        values["exclude"] = excludes
    if "target" in table:
        values["target"] = check.choice("target", TARGETS)
    if "fail-on" in table:
        values["fail_on"] = check.choice("fail-on", FAIL_ON)
    if "unsafe-fixes" in table:
        values["unsafe_fixes"] = check.boolean("unsafe-fixes")
    if "max-file-size" in table:
        values["max_file_size"] = check.size("max-file-size")
    if "check-command" in table:
        values["check_command"] = check.command("check-command")
    return Settings(source=str(path), **values)


def load_settings(start: Path, explicit: Optional[Path] = None, cwd: Optional[Path] = None) -> Settings:
    """The settings for a run on ``start``: from ``explicit`` (--config, which must have the table) or the
    discovered pyproject.toml (see the module docstring); defaults when there is none."""
    if explicit is not None:
        text = read_config_text(explicit)
        data = _parse(text, explicit)
        table = _tool_table(data, text, explicit)
        # a top-level key is a setting left outside the table (any, when there is no table at all)
        stray = [key for key, value in data.items() if not isinstance(value, dict) and (table is None or key in KEYS)]
        if stray:
            raise ConfigError(f"{at(explicit, key_line(text, stray[0]))}: `{stray[0]}` is a top-level key; "
                              f"--config reads only the {TABLE} table: put the settings under it")
        if table is None:
            raise ConfigError(f"{display(explicit)}: no {TABLE} table; --config needs a TOML file (a "
                              "pyproject.toml or neuron-port.toml) with the settings under that table")
        return settings_from_table(explicit, text, table)
    found = find_config(start, cwd)
    if found is None:
        return Settings()
    return settings_from_table(*found)
