"""Typed readers for lab.toml fields: each checks one value and names its field path on failure."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from typing import Any, NoReturn, TypeVar

from graders.spec.expr import ExprError, Number, names_in
from graders.spec.model import LabSpecError

T = TypeVar("T")

IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
CASE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.x+-]{0,63}$")


class FieldReader:
    """The file label used in every message, e.g. `matmul-tiled/lab.toml`."""

    def __init__(self, label: str) -> None:
        self.label = label

    def fail(self, path: str, message: str) -> NoReturn:
        raise LabSpecError(
            f"{self.label}: {path}: {message}" if path else f"{self.label}: {message}"
        )

    def table(
        self, value: Any, path: str, *, required: Iterable[str] = (), optional: Iterable[str] = ()
    ) -> dict[str, Any]:
        if not isinstance(value, dict):
            self.fail(path, f"expected a table, got {_kind(value)}")
        required, optional = set(required), set(optional)
        unknown = sorted(set(value) - required - optional)
        if unknown:
            allowed = ", ".join(sorted(required | optional))
            self.fail(path, f"unknown key {unknown[0]!r} (allowed: {allowed})")
        for key in sorted(required):
            if key not in value:
                self.fail(path, f"{key!r} is missing")
        return value

    def string(self, value: Any, path: str, *, pattern: re.Pattern[str] | None = None) -> str:
        if not isinstance(value, str) or not value.strip():
            self.fail(path, f"expected non-empty text, got {_kind(value)}")
        if pattern is not None and not pattern.match(value):
            self.fail(path, f"{value!r} does not match {pattern.pattern}")
        return value

    def boolean(self, value: Any, path: str) -> bool:
        if not isinstance(value, bool):
            self.fail(path, f"expected true or false, got {_kind(value)}")
        return value

    def integer(self, value: Any, path: str, *, minimum: int | None = None) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(path, f"expected a whole number, got {_kind(value)}")
        if minimum is not None and value < minimum:
            self.fail(path, f"must be at least {minimum}, got {value}")
        return value

    def finite(self, value: Any, path: str) -> int | float:
        """A whole number or a finite float, of either sign (TOML's own types kept)."""
        if isinstance(value, bool) or not isinstance(value, int | float):
            self.fail(path, f"expected a number, got {_kind(value)}")
        if isinstance(value, float) and not math.isfinite(value):
            self.fail(path, f"expected a finite number, got {value}")
        return value

    def number(self, value: Any, path: str, *, positive: bool = False) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            self.fail(path, f"expected a number, got {_kind(value)}")
        if value < 0 or (positive and value == 0):
            self.fail(path, f"must be {'positive' if positive else 'non-negative'}, got {value}")
        return float(value)

    def expr(self, value: Any, path: str) -> str | Number:
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            self.fail(path, f"expected a number or an expression, got {_kind(value)}")
        try:
            names_in(value)
        except ExprError as exc:
            self.fail(path, str(exc))
        return value

    def list_of(
        self,
        value: Any,
        path: str,
        item: Callable[[Any, str], T],
        *,
        min_len: int = 0,
        max_len: int | None = None,
    ) -> list[T]:
        if not isinstance(value, list):
            self.fail(path, f"expected a list, got {_kind(value)}")
        if len(value) < min_len or (max_len is not None and len(value) > max_len):
            bounds = f"{min_len} to {max_len}" if max_len is not None else f"at least {min_len}"
            self.fail(path, f"expected {bounds} entries, got {len(value)}")
        return [item(v, f"{path}[{i}]") for i, v in enumerate(value)]


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "a list"
    return f"{type(value).__name__} {value!r}"
