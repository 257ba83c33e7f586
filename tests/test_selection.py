"""The private check: the features it measures (their budgets, noise scales and sensitivities),
the fitted error models and the decision at the predicted crossing."""

import math
from dataclasses import replace

import numpy as np
import pytest

from blowfish_te import selection
from blowfish_te.noise import add_laplace
from blowfish_te.partitions import BUCKET_GUARD, tree_cost, tree_costs
from blowfish_te.secure import SecureRandom
from blowfish_te.selection import (
    COST_FLOOR,
    LOW_SCALE,
    MODEL_SPLIT,
    REFINED_TOTAL_SHARE,
    Decision,
    ErrorModel,
    Features,
    choose,
    cost_share,
    decide,
    error_model,
    measure,
    refine_total,
    total_share,
)


def _features(scale=1.0, cost=0.5, cells=100, epsilon=1.0, spent=0.0, guarded=None):
    return Features(total=scale * cells / epsilon, cost=cost, cells=cells, epsilon=epsilon, spent=spent, total_public=False,
                    guarded_cost=cost if guarded is None else guarded)


def _costs(x, eps):
    """The two costs without noise, in units of K/ε."""
    price, guard = 1 / ((1 - MODEL_SPLIT) * eps), BUCKET_GUARD * 2 / (MODEL_SPLIT * eps)
    return tree_cost(x, price) / (len(x) / eps), tree_cost(x, price, guard) / (len(x) / eps)


def test_feature_shares_follow_the_domain():
    assert total_share(4096) == pytest.approx(40 / 4096)
    assert total_share(16) == 0.01 and total_share(10**6) == 0.002
    assert cost_share(4096) == pytest.approx(40 / 4096)
    assert cost_share(16) == 0.01 and cost_share(10**6) == 0.0025
    assert cost_share(4096, record_moves=2) == pytest.approx(1.5 * 40 / 4096)
    with pytest.raises(ValueError, match="record_moves"):
        cost_share(4096, record_moves=3)


class _Recorder:
    """A generator stand-in that records the Laplace draws it is asked for (scale, size) and adds nothing."""

    def __init__(self):
        self.draws = []

    def laplace(self, loc, scale, size):
        self.draws.append((scale, size))
        return np.zeros(size)


def test_measure_spends_what_it_draws_at_the_calibrated_scales():
    x = np.arange(64) % 7
    eps = 0.5
    gen = _Recorder()
    features = measure(x, eps, gen)
    budget_total, budget_cost = total_share(64) * eps, cost_share(64) * eps
    assert gen.draws == [(1 / budget_total, 1), (1 / budget_cost, 2)]  # sensitivity 1 each
    assert features.spent == pytest.approx(budget_total + 2 * budget_cost)
    assert features.total == x.sum() and not features.total_public
    assert (features.cost, features.guarded_cost) == pytest.approx(_costs(x, eps))
    assert features.guarded_cost > features.cost  # the guards add to every block
    assert features.scale == pytest.approx(x.sum() * eps / 64)
    assert features.excess == pytest.approx((features.guarded_cost + COST_FLOOR) / (features.cost + COST_FLOOR))

    gen = _Recorder()
    moved = measure(x, eps, gen, total=1000, record_moves=2)  # a public total is free
    assert gen.draws == [(2 / (cost_share(64, 2) * eps), 2)]
    assert moved.total == 1000 and moved.total_public and moved.spent == pytest.approx(2 * cost_share(64, 2) * eps)

    gen = _Recorder()
    only = measure(x, eps, gen, cost=False, total_budget=0.1)
    assert gen.draws == [(1 / 0.1, 1)] and only.cost is None and only.guarded_cost is None and only.spent == 0.1
    with pytest.raises(ValueError, match="needs both costs"):
        _ = only.excess


