"""Records to histograms: exact counts against an independent reading with pandas, every record
accounted for, and the DuckDB, Spark and numpy engines agreeing."""

import functools
import json
import math
import shutil
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from blowfish_te import io
from blowfish_te.cli import main

pytestmark = pytest.mark.core

pd = pytest.importorskip("pandas")
pa = pytest.importorskip("pyarrow")

DIRTY = "age,city\n3,a\n\n5,b\n,c\n x ,d\n7.5,a\n120,b\n-4,c\n 42 ,d\nNULL,a\ninf,b\nnan,c\n99,a\n0,b\n"
DOMAIN = io.IntegerRange("age", 0, 99)


def _classify(text, lower=0, upper=99):
    """The documented rules, one value at a time in plain Python: the oracle."""
    text = "" if text is None else str(text).strip()
    if text == "":
        return "missing"
    try:
        v = float(text)
    except ValueError:
        return "invalid"
    if math.isnan(v):
        return "missing"
    if math.isinf(v) or v != math.floor(v):
        return "invalid"
    return "below" if v < lower else "above" if v > upper else int(v)


def _pandas_reference(path, column="age"):
    frame = pd.read_csv(path, skip_blank_lines=False, dtype=str, keep_default_na=False, na_values=[""])
    classes = [_classify(None if isinstance(v, float) else v) for v in frame[column].tolist()]
    return classes


@pytest.fixture
def dirty(tmp_path):
    path = tmp_path / "dirty.csv"
    path.write_text(DIRTY)
    return path


def test_dirty_csv_every_record_is_counted_or_refused_with_its_reason(dirty):
    classes = _pandas_reference(dirty)
    assert len(classes) == 14  # pandas keeps the blank line as a record
    with pytest.raises(io.RecordError) as err:
        io.histogram(str(dirty), DOMAIN)
    message = str(err.value)
    missing, invalid = classes.count("missing"), classes.count("invalid")
    assert f"{len(classes)} record(s) read" in message
    assert f"{missing} missing" in message and f"{invalid} not a number" in message
    assert f"{classes.count('below')} below" in message and f"{classes.count('above')} above" in message


def test_clamping_moves_numbers_to_the_edges_and_reports_them(tmp_path):
    path = tmp_path / "ages.csv"
    values = [3, 5, 120, -4, 42, 99, 0, 5, 1000]
    path.write_text("age\n" + "\n".join(map(str, values)) + "\n")
    result = io.histogram(str(path), DOMAIN, outside="clamp")
    expected = np.bincount(np.clip(values, 0, 99), minlength=100)
    assert np.array_equal(result.counts, expected)
    assert (result.rows, result.counted, result.below, result.above) == (9, 6, 1, 2)
    with pytest.raises(io.RecordError, match="3 above|1 below"):
        io.histogram(str(path), DOMAIN)


def test_blank_lines_are_missing_records_in_one_and_many_column_files(tmp_path):
    one = tmp_path / "one.csv"
    one.write_text("age\n3\n\n5\n")
    many = tmp_path / "many.csv"
    many.write_text("age,b\n3,1\n\n5,2\n\n")
    for path, rows in ((one, 3), (many, 4)):
        assert len(_pandas_reference(path)) == rows
        with pytest.raises(io.RecordError, match=rf"{rows} record\(s\) read.*{rows - 2} missing"):
            io.histogram(str(path), DOMAIN)


@pytest.mark.parametrize("text, expected", [
    (b"age\n3\n\n5\n", (3, 1)), (b"age\n3\n\n\n5\n", (4, 2)), (b"age\r\n3\r\n\r\n5\r\n", (3, 1)), (b"\n\nage\n3\n", (1, 0)),
    (b"age\n3\n", (1, 0)), (b"age\n3\n\n", (2, 1)), (b"age\n3\n5", (2, 0)), (b"age", (0, 0)), (b"", (0, 0)),
])
def test_csv_lines_match_pandas_whatever_the_block_size(tmp_path, text, expected):
    path = tmp_path / "b.csv"
    path.write_bytes(text)
    assert all(io.csv_lines(str(path), chunk=c) == expected for c in (1, 2, 3, 1 << 20))
    assert io.csv_lines(str(path), blanks=False) == (expected[0], None)
    if text.strip() and not text.startswith(b"\n"):  # pandas takes a leading blank line for the header
        assert len(pd.read_csv(path, skip_blank_lines=False)) == expected[0]


def _clean(n=5000, seed=0):
    gen = np.random.default_rng(seed)
    return pd.DataFrame({"age": gen.integers(0, 100, n), "city": gen.choice(list("abcd"), n), "income": gen.uniform(0, 1e5, n)})


