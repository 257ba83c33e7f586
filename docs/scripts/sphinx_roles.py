"""Griffe extension of the API reference: the package's numpy-style docstrings cross-reference
with Sphinx roles (:func:`name`, :class:`~module.Name`, :meth:`Plan.release`, ...), which
mkdocstrings would print as text. Each role becomes a link (an optional mkdocs-autorefs reference)
to the object it names, resolved from the object holding the docstring outward to the package;
a name outside the package (numpy, scipy) or not rendered in the reference stays code.

Loaded by ``mkdocs.yml`` (``extensions: [docs/scripts/sphinx_roles.py]``).
"""

from __future__ import annotations

import re

import griffe

#: A role: "~" to show the last component only, and the target or "title <target>".
ROLE = re.compile(r":(?:py:)?(?:func|class|meth|data|mod|attr|exc|obj|const):`(~?)([^`]+)`")
TITLED = re.compile(r"(.*?)\s*<([^<>]+)>")


class SphinxRoles(griffe.Extension):
    """Rewrite every docstring of the package once it is loaded."""

    def on_package(self, *, pkg: griffe.Module, **kwargs) -> None:
        self._rewrite(pkg, pkg)

    def _rewrite(self, obj, pkg: griffe.Module) -> None:
        if obj.is_alias:
            return
        if obj.docstring is not None:
            obj.docstring.value = ROLE.sub(lambda match: self._link(match, obj, pkg), obj.docstring.value)
        for member in list(obj.members.values()):
            self._rewrite(member, pkg)

    @staticmethod
    def _link(match: re.Match, obj, pkg: griffe.Module) -> str:
        short, target = match.group(1), match.group(2).strip()
        titled = TITLED.fullmatch(target)
        title, target = (titled.group(1), titled.group(2)) if titled else (None, target)
        target = target.lstrip(".")
        name = target.removesuffix("()")
        shown = title or (name.rsplit(".", 1)[-1] if short else name) + ("()" if target.endswith("()") else "")
        scopes, scope = [], obj
        while scope is not None:
            scopes.append(scope.path)
            scope = scope.parent
        for candidate in [f"{path}.{name}" for path in scopes] + [name]:
            try:
                identifier = pkg.modules_collection[candidate].canonical_path
            except (KeyError, ValueError, griffe.AliasResolutionError, griffe.CyclicAliasError):
                continue
            return f'<autoref identifier="{identifier}" optional><code>{shown}</code></autoref>'
        return f"<code>{shown}</code>"