def test_measure_is_seeded_and_its_noise_has_the_stated_scale(monkeypatch):
    x = np.random.default_rng(0).integers(0, 30, 64)
    eps, n = 1.0, 4000
    first = measure(x, eps, np.random.default_rng(5))
    assert measure(x, eps, np.random.default_rng(5)) == first
    known = {}  # the costs are deterministic: computed once, so the draws are all this test pays for

    def once(values, prices):
        if tuple(prices) not in known:
            known[tuple(prices)] = tree_costs(values, prices)
        return known[tuple(prices)]

    monkeypatch.setattr(selection, "tree_costs", once)
    # the cost features: each spreads as Laplace(1/(share·ε)) in units of K/ε (a Laplace sample's
    # standard deviation has relative standard error √(5/4n))
    drawn = [measure(x, eps, np.random.default_rng(s)) for s in range(n)]
    scale = 1 / (cost_share(64) * eps) / (64 / eps)
    expected_sd = math.sqrt(2) * scale
    for values, exact in zip(([f.cost for f in drawn], [f.guarded_cost for f in drawn]), _costs(x, eps)):
        values = np.array(values)
        assert values.std() == pytest.approx(expected_sd, rel=5 * math.sqrt(1.25 / n))
        assert values.mean() == pytest.approx(exact, abs=5 * expected_sd / math.sqrt(n))


def test_measure_arguments_are_checked():
    with pytest.raises(ValueError, match="total must be >= 0"):
        measure([1, 2], 1.0, np.random.default_rng(0), total=-1)
    with pytest.raises(ValueError, match="total_budget must be"):
        measure([1, 2], 1.0, np.random.default_rng(0), total_budget=1.5)
    with pytest.raises(ValueError, match="epsilon"):
        measure([1, 2], 0.0, np.random.default_rng(0))


def test_error_model_reads_its_surface():
    model = ErrorModel("test", (0.1, -0.5, 0.8, 0.2, 0.03, -0.1, 0.7, -0.2))
    f = _features(scale=10.0, cost=0.48, guarded=1.48)
    s, c, g = 1.0, math.log10(0.48 + COST_FLOOR), math.log10(1.5 / 0.5)
    expected = 0.1 - 0.5 * s + 0.8 * c + 0.2 * s * c + 0.03 * s * s - 0.1 * c * c + 0.7 * g - 0.2 * s * g
    assert model.terms(f) == pytest.approx((1, s, c, s * c, s * s, c * c, g, s * g))
    assert model.log_ratio(f) == pytest.approx(expected)
    assert model.predict(f) == pytest.approx(10**expected)
    # the scale is clipped to the model's range, the cost to [0, 2], the excess's log to [0, excess_max]
    assert model.terms(_features(cost=0.0, guarded=1e6))[6] == model.excess_max == 2.0
    assert ErrorModel("t", model.coefficients, excess_max=0.5).terms(_features(cost=0.0, guarded=1e6))[6] == 0.5
    low = model.scale_range[0]
    assert model.log_ratio(_features(scale=1e-9, cost=0.48)) == model.log_ratio(_features(scale=10**low, cost=0.48))
    assert model.log_ratio(_features(scale=10.0, cost=-3.0)) == model.log_ratio(_features(scale=10.0, cost=0.0))
    assert model.log_ratio(_features(scale=10.0, cost=9.0)) == model.log_ratio(_features(scale=10.0, cost=2.0))
    assert model.terms(_features(cost=0.5, guarded=0.1))[6] == 0.0  # noise can make the guarded cost the smaller
    with pytest.raises(ValueError, match="reads the cost features"):
        model.log_ratio(_features(cost=None))
    with pytest.raises(ValueError, match="strict|zip|argument"):
        ErrorModel("short", (0.0, 1.0)).log_ratio(f)