def test_every_source_kind_gives_the_counts_pandas_gives(tmp_path):
    duckdb = pytest.importorskip("duckdb")
    frame = _clean()
    expected = frame["age"].value_counts().reindex(range(100), fill_value=0).to_numpy()
    frame.to_csv(tmp_path / "r.csv", index=False)
    frame.to_parquet(tmp_path / "r.parquet")
    import pyarrow.feather as feather

    feather.write_feather(pa.Table.from_pandas(frame), tmp_path / "r.arrow")
    for i, rows in enumerate(np.array_split(np.arange(len(frame)), 3)):
        frame.iloc[rows].to_csv(tmp_path / f"part{i}.csv", index=False)
    con = duckdb.connect()
    sources = [str(tmp_path / "r.csv"), tmp_path / "r.parquet", str(tmp_path / "r.arrow"), str(tmp_path / "part*.csv"),
               [tmp_path / f"part{i}.csv" for i in range(3)], frame, pa.Table.from_pandas(frame),
               {"age": frame["age"].to_numpy()}, con.from_df(frame)]
    polars = pytest.importorskip("polars")
    sources.append(polars.from_pandas(frame))
    for source in sources:
        result = io.histogram(source, DOMAIN, connection=con)
        assert np.array_equal(result.counts, expected), type(source)
        assert result.rows == result.counted == len(frame)
    con.register("people", frame)
    assert np.array_equal(io.histogram(sql="SELECT age FROM people WHERE city = 'a'", domain=DOMAIN, connection=con).counts,
                          frame.loc[frame.city == "a", "age"].value_counts().reindex(range(100), fill_value=0).to_numpy())


