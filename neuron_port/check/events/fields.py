"""Typed access to the fields of one JSON object of a simulator events file (neuron_backend/EVENTS.md),
and the site every event kind carries.

The event types take every field through ``EventFields``: a field that is absent or ``null`` gets its
default, a field of the wrong type raises ``MalformedEvent`` (the reader then skips the whole line and
counts it as bad). Booleans never count as integers; integers count as numbers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional


class MalformedEvent(ValueError):
    """A line that is not an event object of a known kind with fields of the documented types."""


def is_integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class EventFields:
    """The fields of one event (or of an object nested in one), read with the type they must have."""

    def __init__(self, data: Mapping[str, Any], where: str = "") -> None:
        self.data = data
        self.where = where

    def _fail(self, name: str, wanted: str) -> MalformedEvent:
        value = self.data.get(name)
        return MalformedEvent(f"{self.where}{name}: expected {wanted}, got {type(value).__name__} {value!r:.60}")

    def raw(self, name: str) -> Any:
        """Any JSON value (fields whose content the recording module chooses freely)."""
        return self.data.get(name)

    def integer(self, name: str, default: int = 0) -> int:
        value = self.data.get(name)
        if value is None:
            return default
        if not is_integer(value):
            raise self._fail(name, "an integer")
        return value

    def optional_integer(self, name: str) -> Optional[int]:
        return None if self.data.get(name) is None else self.integer(name)

    def number(self, name: str) -> Optional[float]:
        value = self.data.get(name)
        if value is None:
            return None
        if not (is_integer(value) or isinstance(value, float)):
            raise self._fail(name, "a number")
        return float(value)

    def text(self, name: str) -> Optional[str]:
        value = self.data.get(name)
        if value is not None and not isinstance(value, str):
            raise self._fail(name, "a string")
        return value

    def required_text(self, name: str) -> str:
        value = self.text(name)
        if value is None:
            raise self._fail(name, "a string")
        return value

    def flag(self, name: str) -> Optional[bool]:
        value = self.data.get(name)
        if value is not None and not isinstance(value, bool):
            raise self._fail(name, "true or false")
        return value

    def array(self, name: str) -> Optional[list]:
        value = self.data.get(name)
        if value is not None and not isinstance(value, list):
            raise self._fail(name, "a list")
        return value

    def texts(self, name: str) -> tuple[str, ...]:
        items = self.array(name) or []
        if not all(isinstance(item, str) for item in items):
            raise self._fail(name, "a list of strings")
        return tuple(items)

    def integers(self, name: str) -> tuple[int, ...]:
        items = self.array(name) or []
        if not all(is_integer(item) for item in items):
            raise self._fail(name, "a list of integers")
        return tuple(items)

    def mapping(self, name: str) -> Optional[Mapping[str, Any]]:
        value = self.data.get(name)
        if value is not None and not isinstance(value, dict):
            raise self._fail(name, "an object")
        return value

    def nested(self, name: str) -> Optional[EventFields]:
        """The object in field ``name`` (None when absent), read field by field in turn."""
        value = self.mapping(name)
        return None if value is None else EventFields(value, f"{self.where}{name}.")

    def objects(self, name: str) -> list[EventFields]:
        """The objects of the list in field ``name`` (empty when absent)."""
        out = []
        for index, item in enumerate(self.array(name) or []):
            if not isinstance(item, dict):
                raise MalformedEvent(f"{self.where}{name}[{index}]: expected an object, got {type(item).__name__}")
            out.append(EventFields(item, f"{self.where}{name}[{index}]."))
        return out


@dataclass(frozen=True)
class Site:
    """A user source line as the simulator captured it: an absolute file path and its line."""

    file: str = ""
    line: int = 0
    function: Optional[str] = None
    code: str = ""
    thread: Optional[str] = None  # "autograd" when the op ran in autograd's device thread
    module: Optional[str] = None  # path of the innermost module whose forward ran the op ("blocks.3.attn")

    @classmethod
    def from_json(cls, value: Any, where: str = "site") -> Optional[Site]:
        """A site object, or None for ``null`` (no user frame) and for an empty object."""
        if value is None:
            return None
        if not isinstance(value, dict):
            raise MalformedEvent(f"{where}: expected an object or null, got {type(value).__name__}")
        if not value:
            return None
        fields = EventFields(value, f"{where}.")
        return cls(file=fields.text("file") or "", line=fields.integer("line"), function=fields.text("function"),
                   code=fields.text("code") or "", thread=fields.text("thread"), module=fields.text("module"))


def site_field(fields: EventFields, name: str = "site") -> Optional[Site]:
    """The site in field ``name`` of an event (None when absent or null)."""
    return Site.from_json(fields.raw(name), fields.where + name)
