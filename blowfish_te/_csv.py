"""CSV cells that a spreadsheet shows as text instead of running them as formulas.

A spreadsheet that opens a CSV file reads a cell starting with ``=``, ``+``, ``-`` or ``@`` (and,
in some, a tab or a carriage return) as a formula, so text taken from a suite file, a policy or a
domain's level names, e.g. ``=HYPERLINK(...)``, would run on the reader's machine. Every CSV
writer of the library passes its rows through :func:`escape_row`: such a text cell is written
after a single quote, which spreadsheets read as "text follows"; numbers, negative ones
included, are written as they are, whether given as numbers or as text. A text cell that starts
with a quote gets one more, so :func:`unescape_cell` reads every written cell back exactly.
"""

from __future__ import annotations

__all__ = ["escape_cell", "escape_row", "is_number", "unescape_cell"]

_QUOTE = "'"
_SIGNS = ("=", "+", "-", "@")  # a formula, unless the whole cell is a number
_ALWAYS = ("\t", "\r", _QUOTE)  # never the start of a number the library writes


def is_number(text: str) -> bool:
    """Whether ``text`` reads as a number (``float`` accepts it: signs, exponents, inf and nan too)."""
    try:
        float(text)
    except ValueError:
        return False
    return True


def escape_cell(value):
    """``value`` as a CSV writer writes it: text starting with ``= + - @``, a tab, a carriage
    return or a quote after a single quote, unless the text is a number (``"-3.5"``); any other
    value unchanged."""
    if not isinstance(value, str):
        return value
    if value.startswith(_ALWAYS) or (value.startswith(_SIGNS) and not is_number(value)):
        return _QUOTE + value
    return value


def escape_row(row):
    """A row (a list of cells, or a dict of them for ``csv.DictWriter``) with every cell escaped."""
    if isinstance(row, dict):
        return {key: escape_cell(value) for key, value in row.items()}
    return [escape_cell(value) for value in row]


def unescape_cell(text):
    """The value :func:`escape_cell` was given, from the text written to the file."""
    return text[1:] if isinstance(text, str) and text.startswith(_QUOTE) else text
