"""The library's exceptions. Each derives from :class:`BlowfishError`, so ``except BlowfishError``
catches every refusal of the library, and from :class:`ValueError`, so code written against the
standard exception keeps working."""

from __future__ import annotations

__all__ = ["BlowfishError", "BudgetExceededError", "ConstraintError", "ContractError", "CyclicPolicyError", "SpecError", "SuiteError",
           "first_line"]


class BlowfishError(Exception):
    """Base class of the exceptions raised by blowfish_te."""


class CyclicPolicyError(BlowfishError, ValueError):
    """An operation that needs a forest got a policy graph with a cycle."""


class BudgetExceededError(BlowfishError, ValueError):
    """A release would spend more ε than the accountant has left; nothing was run or charged."""


class SpecError(BlowfishError, ValueError):
    """A policy or workload named by a string spec (``"threshold:16"``, ``"prefix"``) that does not
    exist or does not fit the domain; the message lists what is allowed."""


class ContractError(BlowfishError, ValueError):
    """A mechanism that does not keep the plug-in contract (see :func:`blowfish_te.audit.check_mechanism`)."""


class SuiteError(SpecError):
    """A suite file that cannot be run, with the key that is wrong and what is allowed."""


class ConstraintError(BlowfishError, ValueError):
    """Public count constraints that cannot be used as given: not sparse for the policy, too large
    for the exact search of their policy graph, not satisfied by the data, or in the way of a
    parallel composition."""


def first_line(err: BaseException) -> str:
    """The first line of an error's message, or its type's name when it has none: how the command
    line reports an error and the ledger notes why a run ended."""
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__
