"""Quick start: cumulative counts of an ordered attribute under a line policy, next to DP."""

import numpy as np

import blowfish_te as bt
from blowfish_te import datasets, policies, workloads

k = 100
x = datasets.synthetic(k, n=10_000, rng=0)  # a histogram of 10 000 records over 100 ordered values
W = workloads.prefix(k)                      # the cumulative counts x_0 + ... + x_t

blowfish = bt.answer(W, x, policies.line(k), epsilon=0.5, rng=1)    # values one step apart protected
dp = bt.answer(W, x, policies.complete(k), epsilon=0.5, rng=1)      # bounded DP: every value protected

for release in (blowfish, dp):
    rmse = np.sqrt(np.mean((release.answers - W @ x) ** 2))
    print(f"{release.policy.name:<14} route={release.route:<9} expected RMSE {np.sqrt(release.expected_mse):6.2f}"
          f"  measured {rmse:6.2f}  disclosed totals {release.component_totals}")
