"""The evaluation harness: declarative suites (top-level ``workloads/*.toml``), a resumable runner
writing tidy results, summaries with confidence intervals, and plots (DPBench, Hay et al., SIGMOD 2016)."""

from .runner import COLUMNS, Cell, cells, read_rows, run_suite
from .suite import SUITES_DIR, MechanismSpec, Suite, SuiteError, load_suite, parse_suite
from .summary import markdown_table, summarize

__all__ = [
    "COLUMNS", "Cell", "MechanismSpec", "SUITES_DIR", "Suite", "SuiteError", "cells", "load_suite",
    "markdown_table", "parse_suite", "read_rows", "run_suite", "summarize",
]