def test_grids_of_integer_ranges_bins_and_levels_match_numpy(tmp_path):
    frame = _clean(3000, seed=1)
    edges = [0, 1e4, 2.5e4, 5e4, 1e5]
    domain = [io.IntegerRange("age", 0, 99, width=10), io.Levels("city", "abcd"), io.Bins("income", edges)]
    expected, _ = np.histogramdd(
        np.stack([frame.age // 10, frame.city.map("abcd".index), frame.income], axis=1),
        bins=[np.arange(11) - 0.5, np.arange(5) - 0.5, edges],
    )
    path = tmp_path / "g.parquet"
    frame.to_parquet(path)
    for source, engine in ((path, "duckdb"), (frame, "memory")):
        result = io.histogram(source, domain, engine=engine)
        assert result.counts.shape == (10, 4, 4) and np.array_equal(result.counts, expected), engine
    assert io.Grid(*domain).label([2, 1, 3], [3, 1, 3]) == "age=20..39 & city=b & income in [50000, 100000]"
    assert io.IntegerRange("age", 0, 99, 7).size == 15 and io.IntegerRange("age", 0, 99, 7).label(14, 14) == "age=98..99"


values = st.one_of(st.integers(-20, 120), st.sampled_from(["", " ", "x", "3.5", " 7 ", "nan", "inf", "-inf", "1e1", None]),
                   st.floats(-50, 150), st.just(math.nan))


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(st.lists(values, min_size=1, max_size=40), st.sampled_from(["error", "clamp"]))
def test_duckdb_and_numpy_engines_agree_on_any_values(items, outside):
    text = np.array([None if v is None else str(v) for v in items], dtype=object)
    numbers = np.array([v for v in items if isinstance(v, (int, float))], dtype=np.float64)
    domain = io.IntegerRange("v", 0, 99, width=3)
    for column in (text, numbers):
        outcomes = []
        for engine in ("duckdb", "memory"):
            try:
                r = io.histogram(pd.DataFrame({"v": column}), domain, outside=outside, engine=engine)
                outcomes.append((r.counts.tolist(), r.rows, r.below, r.above))
            except io.RecordError as err:
                outcomes.append(str(err).split(" (e.g.")[0])
        assert outcomes[0] == outcomes[1]
        classes = [_classify(v) for v in column]
        if isinstance(outcomes[0], tuple):  # counted: every record, and none that the rules refuse
            assert outcomes[0][1] == len(column) == sum(outcomes[0][0])
            assert not {"missing", "invalid"} & set(classes)
            assert outside == "clamp" or not {"below", "above"} & set(classes)
        else:
            assert f"{len(column)} record(s) read" in outcomes[0]


@pytest.mark.slow
def test_grouping_raw_values_first_changes_no_count_and_no_refusal(dirty, monkeypatch):
    from blowfish_te.io import engines

    frame = _clean(3000, seed=4)
    frame.loc[::7, "age"] = -1
    text = frame.astype(str)
    domains = [DOMAIN, [io.IntegerRange("age", 0, 99, width=5), io.Levels("city", "abcd")], io.Bins("income", [0, 1e4, 5e4, 1e5])]
    sources = [(str(dirty), DOMAIN), *[(f, d) for f in (frame, text) for d in domains]]

    def outcomes():
        found = []
        for source, domain in sources:
            for outside in ("error", "clamp"):
                try:
                    r = io.histogram(source, domain, outside=outside, engine="duckdb")
                    found.append((r.counts.tolist(), r.rows, r.below, r.above))
                except io.RecordError as err:
                    found.append(str(err))
        return found

    assert engines._few_values(io.Grid(DOMAIN)) and not engines._few_values(io.Grid(domains[2]))
    grouped = outcomes()
    monkeypatch.setattr(engines, "_DISTINCT_FIRST", 0)  # every record binned on its own
    assert outcomes() == grouped
    assert sum(isinstance(o, str) for o in grouped) >= 4 and sum(isinstance(o, tuple) for o in grouped) >= 4


@pytest.mark.parametrize("call, error, message", [
    (lambda p: io.histogram(p, io.IntegerRange("height", 0, 9)), ValueError, "no column 'height'; columns: age, city"),
    (lambda p: io.histogram(p, DOMAIN, engine="excel"), ValueError, "engine must be one of"),
    (lambda p: io.histogram(p, DOMAIN, outside="drop"), ValueError, "outside must be one of"),
    (lambda p: io.histogram(p, (0, 99)), TypeError, "never read from the data"),
    (lambda p: io.histogram(str(p) + "*.nothing", DOMAIN), ValueError, "no file matches"),
    (lambda p: io.histogram(p.with_suffix(".xlsx"), DOMAIN), ValueError, "records must be CSV"),
    (lambda p: io.IntegerRange("age", 9, 0), ValueError, "upper .0. must be >= lower .9."),
    (lambda p: io.IntegerRange("age", 0, 9.5), TypeError, "upper must be an integer"),
    (lambda p: io.Bins("age", [0, 5, 5]), ValueError, "strictly increasing"),
    (lambda p: io.Levels("city", ["a", "a"]), ValueError, "distinct"),
    (lambda p: io.Grid(DOMAIN, io.IntegerRange("age", 0, 5)), ValueError, "one axis only"),
])
def test_bad_arguments_name_what_is_wrong(dirty, call, error, message):
    if "xlsx" in message or "records must" in message:
        dirty.with_suffix(".xlsx").write_text("x")
    with pytest.raises(error, match=message):
        call(dirty)


# -- Spark ------------------------------------------------------------------------------------


def _java() -> bool:
    java = shutil.which("java")
    return java is not None and subprocess.run([java, "-version"], capture_output=True).returncode == 0


@pytest.fixture(scope="module")
def spark():
    pytest.importorskip("pyspark", reason="the Spark engine needs the [spark] extra")
    if not _java():
        pytest.skip("the Spark engine needs a Java runtime (java on PATH); none found")
    from pyspark.sql import SparkSession

    session = (SparkSession.builder.master("local[2]").appName("blowfish_te-tests").config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.mark.slow
def test_spark_duckdb_and_numpy_give_the_same_histogram_and_the_same_refusals(spark, tmp_path, dirty):
    frame = _clean(4000, seed=2)
    path = tmp_path / "s.csv"
    frame.to_csv(path, index=False)
    frame.to_parquet(tmp_path / "s.parquet")
    domain = [io.IntegerRange("age", 0, 99, width=5), io.Levels("city", "abcd")]
    counts = io.histogram(frame, domain, engine="memory").counts
    for source, engine in ((str(path), "spark"), (str(tmp_path / "s.parquet"), "spark"), (spark.read.parquet(str(tmp_path / "s.parquet")), None),
                           (str(path), "duckdb")):
        result = io.histogram(source, domain, engine=engine, connection=spark if engine == "spark" else None)
        assert np.array_equal(result.counts, counts) and result.rows == 4000, (source, engine)
    reasons = []
    for engine in ("spark", "duckdb"):
        for outside in ("error", "clamp"):
            with pytest.raises(io.RecordError) as err:
                io.histogram(str(dirty), DOMAIN, engine=engine, outside=outside, connection=spark if engine == "spark" else None)
            reasons.append(str(err.value).split(" (e.g.")[0])
    assert reasons[0] == reasons[2] and reasons[1] == reasons[3] and "14 record(s) read" in reasons[0]
    spark_clamp = str(pytest.raises(io.RecordError, io.histogram, str(dirty), DOMAIN, engine="spark", outside="clamp",
                                    connection=spark).value)
    assert "'130'" not in spark_clamp.split(" (e.g.")[1]  # examples of refused values only


def test_examples_name_only_the_refused_values(tmp_path):
    path = tmp_path / "ages.csv"
    path.write_text("age\n34\n\n130\nabc\n")
    age = io.IntegerRange("age", 0, 99)
    for source, engine in ((str(path), "duckdb"), ({"age": ["34", None, "130", "abc"]}, "memory")):
        with pytest.raises(io.RecordError) as refused:
            io.histogram(source, age, engine=engine)
        assert "'130'" in str(refused.value) and "'abc'" in str(refused.value)
        with pytest.raises(io.RecordError) as clamped:  # 130 is clamped, so it is no example of a refusal
            io.histogram(source, age, engine=engine, outside="clamp")
        examples = str(clamped.value).split(" (e.g.")[1]
        assert "'abc'" in examples and "'130'" not in examples, engine


# -- the command line -------------------------------------------------------------------------


def _run(*args):
    return CliRunner().invoke(main, ["run", *map(str, args)])


def test_run_refuses_a_blank_line_and_counts_every_record(tmp_path):
    path = tmp_path / "ages.csv"
    path.write_text("age\n3\n\n5\n")
    result = _run(path, "--column", "age", "--lower", 0, "--upper", 9, "--epsilon", 1, "--seed", 0)
    assert result.exit_code == 1 and "3 record(s) read" in result.output and "1 missing" in result.output
    path.write_text("age\n3\n4\n5\n120\n")
    result = _run(path, "--column", "age", "--lower", 0, "--upper", 9, "--epsilon", 1, "--seed", 0, "--outside", "clamp",
                  "--workload", "prefix")
    assert result.exit_code == 0, result.output
    assert "4 record(s): 3 counted, 1 clamped" in result.stderr and "component total" in result.stderr
    out = json.loads(result.stdout)
    assert out["queries"][:2] == ["age=0", "age=0..1"] and out["queries"][-1] == "age=0..9"
    assert out["component_totals"] == {"9": 4} and out["seed"] == 0 and out["version"] and out["secure"] is False


def test_run_checks_the_output_before_any_noise_and_writes_labelled_csv(tmp_path, monkeypatch):
    np.save(tmp_path / "x.npy", np.arange(16).reshape(4, 4))
    import blowfish_te.cli as cli

    def no_noise(*args, **kwargs):
        raise AssertionError("noise drawn before the output was checked")

    with monkeypatch.context() as m:
        m.setattr(cli, "answer", no_noise)
        for bad in (tmp_path / "missing" / "out.csv", tmp_path):
            result = _run(tmp_path / "x.npy", "--epsilon", 1, "--output", bad)
            assert result.exit_code == 1 and "checked before any noise is drawn" in result.output
    out = tmp_path / "out.csv"
    result = _run(tmp_path / "x.npy", "--epsilon", 1, "--policy", "grid:1", "--tree", "bfs", "--workload", "random_rects:5",
                  "--format", "csv", "--output", out)
    assert result.exit_code == 0, result.output
    rows = out.read_text().splitlines()
    assert rows[0].startswith("index,query,answer,version,") and len(rows) == 6
    assert "fresh entropy" in rows[1] and ",True," in rows[1] and " x " in rows[1]


def test_run_exits_130_on_an_interrupt(tmp_path, monkeypatch):
    np.save(tmp_path / "x.npy", np.arange(8))
    from blowfish_te.routes import Plan

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(Plan, "release_checked", interrupted)
    assert _run(tmp_path / "x.npy", "--epsilon", 1, "--seed", 0).exit_code == 130


def test_a_path_is_always_a_path_and_sql_runs_only_when_asked(tmp_path):
    """A file whose name reads like SQL is read as a file; a query runs only through sql=."""
    path = tmp_path / "from 2020.csv"
    path.write_text("age\n3\n5\n")
    assert io.histogram(str(path), DOMAIN).counts[[3, 5]].tolist() == [1, 1]
    with pytest.raises(ValueError, match="no such file"):
        io.histogram("select 3 as age", DOMAIN)
    assert io.histogram(sql="select 3 as age union all select 4", domain=DOMAIN).counts[[3, 4]].tolist() == [1, 1]
    with pytest.raises(TypeError, match="exactly one"):
        io.histogram(str(path), DOMAIN, sql="select 3 as age")
    with pytest.raises(TypeError, match="exactly one"):
        io.histogram(domain=DOMAIN)


def test_repeated_column_names_are_refused_by_every_source_and_engine(tmp_path):
    path = tmp_path / "twice.csv"
    path.write_text("age,age\n3,50\n5,60\n")
    frame = pd.DataFrame([[3, 50], [5, 60]], columns=["age", "age"])
    table = pa.table([[3, 5], [50, 60]], names=["age", "age"])
    for source, engines in ((str(path), ("duckdb",)), (frame, ("duckdb", "memory")), (table, ("duckdb", "memory"))):
        for engine in engines:
            with pytest.raises(io.RecordError, match="'age' appear more than once"):
                io.histogram(source, DOMAIN, engine=engine)


def test_record_errors_are_library_errors():
    from blowfish_te.errors import BlowfishError

    with pytest.raises(BlowfishError):
        io.histogram({"age": [1.0, float("nan")]}, DOMAIN, engine="memory")


def test_nan_is_missing_in_every_source(tmp_path):
    """One rule for NaN: a float NaN from Parquet (whose statistics leave NaN out), pandas or
    Arrow, and the text 'NaN' in a CSV, are all missing."""
    import pyarrow.parquet as pq

    values = [3.0, float("nan"), 5.0]
    pq.write_table(pa.table({"age": values}), tmp_path / "nan.parquet")
    (tmp_path / "nan.csv").write_text("age\n3\nNaN\n5\n")
    sources = [(str(tmp_path / "nan.parquet"), "duckdb"), (str(tmp_path / "nan.csv"), "duckdb"),
               (pd.DataFrame({"age": values}), "duckdb"), (pd.DataFrame({"age": values}), "memory"),
               (pa.table({"age": values}), "duckdb"), (pa.table({"age": values}), "memory")]
    for source, engine in sources:
        with pytest.raises(io.RecordError, match="1 missing"):
            io.histogram(source, DOMAIN, engine=engine)


def test_columns_typed_as_exact_numbers_are_binned_without_their_text(tmp_path):
    """Integer, decimal and boolean columns hold no NaN: DuckDB bins them without the text of
    every value (what made counting 3 times slower than a plain GROUP BY), with the same account
    of every record as numpy: a null is missing (a nullable boolean column too), a fraction is
    invalid for an integer range."""
    import decimal

    import duckdb
    import pyarrow.parquet as pq

    from blowfish_te.io import engines

    columns = {"int": pa.array([3, None, 120, -4, 42], pa.int64()),
               "small": pa.array([3, 5, 7, 9, 11], pa.int16()),
               "decimal": pa.array([decimal.Decimal("3"), decimal.Decimal("3.5"), None, decimal.Decimal("99"), decimal.Decimal("0")],
                                   pa.decimal128(5, 1)),
               "bool": pa.array([True, False, None, True, True])}
    table = pa.table(columns)
    pq.write_table(table, tmp_path / "typed.parquet")
    con = duckdb.connect()
    kinds = engines._kinds_duckdb(con.sql(f"SELECT * FROM read_parquet('{tmp_path / 'typed.parquet'}')"))
    assert kinds == {"int": "exact", "small": "exact", "decimal": "exact", "bool": "exact"}
    for name in columns:
        domain = io.IntegerRange(name, 0, 99, width=3)
        parse, _, _ = domain.sql(io.domain.DUCKDB, kinds[name], "a0")
        assert "VARCHAR" not in " ".join(parse)
        for outside in ("error", "clamp"):
            outcomes = []
            for source, engine in ((str(tmp_path / "typed.parquet"), "duckdb"), (table, "duckdb"), (table.to_pandas(), "memory")):
                try:
                    r = io.histogram(source, domain, outside=outside, engine=engine)
                    outcomes.append((r.counts.tolist(), r.rows, r.below, r.above))
                except io.RecordError as err:
                    outcomes.append(str(err).split(" (e.g.")[0])
            assert outcomes[0] == outcomes[1] == outcomes[2], (name, outside, outcomes)
    # the float kind still looks for NaN in the text (Parquet statistics leave NaN out)
    assert "VARCHAR" in " ".join(io.IntegerRange("v", 0, 9).sql(io.domain.DUCKDB, "float", "a0")[0])


def test_a_histogram_file_follows_the_records_rule(tmp_path):
    """Byte-order mark removed; a blank line, an empty field or NaN is a missing count, refused
    with its line."""
    cases = {"bom": "\ufeff1,2\n3,4\n", "blank": "1\n\n2\n", "empty": "1,\n2,3\n", "nan": "1\nNaN\n", "text": "1\nNULL\n"}
    for name, text in cases.items():
        (tmp_path / f"{name}.csv").write_text(text, encoding="utf-8")
    assert io.read_histogram(tmp_path / "bom.csv").tolist() == [[1, 2], [3, 4]]
    for name, message in (("blank", "line 2 is blank"), ("empty", "line 1 has a missing count in field 2"),
                          ("nan", "line 2 has a missing count"), ("text", "line 2 holds a field that is not a number")):
        with pytest.raises(io.RecordError, match=message):
            io.read_histogram(tmp_path / f"{name}.csv")
    records = tmp_path / "records.csv"
    records.write_text("\ufeffage\n3\n\n5\n", encoding="utf-8")  # the same BOM and blank line in records
    with pytest.raises(io.RecordError, match="1 missing"):
        io.histogram(str(records), DOMAIN)


def test_an_engine_error_in_the_cli_is_one_line(tmp_path):
    path = tmp_path / "ragged.csv"
    path.write_text("age\n1\n2,3\n4\n")
    result = CliRunner().invoke(main, ["run", str(path), "--column", "age", "--lower", "0", "--upper", "9",
                                       "--policy", "line", "--epsilon", "1", "--seed", "0"])
    assert result.exit_code == 1
    assert result.stderr.startswith("plan:\n")  # planned from the domain before the engine read a record
    assert result.stderr.splitlines()[-1].startswith("Error: ") and "Traceback" not in result.output
    assert isinstance(result.exception, SystemExit)


def test_a_dict_of_columns_needs_no_pyarrow(monkeypatch):
    """On a plain install (no pyarrow) a dict is counted in numpy, with the same rules; DuckDB,
    asked for explicitly, says what to install."""
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow now raises ImportError
    monkeypatch.setitem(sys.modules, "pyarrow.dataset", None)
    result = io.histogram({"age": [34, 35, 35, 71]}, io.IntegerRange("age", 0, 99))
    assert result.engine == "memory" and result.counts[[34, 35, 71]].tolist() == [1, 2, 1] and result.counted == 4
    with pytest.raises(io.RecordError, match="missing"):
        io.histogram({"age": [34.0, float("nan")]}, io.IntegerRange("age", 0, 99))
    with pytest.raises(ImportError, match=r"through pyarrow: pip install pyarrow.*engine='memory'"):
        io.histogram({"age": [34]}, io.IntegerRange("age", 0, 99), engine="duckdb")


def test_the_memory_engine_reads_each_distinct_text_once_and_counts_rows_by_key(monkeypatch):
    """Levels and text numbers are parsed once per distinct value, and rows are counted through
    one integer key per row where the keys fit, else row by row: the same counts either way."""
    from blowfish_te.io import domain, engines

    calls = []
    text = domain._text
    monkeypatch.setattr(domain, "_text", lambda value: calls.append(value) or text(value))
    values = np.array(["a", " b", "b", "a", "c", ""] * 500, dtype=object)
    ages = np.array([" 3", "4", "3", "6", "5", "x"] * 500)
    grid = [io.Levels("city", "abc"), io.IntegerRange("age", 0, 9)]
    counts = io.histogram({"city": values[values != ""], "age": ages[values != ""]}, grid, engine="memory")
    with pytest.raises(io.RecordError) as refused:
        io.histogram({"city": values, "age": ages}, grid, engine="memory")
    assert len(calls) <= 3 * 12  # distinct values only (at most 6 per column and call), never one per record
    assert "500 missing" in str(refused.value) and "500 not a number" in str(refused.value)
    assert counts.counts.sum() == 2500 and counts.counts[0, 3] == counts.counts[1, 4] == counts.counts[1, 3] == 500
    rng = np.random.default_rng(0)
    columns = [rng.integers(0, n, 3000) for n in (7, 3, 11)]
    keyed = engines._unique_rows(columns)
    rows, counts = np.unique(np.stack(columns, axis=1), axis=0, return_counts=True)
    assert np.array_equal(keyed[0], rows) and np.array_equal(keyed[1], counts)
    huge = [np.array([0, 2**40, 0]), np.array([2**40, 1, 2**40])]  # keys past int64: row by row
    rows, counts = engines._unique_rows(huge)
    assert rows.tolist() == [[0, 2**40], [2**40, 1]] and counts.tolist() == [2, 1]


@pytest.mark.slow
def test_a_spark_session_started_by_run_keeps_spark_s_log_to_warnings(tmp_path):
    """`run --engine spark` in a fresh process: Spark's own log shows warnings at most, no
    progress bars, no notes on its log profile."""
    pytest.importorskip("pyspark", reason="the Spark engine needs the [spark] extra")
    if not _java():
        pytest.skip("the Spark engine needs a Java runtime (java on PATH); none found")
    assert io.engines.SPARK_LOG_CONFIG.is_file()
    (tmp_path / "ages.csv").write_text("age\n3\n5\n5\n")
    script = "import sys; from blowfish_te.console import entry; sys.argv = ['blowfish-te'] + sys.argv[1:]; entry()"
    done = subprocess.run([sys.executable, "-c", script, "run", str(tmp_path / "ages.csv"), "--column", "age", "--lower", "0",
                           "--upper", "9", "--epsilon", "1", "--seed", "0", "--engine", "spark", "--quiet"],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "3 record(s): 3 counted" in done.stderr
    spark_lines = [line for line in done.stderr.splitlines() if not line.startswith(("records:", "note:", "WARNING: Using incubator"))]
    assert all(line.startswith("spark WARN") or line.startswith("spark ERROR") for line in spark_lines), spark_lines
    assert "[Stage" not in done.stderr and "log4j profile" not in done.stderr and "FutureWarning" not in done.stderr


# -- marginals counted straight from records ------------------------------------------------------

SMALL_CENSUS = {"a": 4, "b": 3, "c": 5}


def _census_with_outliers(n=3000):
    from blowfish_te import datasets

    records = {k: v.astype(float) for k, v in datasets.census_records(n, rng=5, attributes=SMALL_CENSUS).items()}
    records["c"][[3, 9]] = [7.0, -2.0]  # one above, one below the domain
    return records


@pytest.mark.slow
def test_marginal_counts_are_the_histograms_marginals_in_every_engine(spark, tmp_path):
    from blowfish_te import datasets

    records = _census_with_outliers()
    domain = datasets.census_domain(SMALL_CENSUS)
    full = io.histogram(records, domain, outside="clamp", engine="memory").counts
    pd.DataFrame(records).to_parquet(tmp_path / "r.parquet")
    wanted = [(0, 2), ("b",), (), (1, 2)]
    for source, engine in ((records, "memory"), (records, "duckdb"), (str(tmp_path / "r.parquet"), "duckdb"),
                           (str(tmp_path / "r.parquet"), "spark")):
        result = io.marginal_counts(source, domain, wanted, outside="clamp", engine=engine,
                                    connection=spark if engine == "spark" else None)
        assert (result.rows, result.counted, result.below, result.above) == (3000, 2998, 1, 1), engine
        assert result.counts.subsets == ((0, 2), (1,), (), (1, 2))
        for subset in result.counts.subsets:
            others = tuple(a for a in range(3) if a not in subset)
            assert np.array_equal(result.counts.table(subset), full.sum(axis=others)), (engine, subset)
        assert "2 clamped" in result.summary() and "4 marginal(s)" in result.summary()
        # marginals that leave some attribute out of every table, and no records at all
        fewer = io.marginal_counts(source, domain, [(1,), ()], outside="clamp", engine=engine,
                                   connection=spark if engine == "spark" else None)
        assert np.array_equal(fewer.counts.table((1,)), full.sum(axis=(0, 2))) and fewer.counts.table(()) == 3000
        with pytest.raises(io.RecordError, match="no marginal was counted: column 'c': 1 below the domain.*1 above"):
            io.marginal_counts(source, domain, wanted, engine=engine, connection=spark if engine == "spark" else None)


def test_marginal_counts_refuse_what_the_histogram_refuses(dirty):
    for outside in ("error", "clamp"):
        with pytest.raises(io.RecordError) as marg:
            io.marginal_counts(str(dirty), DOMAIN, [(0,)], outside=outside)
        with pytest.raises(io.RecordError) as hist:
            io.histogram(str(dirty), DOMAIN, outside=outside)
        assert str(marg.value).replace("no marginal was counted", "X") == str(hist.value).replace("no histogram was built", "X")


#: Fields a CSV reader might parse differently from the text rules: blanks, whitespace, signs,
#: exponents, separators, other digits, NaN and infinities, huge and tiny numbers.
TRICKY_FIELDS = ["", " ", "\t", " 5", "5 ", "\t5", "+5", "-0", "1e1", "1E1", "1.", ".5", "5.0", "0005", "1_0", "1__0",
                 "_1", "0x10", "0b1", "1,5", "1 0", "- 5", "1e", "e3", "$5", "5%", "1d", "true", "NULL", "null", "abc",
                 "\u0665", "\u00a05", "nan", "NaN", "-nan", "inf", "-Infinity", "1e400", "1e-400", "9007199254740993",
                 "7.5", "120", "-4", "99", "+.5", "."]


def _outcome(count, *args, **kwargs):
    try:
        r = count(*args, **kwargs)
    except io.RecordError as err:
        return str(err)
    held = r.counts
    counts = [held.table(subset).tolist() for subset in held.subsets] if hasattr(held, "subsets") else held.tolist()
    return counts, r.rows, r.counted, r.below, r.above


@pytest.mark.slow
def test_the_typed_csv_read_counts_and_refuses_as_the_text_rules_do(tmp_path, monkeypatch):
    pytest.importorskip("duckdb")
    from blowfish_te.io import engines

    domain = [io.IntegerRange("age", 0, 99, width=10), io.Bins("x", [0, 2.5, 10])]
    paths = []
    for i, field in enumerate(TRICKY_FIELDS):
        path = tmp_path / f"t{i}.csv"
        quoted = '"' + field.replace('"', '""') + '"'
        path.write_text(f"age,x\n3,1\n{quoted},{quoted}\n55,7\n", encoding="utf-8")
        paths.append(path)

    def outcomes():
        return [_outcome(count, str(path), domain, outside=outside)
                for path in paths for outside in ("error", "clamp")
                for count in (io.histogram, functools.partial(io.marginal_counts, marginals=[(0,), (0, 1)]))]

    typed = outcomes()
    # the marginals' per-record status key (its cheap in-domain test first) refuses what the
    # histogram's per-axis statuses refuse, field by field
    for histogram, marginals in zip(typed[::2], typed[1::2]):
        if isinstance(histogram, str):
            assert marginals.replace("no marginal was counted", "X") == histogram.replace("no histogram was built", "X")
        else:
            assert marginals[1:] == histogram[1:]
    monkeypatch.setattr(engines, "_is_csv", lambda source: False)  # every field parsed from its text
    assert typed == outcomes()
    assert sum(isinstance(o, tuple) for o in typed) >= 20 and sum(isinstance(o, str) for o in typed) >= 60


def test_clean_csv_columns_are_parsed_by_the_reader_and_a_refused_field_falls_back_to_text(tmp_path, monkeypatch):
    pytest.importorskip("duckdb")
    from blowfish_te.io import engines

    reads = []
    records = engines._duckdb_records
    monkeypatch.setattr(engines, "_duckdb_records", lambda *a: reads.append(tuple(a[3]) if len(a) > 3 else ()) or records(*a))
    domain = [io.IntegerRange("age", 0, 99), io.Levels("city", "abcd")]
    (tmp_path / "clean.csv").write_text("age,city\n3,a\n 5 ,b\n3,c\n")
    (tmp_path / "blank.csv").write_text("age,city\n3,a\n 5 ,b\n,c\n")
    (tmp_path / "dirty.csv").write_text("age,city\n3,a\nabc,b\n,c\n")
    counted = io.marginal_counts(str(tmp_path / "clean.csv"), domain, [(0, 1)])
    assert counted.counts.table((0, 1))[[3, 5, 3], [0, 1, 2]].tolist() == [1, 1, 1] and counted.counted == 3
    assert reads == [("age",)]  # read once, the age parsed by the reader (a Levels column stays text)
    reads.clear()
    with pytest.raises(io.RecordError, match=r"1 missing \(NULL, NaN or blank\)"):
        io.marginal_counts(str(tmp_path / "blank.csv"), domain, [(0, 1)])
    assert reads == [("age",), ()]  # counted from the reader's numbers; the example read from the text
    reads.clear()
    with pytest.raises(io.RecordError, match=r"1 not a number in the domain .* \(e\.g\. 'abc', None\)"):
        io.marginal_counts(str(tmp_path / "dirty.csv"), domain, [(0, 1)])
    assert reads == [("age",), ()]  # the reader refused 'abc': counted again over the text


@pytest.mark.parametrize("call, error, message", [
    (lambda d: io.marginal_counts({"a": [1]}, d, None), TypeError, "list of tuples of axes"),
    (lambda d: io.marginal_counts({"a": [1]}, d, []), ValueError, "at least one marginal"),
    (lambda d: io.marginal_counts({"a": [1]}, d, [("z",)]), ValueError, "no axis named 'z'"),
    (lambda d: io.marginal_counts({"a": [1]}, d, [(3,)]), ValueError, "neither an axis index"),
    (lambda d: io.marginal_counts({"a": [1]}, d, [(0, "a")]), ValueError, "repeats an axis"),
    (lambda d: io.marginal_counts({"a": [1]}, d, [(0,)], outside="drop"), ValueError, "outside must be one of"),
])
def test_marginal_counts_arguments_name_what_is_wrong(call, error, message):
    with pytest.raises(error, match=message):
        call([io.IntegerRange("a", 0, 3), io.IntegerRange("b", 0, 3)])


def test_cells_of_inverts_the_labels_of_every_axis():
    from blowfish_te import io as bio

    for axis in (bio.IntegerRange("age", -3, 9, 1), bio.IntegerRange("age", -3, 9, 4), bio.Bins("x", [0, 0.5, 2, 10]),
                 bio.Levels("c", ["b", "a", "c"])):
        for a in range(axis.size):
            for b in range(a, axis.size):
                label = axis.label(a, b)
                if isinstance(axis, bio.IntegerRange):
                    values = label.split("=")[1].split("..")
                    lo, hi = values[0], values[-1]
                elif isinstance(axis, bio.Bins):
                    lo, hi = label.split("[")[1].rstrip(")]").split(", ")
                else:
                    lo, hi = (label.split("=")[1],) * 2 if a == b else label.split(" in ")[1].split("..")
                assert axis.cells_of(lo, hi) == (a, b), (axis, label)
    ages = bio.IntegerRange("age", -3, 9, 4)  # cells -3..0, 1..4, 5..8, 9
    with pytest.raises(ValueError, match="cuts through a cell of 4 values"):
        ages.cells_of("-2", "4")
    with pytest.raises(ValueError, match="must lie in -3..9"):
        ages.cells_of("5", "10")
    with pytest.raises(ValueError, match="one bin edge to a later one"):
        bio.Bins("x", [0, 1, 2]).cells_of("1", "1")
    with pytest.raises(ValueError, match="runs backwards"):
        bio.Levels("c", ["b", "a"]).cells_of("a", "b")


def test_a_folder_of_records_is_its_record_files(tmp_path):
    from blowfish_te.io.sources import files_of

    (tmp_path / "b.csv").write_text("age\n1\n")
    (tmp_path / "a.csv").write_text("age\n2\n")
    (tmp_path / "_SUCCESS").write_text("")
    (tmp_path / ".hidden.csv").write_text("age\n3\n")
    (tmp_path / "sub").mkdir()
    assert files_of(tmp_path) == [str(tmp_path / "a.csv"), str(tmp_path / "b.csv")]
    (tmp_path / "c.parquet").write_bytes(b"")
    with pytest.raises(ValueError, match="files of one format only"):
        files_of(tmp_path)
    (tmp_path / "c.parquet").unlink()
    (tmp_path / "readme.txt").write_text("")
    with pytest.raises(ValueError, match=r"not CSV, Parquet or Arrow records \(readme.txt\)"):
        files_of(tmp_path)
    empty = tmp_path / "sub"
    with pytest.raises(ValueError, match="holds no CSV"):
        files_of(empty)
