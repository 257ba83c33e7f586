"""From records to histograms: an explicit domain, every record accounted for.

>>> from blowfish_te import io
>>> result = io.histogram({"age": [3, 5, 5, 120]}, io.IntegerRange("age", 0, 99), outside="clamp", engine="memory")
>>> result.counts[[3, 5, 99]].tolist(), result.summary()
([1, 2, 1], '4 record(s): 3 counted, 1 clamped to the domain (0 below, 1 above)')
"""

from .domain import Bins, Grid, IntegerRange, Levels
from .records import ENGINES, HistogramResult, MarginalCountsResult, histogram, marginal_counts
from .sources import RecordError, SqlQuery, csv_lines, histogram_shape, read_histogram

__all__ = ["ENGINES", "Bins", "Grid", "HistogramResult", "IntegerRange", "Levels", "MarginalCountsResult", "RecordError", "SqlQuery",
           "csv_lines", "histogram", "histogram_shape", "marginal_counts", "read_histogram"]
