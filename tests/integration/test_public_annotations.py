"""The package ships ``py.typed``: every public function and method is annotated, so a type
checker sees the whole public API (mypy checks the release seam's modules in CI)."""

from __future__ import annotations

import ast
import pathlib

import blowfish_te


def _unannotated(path: pathlib.Path) -> list[str]:
    """``Class.function:line`` of each public function of ``path`` missing a parameter's or the
    return annotation (self and cls excepted)."""
    missing = []

    def visit(body, owner: str | None) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.name.startswith("_"):
                args = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
                params = [a for a in args if a.arg not in ("self", "cls")] + [a for a in (node.args.vararg, node.args.kwarg) if a]
                if node.returns is None or any(a.annotation is None for a in params):
                    missing.append(f"{owner + '.' if owner else ''}{node.name}:{node.lineno}")
            elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                visit(node.body, node.name)

    visit(ast.parse(path.read_text()).body, None)
    return missing


def test_every_public_function_of_the_package_is_annotated():
    root = pathlib.Path(blowfish_te.__file__).parent
    public = [p for p in sorted(root.rglob("*.py"))
              if not any(part.startswith("_") and part != "__init__.py" for part in p.relative_to(root).parts)]
    assert len(public) > 50  # the walk found the package
    missing = {str(p.relative_to(root)): names for p in public if (names := _unannotated(p))}
    assert not missing, f"public functions without annotations: {missing}"