def test_a_histogram_model_never_predicts_below_the_cost():
    """With ``cost_bound`` the prediction is at least the cost feature (no private partition beats
    the best partition without noise); without it, the surface alone."""
    surface = (-3.0, 0, 0, 0, 0, 0, 0, 0)  # 10⁻³ whatever the features
    f = _features(scale=1.0, cost=0.4, guarded=0.4)
    assert ErrorModel("free", surface).predict(f) == pytest.approx(1e-3)
    assert ErrorModel("bound", surface, cost_bound=True).predict(f) == 0.4
    assert decide(_features(scale=1.0, cost=1.3, guarded=1.3), ErrorModel("bound", surface, cost_bound=True)).route == "plain"
    assert ErrorModel("bound", (0.5, 0, 0, 0, 0, 0, 0, 0), cost_bound=True).predict(f) == pytest.approx(10**0.5)
    assert error_model("dawa", 1, "cells").cost_bound and not error_model("dawa", 1, "ranges").cost_bound


def test_decide_partitions_exactly_below_the_crossing():
    features = _features(scale=1.0, cost=1.0 - COST_FLOOR)  # s = 0, c = 0, g = 0
    below = decide(features, ErrorModel("m", (-1e-9, 0, 0, 0, 0, 0, 0, 0)))
    assert below.route == "partition" and below.predicted < 1 and "m predicts" in below.reason
    at = decide(features, ErrorModel("m", (0.0, 0, 0, 0, 0, 0, 0, 0)))
    assert at.route == "plain" and at.predicted == 1.0
    assert isinstance(at, Decision) and at.features is features and at.spent == features.spent
    with pytest.raises(TypeError, match="model must be an ErrorModel"):
        decide(features, (0, 0, 0, 0, 0, 0))


def test_a_model_with_a_lower_threshold_partitions_only_below_it():
    """A threshold τ < 1 (chosen on held-out shapes) moves the decision: partition exactly below τ,
    in decide and for choose's chosen decider; error_model gives the shipped threshold to the
    decision model and 1 to the calibrated one."""
    features = _features(scale=1.0, cost=1.0 - COST_FLOOR)  # s = 0, c = 0, g = 0: log10 ratio = c₀

    def model(ratio, threshold=1.0):
        return ErrorModel("m", (math.log10(ratio), 0, 0, 0, 0, 0, 0, 0), threshold=threshold)

    assert decide(features, model(0.7)).route == "partition"
    kept = decide(features, model(0.7, threshold=0.6))
    assert kept.route == "plain" and kept.predicted == pytest.approx(0.7) and "it partitions below 0.6" in kept.reason
    assert decide(features, model(0.59, threshold=0.6)).route == "partition"
    assert choose(features, {"a": model(0.5)}, {"a": model(0.7, threshold=0.6)}).route == "plain"
    assert choose(features, {"a": model(0.5)}, {"a": model(0.55, threshold=0.6)}).route == "a"
    from blowfish_te._selection_models import THRESHOLDS

    for key, threshold in THRESHOLDS.items():
        assert 0 < threshold < 1
        assert error_model(*key).threshold == threshold and error_model(*key, calibrated=True).threshold == 1.0
    assert error_model("dawa", 2, "ranges").threshold == THRESHOLDS.get(("dawa", 2, "ranges"), 1.0)


