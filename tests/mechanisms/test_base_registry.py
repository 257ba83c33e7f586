"""The mechanism registry's lazy loading and plug-in discovery (``blowfish_te.mechanisms.base``):
which names the loader is asked for, which entry points are loaded, and every refusal matched
word for word. A wrong lookup here runs another mechanism than the one named — one whose privacy
argument the caller never read."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys

import pytest

from blowfish_te import workloads as wl
from blowfish_te.mechanisms import MECHANISMS, Identity, get_mechanism, mechanism_class
from blowfish_te.mechanisms.base import ENTRY_POINT_GROUP, Registry, load_plugins

from tests.helpers import exactly


# -- the registry asks its loader for what it lacks ---------------------------------------------------
def _registry(available):
    asked = []
    registry = Registry()

    def loader(name):
        asked.append(name)
        for key in available if name is None else [name]:
            if key in available:
                dict.__setitem__(registry, key, available[key])

    registry.loader = loader
    return registry, asked


def test_a_lookup_loads_only_a_missing_name():
    registry, asked = _registry({"a": 1, "b": 2, "c": 3})
    assert registry["a"] == 1 and asked == ["a"]
    assert registry["a"] == 1 and asked == ["a"]  # present: not loaded again
    assert "b" in registry and asked == ["a", "b"]
    assert "b" in registry and asked == ["a", "b"]
    assert "z" not in registry and asked == ["a", "b", "z"]
    assert registry.get("c") == 3 and asked == ["a", "b", "z", "c"]
    assert registry.get("c", 9) == 3 and asked == ["a", "b", "z", "c"]
    assert registry.get("y", 9) == 9 and asked[-1] == "y"
    assert registry.get("x") is None and asked[-1] == "x"
    with pytest.raises(KeyError):
        registry["w"]
    assert asked[-1] == "w"


def test_listing_loads_everything():
    for listing, expected in [(len, 3), (lambda r: sorted(r.keys()), ["a", "b", "c"]), (lambda r: sorted(r), ["a", "b", "c"]),
                              (lambda r: sorted(r.values()), [1, 2, 3]), (lambda r: sorted(r.items()), [("a", 1), ("b", 2), ("c", 3)])]:
        registry, asked = _registry({"a": 1, "b": 2, "c": 3})
        assert listing(registry) == expected
        assert asked and set(asked) == {None}
        before = len(asked)
        listing(registry)
        assert len(asked) > before and set(asked) == {None}  # listing always asks: plug-ins may have been installed since


def test_a_registry_without_a_loader_is_a_dict():
    registry = Registry()
    dict.__setitem__(registry, "a", 1)
    assert registry["a"] == 1 and "a" in registry and registry.get("b", 2) == 2 and len(registry) == 1
    assert list(registry.keys()) == ["a"]


# -- plug-ins ----------------------------------------------------------------------------------------
class _Point:
    def __init__(self, name, value, load):
        self.name, self.value, self._load = name, value, load

    def load(self):
        return self._load()


def _never():
    raise AssertionError("this entry point must not be loaded")


def _plugin_class(name):
    return type(f"Plugin_{name}", (Identity,), {"name": name, "__module__": __name__}, register=False)


@pytest.fixture
def entry_points(monkeypatch):
    """Install fake entry points; remove what they registered afterwards."""
    names = []

    def install(points):
        names.extend(p.name for p in points)
        monkeypatch.setattr(importlib.metadata, "entry_points",
                            lambda group: list(points) if group == ENTRY_POINT_GROUP else [])

    yield install
    for name in names:
        dict.pop(MECHANISMS, name, None)


def test_load_plugins_with_a_name_loads_that_entry_point_only(entry_points):
    wanted = _plugin_class("zz_wanted")
    entry_points([_Point("zz_other", "pkg:Other", _never), _Point("zz_wanted", "pkg:Wanted", lambda: wanted),
                  _Point("zz_last", "pkg:Last", _never)])
    load_plugins("zz_wanted")
    assert dict.get(MECHANISMS, "zz_wanted") is wanted
    assert dict.get(MECHANISMS, "zz_other") is None


def test_load_plugins_without_a_name_loads_every_entry_point(entry_points):
    first, second = _plugin_class("zz_first"), _plugin_class("zz_second")
    entry_points([_Point("zz_first", "pkg:First", lambda: first), _Point("zz_second", "pkg:Second", lambda: second)])
    load_plugins()
    assert dict.get(MECHANISMS, "zz_first") is first and dict.get(MECHANISMS, "zz_second") is second


def test_mechanism_class_looks_up_the_named_plug_in_only(entry_points):
    wanted = _plugin_class("zz_named")
    entry_points([_Point("zz_broken", "pkg:Broken", _never), _Point("zz_named", "pkg:Named", lambda: wanted)])
    assert mechanism_class("zz_named") is wanted
    assert get_mechanism("zz_named").name == "zz_named"


@pytest.mark.parametrize("loaded, shown", [(lambda: 42, "42"), (lambda: len, repr(len))])
def test_an_entry_point_that_is_not_a_mechanism_class_is_refused(entry_points, loaded, shown):
    entry_points([_Point("zz_bad", "pkg:bad", loaded)])
    with pytest.raises(TypeError, match=exactly(
            f"entry point 'zz_bad' (pkg:bad) must name a Mechanism class whose name is 'zz_bad', got {shown}")):
        load_plugins("zz_bad")


def test_an_entry_point_whose_class_has_another_name_is_refused(entry_points):
    misnamed = _plugin_class("zz_inner")
    entry_points([_Point("zz_outer", "pkg:Outer", lambda: misnamed)])
    with pytest.raises(TypeError, match=exactly(
            f"entry point 'zz_outer' (pkg:Outer) must name a Mechanism class whose name is 'zz_outer', got {misnamed!r}")):
        load_plugins("zz_outer")
    assert dict.get(MECHANISMS, "zz_inner") is None


def test_names_that_are_not_strings_are_refused():
    with pytest.raises(TypeError, match=exactly("mechanism name must be a string, got int")):
        mechanism_class(3)
    with pytest.raises(TypeError, match=exactly("mechanism must be a name or a Mechanism instance, got float")):
        get_mechanism(3.5)


def test_a_mechanism_needs_arrays_of_the_domain_s_size_unless_it_says_otherwise():
    assert Identity().handles_large_domain(wl.prefix(8)) is False
    assert MECHANISMS["dawa"]().handles_large_domain(wl.prefix(8)) is False


def _fresh(script):
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.mark.slow
def test_in_a_fresh_process_a_lookup_imports_its_own_module_and_a_listing_imports_all():
    MECHANISMS.loader("dawa")  # the loader the fresh processes below rely on, called here too
    assert dict.get(MECHANISMS, "dawa") is not None
    loaded = _fresh("import sys; from blowfish_te.mechanisms import mechanism_class; mechanism_class('dawa'); "
                    "print(' '.join(sorted(m for m in sys.modules if m.startswith('blowfish_te.mechanisms.'))))").split()
    assert "blowfish_te.mechanisms.datadependent" in loaded
    assert not {"blowfish_te.mechanisms.privtree", "blowfish_te.mechanisms.ordered", "blowfish_te.mechanisms.optimized"} & set(loaded)
    listed = _fresh("from blowfish_te.mechanisms import MECHANISMS; print(' '.join(sorted(MECHANISMS)))").split()
    assert {"identity", "dawa", "privtree", "ordered_hierarchical_tuned", "adaptive", "marginals_optimized"} <= set(listed)
