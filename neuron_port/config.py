"""Configuration from ``[tool.neuron-port]`` in the project's pyproject.toml, merged with the CLI.

Unknown keys and bad values are configuration errors (exit 2) naming the file and the key, so a typo
never silently disables a rule.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Optional

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from neuron_port.errors import UsageError
from neuron_port.rules.vocabulary import SEVERITIES, TARGETS


class ConfigError(UsageError):
    pass


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

    def merged(self, **cli: Any) -> "Settings":
        """CLI values win where given (None = not given); --exclude extends the configured excludes;
        --select / --ignore replace them and may be comma-separated (``--select NP1,NP201``)."""
        changes: dict[str, Any] = {}
        for key, value in cli.items():
            if value is None:
                continue
            if key in ("exclude",):
                changes[key] = tuple(self.exclude) + tuple(value)
            elif key in ("select", "ignore"):
                changes[key] = tuple(v.strip() for item in value for v in item.split(",") if v.strip())
            else:
                changes[key] = value
        return replace(self, **changes)


KEYS = {"select", "ignore", "exclude", "target", "fail-on", "unsafe-fixes", "check-command", "extend-exclude",
        "max-file-size"}


def find_pyproject(start: Path) -> Optional[Path]:
    start = start.resolve()
    folder = start if start.is_dir() else start.parent
    for candidate in (folder, *folder.parents):
        pyproject = candidate / "pyproject.toml"
        if pyproject.is_file():
            return pyproject
        if (candidate / ".git").exists():
            break
    return None


def _str_list(value: Any, key: str, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        return tuple(v.strip() for v in value.split(",") if v.strip())
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise ConfigError(f"{where}: [tool.neuron-port] {key} must be a list of strings")


def load_settings(start: Path, explicit: Optional[Path] = None) -> Settings:
    path = explicit or find_pyproject(start)
    if path is None:
        return Settings()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    table = data.get("tool", {}).get("neuron-port")
    if table is None:
        return Settings()
    where = str(path)
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: [tool.neuron-port] must be a table")
    unknown = sorted(set(table) - KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) in [tool.neuron-port]: {', '.join(unknown)} "
                          f"(known: {', '.join(sorted(KEYS))})")
    settings = Settings(source=where)
    if "select" in table:
        settings = replace(settings, select=_str_list(table["select"], "select", where))
    if "ignore" in table:
        settings = replace(settings, ignore=_str_list(table["ignore"], "ignore", where))
    excludes: tuple[str, ...] = ()
    for key in ("exclude", "extend-exclude"):
        if key in table:
            excludes += _str_list(table[key], key, where)
    if excludes:
        settings = replace(settings, exclude=excludes)
    if "target" in table:
        if table["target"] not in TARGETS:
            raise ConfigError(f"{where}: [tool.neuron-port] target must be one of {', '.join(TARGETS)}")
        settings = replace(settings, target=table["target"])
    if "fail-on" in table:
        if table["fail-on"] not in SEVERITIES + ("never",):
            raise ConfigError(f"{where}: [tool.neuron-port] fail-on must be one of info, warning, error, never")
        settings = replace(settings, fail_on=table["fail-on"])
    if "unsafe-fixes" in table:
        if not isinstance(table["unsafe-fixes"], bool):
            raise ConfigError(f"{where}: [tool.neuron-port] unsafe-fixes must be true or false")
        settings = replace(settings, unsafe_fixes=table["unsafe-fixes"])
    if "max-file-size" in table:
        value = table["max-file-size"]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise ConfigError(f"{where}: [tool.neuron-port] max-file-size must be a number of MB (0 = no limit)")
        settings = replace(settings, max_file_size=float(value))
    if "check-command" in table:
        if not isinstance(table["check-command"], str):
            raise ConfigError(f"{where}: [tool.neuron-port] check-command must be a string")
        settings = replace(settings, check_command=table["check-command"])
    return settings