def test_choose_runs_the_lowest_prediction_below_the_crossing():
    """Pythia's argmin: every model reads the same features; the lowest prediction runs when it is
    below the plain release's error, and the reason lists every prediction."""
    features = _features(scale=1.0, cost=1.0 - COST_FLOOR)  # s = 0, c = 0, g = 0: log10 ratio = c₀

    def model(name, ratio):
        return ErrorModel(name, (math.log10(ratio), 0, 0, 0, 0, 0, 0, 0))

    picked = choose(features, {"a": model("a", 0.8), "b": model("b", 0.5), "c": model("c", 2.0)})
    assert picked.route == "b" and picked.predicted == pytest.approx(0.5) and picked.features is features
    assert "a 0.8" in picked.reason and "b 0.5" in picked.reason and "c 2" in picked.reason
    plain = choose(features, {"a": model("a", 1.0), "b": model("b", 3.0)})
    assert plain.route == "plain" and plain.predicted == pytest.approx(1.0) and plain.spent == features.spent
    # ranked by the calibrated models, decided by the chosen one's own check model
    ranked = choose(features, {"a": model("a", 0.5), "b": model("b", 0.6)}, {"a": model("a", 1.5), "b": model("b", 0.2)})
    assert ranked.route == "plain" and ranked.predicted == pytest.approx(1.5) and "a, the lowest" in ranked.reason
    kept = choose(features, {"a": model("a", 0.5), "b": model("b", 0.6)}, {"a": model("a", 0.9), "b": model("b", 2.0)})
    assert kept.route == "a" and kept.predicted == pytest.approx(0.9)
    with pytest.raises(TypeError, match="each with a decider"):
        choose(features, {"a": model("a", 0.5)}, {"b": model("b", 0.5)})
    with pytest.raises(TypeError, match="models must map names to ErrorModels"):
        choose(features, {})
    with pytest.raises(TypeError, match="models must map names to ErrorModels"):
        choose(features, {"a": (0, 0)})


def test_error_models_are_looked_up_by_mechanism_dimension_and_class():
    model = error_model("dawa", 1, "cells")
    assert isinstance(model, ErrorModel) and model.name == "dawa's 1-D cells model"
    from blowfish_te._selection_models import COEFFICIENTS

    assert model.coefficients == COEFFICIENTS[("dawa", 1, "cells")]
    with pytest.raises(ValueError, match="workload_class must be one of"):
        error_model("dawa", 1, "boxes")
    with pytest.raises(ValueError, match="no error model is fitted for mwem on 1-D cells workloads; fitted: "):
        error_model("mwem", 1, "cells")


def test_every_checked_mechanism_has_its_models():
    from blowfish_te._selection_models import COEFFICIENTS

    for key in [("dawa", 1, "cells"), ("dawa", 1, "ranges"), ("dawa", 2, "cells"), ("dawa", 2, "ranges"),
                ("privtree", 1, "cells"), ("privtree", 1, "ranges"), ("privtree", 2, "cells"), ("privtree", 2, "ranges"),
                ("agrid", 2, "cells"), ("agrid", 2, "ranges"), ("ugrid", 2, "cells"), ("ugrid", 2, "ranges"),
                ("partition_then_transform", 1, "cells")]:
        assert len(COEFFICIENTS[key]) == 8 and all(math.isfinite(c) for c in COEFFICIENTS[key]), key
    assert set(selection.WORKLOAD_CLASSES) == {"cells", "ranges"}


def _refusal(call) -> str:
    with pytest.raises((TypeError, ValueError)) as info:
        call()
    return str(info.value)


def test_shares_and_features_refuse_what_they_cannot_measure_by_name():
    assert total_share(1) == 0.01 and cost_share(1) == 0.01  # a single cell is a domain too
    assert _refusal(lambda: total_share(0)) == "k must be an integer >= 1, got 0"
    assert _refusal(lambda: cost_share(0)) == "k must be an integer >= 1, got 0"
    assert _refusal(lambda: cost_share(16, record_moves=0)) == "record_moves must be an integer >= 1, got 0"
    assert _refusal(lambda: cost_share(16, record_moves=3)) == "record_moves must be an integer <= 2, got 3"
    x, gen = np.arange(16), _Recorder()
    assert _refusal(lambda: measure(x, 1.0, gen, record_moves=0)) == "record_moves must be an integer >= 1, got 0"
    assert _refusal(lambda: measure(x, 1.0, gen, record_moves=0, cost=False)) == "record_moves must be an integer >= 1, got 0"
    assert _refusal(lambda: measure(x, 1.0, gen, record_moves=3)) == "record_moves must be an integer <= 2, got 3"
    # the total's budget is a share of ε strictly between 0 and ε
    assert _refusal(lambda: measure(x, 0.5, gen, total_budget=0.0)).startswith("total_budget must be ")
    assert _refusal(lambda: measure(x, 0.5, gen, total_budget=0.5)).startswith("total_budget must be ")
    assert _refusal(lambda: measure(x, 0.5, gen, total_budget=-0.1)).startswith("total_budget must be ")
    assert gen.draws == []  # nothing was drawn for a refused call


