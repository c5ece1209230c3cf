"""How the fitted efficiencies predict rows they never saw: leave-one-group-out refits, each profile's held-out spread.

The calibration split (`calibration.split_of`) holds out one row in three of each group, but the held-out rows share
their pages, releases and chips with the rows the fit saw. A harder test refits without a whole group (an engine
release, a chip, a tensor-parallel degree, dense or MoE, a weight format) and scores that group alone:

    for each value g of the grouping:  fit on the calibration rows outside g;  score every row of g
    (its calibration and validation rows, and the out-of-sample runs of `measurements.validation_runs`)

A group whose platform keeps no calibration row once g is left out cannot be scored and is reported as such.

`profile_spread` gives what a profile's users should expect: the 10th and 90th percentiles of measured / predicted
over the rows its fit never saw; `estimate` and the command line print the estimate times these two numbers.

Used in chapter 11, *How close do real systems come?*.
"""

import functools
import math
import statistics
from dataclasses import dataclass

from ._validate import choice, fraction
from .calibration import (PROFILE_ENGINES, Metrics, all_rows, engine_of, fit_profile, group_of, in_profile,
                          measured_efficiencies, fit_rows, platform_of, row_model, split_of)
from .efficiency import PLATFORMS
from .measurements import validation_runs
from .models import get_model

GROUPINGS = ("release", "chip", "tp", "kind", "weights")
SPREAD_QUANTILES = (0.1, 0.9)
# Which held-out rows a spread is taken over: all of them, or only those of models with fine-grained experts
# (`models.Transformer.fine_grained_experts`), which the estimate misses more widely (chapter 11).
EXPERTS = ("all", "fine-grained")


def group_key(row, by: str) -> str:
    """The value of grouping `by` for a row: its engine and release ("TensorRT-LLM v0.14", "vLLM 0.10.1", "Pope et
    al."), its chip, "TP<n>", "dense" or "moe", or its weight format."""
    choice("by", by, GROUPINGS)
    platform, tp, kind, weights = group_of(row)
    chip = getattr(row, "chip", None) or getattr(row, "gpu")
    return {"release": engine_of(row).split(" (")[0], "chip": chip, "tp": f"TP{tp}", "kind": kind,
            "weights": weights}[by]


@functools.cache
def _pool(profile: str) -> tuple:
    """(row model, split) for every row of the profile: its calibration and validation rows, then the runs no fit
    ever sees ("out-of-sample")."""
    pooled = [(row_model(row), split_of(row)) for row in all_rows() if in_profile(row, profile)]
    pooled += [(row_model(row), "out-of-sample") for row in validation_runs() if in_profile(row, profile)]
    return tuple(pooled)


def _score(name: str, pairs) -> Metrics:
    factors = [max(r, 1 / r) for r in (m.predicted(eff) / m.measured for m, eff in pairs)]
    ratios = [m.measured / m.predicted(eff) for m, eff in pairs]
    return Metrics(name, len(pairs), sum(f <= 1.5 for f in factors) / len(pairs),
                   sum(f <= 2.0 for f in factors) / len(pairs), statistics.median(ratios))


@dataclass(frozen=True)
class GroupScore:
    """One left-out group: how the fit without it (on `fitted_rows` calibration rows) scores its `metrics.n_rows`
    rows; `unscored` rows had no calibration row of their platform left to fit on."""

    name: str
    fitted_rows: int
    metrics: Metrics | None
    unscored: int


def leave_one_group_out(by: str = "release", profile: str = "typical") -> tuple:
    """A `GroupScore` for each value of grouping `by` (`GROUPINGS`) among the rows of `profile`: refitted on the
    calibration rows outside the group (each platform on its own, the measured efficiencies held), scored on every
    row inside it.

    Defined in chapter 11, *How close do real systems come?*.
    """
    choice("by", by, GROUPINGS)
    choice("profile", profile, tuple(PROFILE_ENGINES))
    return _leave_one_group_out(by, profile)


@functools.cache
def _leave_one_group_out(by: str, profile: str) -> tuple:
    pool = _pool(profile)
    keys = [group_key(m.row, by) for m, _ in pool]
    scores = []
    for value in sorted(set(keys)):
        fits, fitted = {}, 0
        for platform in PLATFORMS:
            rows = [m for (m, split), key in zip(pool, keys)
                    if split == "calibration" and key != value and platform_of(m.row) == platform]
            if rows:
                fixed = measured_efficiencies(platform)
                fits[platform] = fit_rows(rows, fixed=fixed)
                fitted += len(rows)
        inside = [m for (m, _), key in zip(pool, keys) if key == value]
        pairs = [(m, fits[platform_of(m.row)]) for m in inside if platform_of(m.row) in fits]
        scores.append(GroupScore(value, fitted, _score(value, pairs) if pairs else None, len(inside) - len(pairs)))
    return tuple(scores)


def held_out_ratios(profile: str = "typical", platform: str = "gpu", experts: str = "all") -> tuple:
    """measured / predicted for every row of `profile` on `platform` its stored fit never saw (the validation split
    and the out-of-sample runs), at `estimate.PROFILES[profile]`'s efficiencies; `experts` "fine-grained": only the
    rows of models with fine-grained experts (`EXPERTS`).

    Defined in chapter 11, *How close do real systems come?*.
    """
    choice("profile", profile, tuple(PROFILE_ENGINES))
    choice("platform", platform, PLATFORMS)
    choice("experts", experts, EXPERTS)
    eff = getattr(fit_profile(profile), platform)
    if eff is None:
        return ()
    return tuple(m.measured / m.predicted(eff) for m, split in _pool(profile)
                 if split != "calibration" and platform_of(m.row) == platform
                 and (experts == "all" or get_model(m.row.model).fine_grained_experts))


def profile_spread(profile: str = "typical", platform: str = "gpu", quantiles: tuple = SPREAD_QUANTILES,
                   experts: str = "all") -> tuple:
    """(low, high): the `quantiles` (default the 10th and 90th percentiles) of measured / predicted over the rows the
    profile's fit never saw on `platform` (`held_out_ratios`, of every model or of those with fine-grained
    `experts`), rounded to 0.01; () where it has none. A prediction times these brackets four in five of the
    held-out measurements."""
    if not isinstance(quantiles, tuple) or len(quantiles) != 2:
        raise ValueError(f"quantiles must be a (low, high) pair of fractions, got {quantiles!r}")
    low, high = (fraction("quantiles", q, "a fraction of the held-out rows") for q in quantiles)
    ratios = sorted(held_out_ratios(profile, platform, experts))
    if not ratios:
        return ()
    pick = [ratios[min(len(ratios) - 1, max(0, math.ceil(q * len(ratios)) - 1))] for q in (low, high)]
    return (round(pick[0], 2), round(pick[1], 2))


def fitted_rows(profile: str = "typical", platform: str = "gpu") -> int:
    """How many calibration rows `profile`'s fit on `platform` used.

    Defined in chapter 11, *How close do real systems come?*.
    """
    choice("profile", profile, tuple(PROFILE_ENGINES))
    choice("platform", platform, PLATFORMS)
    return sum(split == "calibration" and platform_of(m.row) == platform for m, split in _pool(profile))

