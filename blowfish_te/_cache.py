"""A small bounded cache keyed by object identity, for per-workload computations."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable


class IdentityCache:
    """Keeps the values computed for the last ``size`` key objects (least recently used out).

    Keys are held strongly while cached, so an identity can never be reused by another object
    meanwhile; memory stays bounded whatever the caller creates.
    """

    def __init__(self, size: int = 8):
        self.size = size
        self._entries: OrderedDict[int, tuple[object, object]] = OrderedDict()

    def get(self, key: object, compute: Callable[[], object]):
        ident = id(key)
        if ident in self._entries:
            self._entries.move_to_end(ident)
            return self._entries[ident][1]
        value = compute()
        self._entries[ident] = (key, value)
        if len(self._entries) > self.size:
            self._entries.popitem(last=False)
        return value