def test_measure_reads_a_grid_as_its_flattened_cells():
    grid = np.arange(64).reshape(8, 8) % 5
    flat, laid = measure(grid.reshape(-1), 0.5, _Recorder()), measure(grid, 0.5, _Recorder())
    assert laid == flat and laid.cells == 64


def test_measure_gives_each_feature_its_sampler_scale_and_sensitivity():
    """Through a hardened generator: the total is an integer (exact discrete Laplace at
    record_moves / its budget), the two costs are not (lattice Laplace, calibrated to the pair's
    L1 sensitivity 2·record_moves at record_moves / the cost budget)."""

    class Recording(SecureRandom):
        def __init__(self):
            super().__init__()
            self.calls = []

        def integer_laplace(self, values, scale):
            self.calls.append(("integer", scale, len(values)))
            return np.asarray(values, dtype=np.float64)

        def lattice_laplace(self, values, scale, sensitivity):
            self.calls.append(("lattice", scale, sensitivity, len(values)))
            return np.asarray(values, dtype=np.float64)

    x, eps = np.arange(64) % 7, 0.5
    for moves in (1, 2):
        gen = Recording()
        features = measure(x, eps, gen, record_moves=moves)
        budget_total, budget_cost = total_share(64) * eps, cost_share(64, moves) * eps
        assert gen.calls == [("integer", moves / budget_total, 1), ("lattice", moves / budget_cost, 2 * moves, 2)]
        assert features == Features(float(x.sum()), _costs(x, eps)[0], 64, eps, budget_total + 2 * budget_cost, False,
                                    _costs(x, eps)[1], total_variance=2.0 * (moves / budget_total) ** 2, record_moves=moves)
        assert features.total_estimate() == (float(x.sum()), 2.0 * (moves / budget_total) ** 2)


def test_refine_total_buys_a_second_total_only_on_flat_or_empty_data_at_small_epsilon():
    """A second total at REFINED_TOTAL_SHARE·ε, merged by inverse variance, when the total is
    noisy, N·ε/K reads below LOW_SCALE and ε < √(2/K); else the features as they are."""
    k = 4096
    x = np.zeros(k, dtype=np.int64)
    x[:1000] = 1
    small = np.sqrt(2.0 / k) * 0.99
    for moves in (1, 2):
        features = measure(x, small, np.random.default_rng(1), record_moves=moves)
        assert features.scale < LOW_SCALE
        gen = np.random.default_rng(5)
        refined = refine_total(features, x, gen)
        budget = REFINED_TOTAL_SHARE * small
        second = float(add_laplace(np.array([1000.0]), moves / budget, np.random.default_rng(5), sensitivity=float(moves),
                                   integer=True)[0])
        v1, v2 = features.total_variance, 2.0 * (moves / budget) ** 2
        assert refined.spent == pytest.approx(features.spent + budget, rel=1e-12)
        assert refined.total_variance == pytest.approx(1.0 / (1.0 / v1 + 1.0 / v2), rel=1e-12)
        assert refined.total == pytest.approx((features.total / v1 + second / v2) * refined.total_variance, rel=1e-12)
        assert refined.total_estimate() == (refined.total, refined.total_variance)
        assert replace(refined, total=features.total, total_variance=v1, spent=features.spent) == features
    features = measure(x, small, np.random.default_rng(1))
    untouched = [replace(features, total=LOW_SCALE * k / small * 1.01),  # N·ε/K at the threshold
                 replace(features, epsilon=np.sqrt(2.0 / k)),  # ε at √(2/K)
                 Features(1000.0, None, k, small, 0.0, True),  # a public total
                 replace(features, total_variance=0.0)]  # a noisy total of unknown variance
    for f in untouched:
        gen = np.random.default_rng(0)
        assert refine_total(f, x, gen) is f
        assert gen.random() == np.random.default_rng(0).random()  # nothing drawn
    assert untouched[2].total_estimate() == (1000.0, 0.0) and untouched[3].total_estimate() is None
    with pytest.raises(TypeError, match="features must be Features"):
        refine_total((1000.0, 1.0), x, np.random.default_rng(0))


