"""Checks of suite files' values, shared by the suite parser and the experiment kinds: each
failure is a :class:`~blowfish_te.errors.SuiteError` naming the file and the offending key."""

from __future__ import annotations

from ..errors import SuiteError


def fail(where: str, message: str):
    raise SuiteError(f"{where}: {message}")


def unknown(where: str, table: dict, allowed: set) -> None:
    extra = sorted(set(table) - allowed)
    if extra:
        fail(where, f"unknown key(s) {', '.join(extra)}; allowed: {', '.join(sorted(allowed))}")


def listed(where: str, key: str, value, kind, minimum=None) -> tuple:
    if not isinstance(value, list) or not value:
        fail(where, f"{key} must be a non-empty list, got {value!r}")
    for item in value:
        if isinstance(item, bool) or not isinstance(item, kind) or (minimum is not None and not item > minimum):
            what = f"{'numbers' if kind == (int, float) else kind.__name__ + 's'}" + ("" if minimum is None else f" > {minimum}")
            fail(where, f"{key} must hold {what}, got {item!r}")
    return tuple(value)


def integer(where: str, key: str, value, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        fail(where, f"{key} must be an integer >= {minimum}, got {value!r}")
    return value
