"""MkDocs hooks: the tutorials are executed while the site is built (markdown-exec), and the files
they write (records, ledgers, figures) go to a scratch folder, never into the repository."""

from __future__ import annotations

import os
import shutil
import tempfile

_state: dict[str, str] = {}


def on_pre_build(config, **kwargs) -> None:
    _state["home"] = os.getcwd()
    _state["scratch"] = tempfile.mkdtemp(prefix="blowfish-te-docs-")
    os.chdir(_state["scratch"])


def on_post_build(config, **kwargs) -> None:
    os.chdir(_state.pop("home"))
    shutil.rmtree(_state.pop("scratch"), ignore_errors=True)


def on_build_error(error, **kwargs) -> None:
    if "home" in _state:
        on_post_build(None)