def test_the_model_refuses_features_missing_either_cost():
    half = Features(100.0, 0.5, 64, 1.0, 0.0, False, None)
    with pytest.raises(ValueError, match="the m reads the cost features; measure them"):
        ErrorModel("m", (0.0,) * 8).terms(half)
    with pytest.raises(ValueError, match="the m reads the cost features; measure them"):
        ErrorModel("m", (0.0,) * 8).terms(replace(half, cost=None, guarded_cost=0.5))


def test_the_scale_term_is_the_clipped_log_of_the_features_scale():
    model = ErrorModel("m", (0.0,) * 8, scale_range=(-1.5, 4.0))
    assert model.terms(_features(scale=0.5))[1] == pytest.approx(math.log10(0.5))
    assert model.terms(_features(scale=0.0))[1] == -1.5  # no records: the log's floor, clipped
    assert model.terms(_features(scale=1e-9))[1] == -1.5
    assert model.terms(_features(scale=1e6))[1] == 4.0


def test_fitted_models_carry_the_fitted_excess_bound_and_name_the_fitted_ones():
    from blowfish_te._selection_models import COEFFICIENTS, EXCESS_MAX, SCALE_RANGES

    model = error_model("privtree", 2, "ranges")
    assert (model.scale_range, model.excess_max, model.cost_bound) == (SCALE_RANGES[2], EXCESS_MAX, False)
    assert EXCESS_MAX != ErrorModel("default", model.coefficients).excess_max  # the fitted bound, not the default
    fitted = ", ".join(f"{m} ({d}-D {c})" for m, d, c in sorted(COEFFICIENTS))
    assert _refusal(lambda: error_model("mwem", 1, "cells")) == (
        f"no error model is fitted for mwem on 1-D cells workloads; fitted: {fitted}")
    assert _refusal(lambda: decide(_features(), (0,) * 8)) == "model must be an ErrorModel, got tuple"


def test_features_describe_what_was_measured():
    noisy = Features(1234.4, 0.12345, 64, 0.5, 0.1, False, 0.54321)
    assert noisy.describe() == ("record total 1234 (noisy), N·ε/K = 9.64, DAWA's cost 0.123 of K/ε (0.543 with its "
                                "guards); features spent 0.1")
    public = Features(1000.0, None, 64, 0.5, 0.0, True)
    assert public.describe() == "record total 1000 (public), N·ε/K = 7.81; features spent 0"


def test_calibrated_models_are_the_least_squares_fits_where_the_decision_fit_differs():
    """error_model(..., calibrated=True) reads the least-squares table where a cost-weighted
    refinement made the decision's fit, and the decision's own fit (already least squares) elsewhere."""
    from blowfish_te._selection_models import COEFFICIENTS, LEAST_SQUARES

    assert LEAST_SQUARES and all(LEAST_SQUARES[key] != COEFFICIENTS[key] for key in LEAST_SQUARES)
    for key in COEFFICIENTS:
        calibrated = error_model(*key, calibrated=True).coefficients
        assert calibrated == LEAST_SQUARES.get(key, COEFFICIENTS[key]) and error_model(*key).coefficients == COEFFICIENTS[key]
