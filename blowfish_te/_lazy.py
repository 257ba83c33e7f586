"""Packages whose public names load their module on first use (PEP 562)."""

from __future__ import annotations

import importlib


def lazy_names(package: str, modules: dict[str, tuple[str, ...]], namespace: dict):
    """``(__getattr__, __dir__, where)`` for ``package``: each name of ``modules`` (module → the
    names it exports) imports its module on first access and is then kept in ``namespace``."""
    where = {name: module for module, names in modules.items() for name in names}

    def __getattr__(name: str):
        if name in where:
            value = getattr(importlib.import_module(where[name]), name)
            namespace[name] = value
            return value
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(namespace.get("__all__", ())))

    return __getattr__, __dir__, where
