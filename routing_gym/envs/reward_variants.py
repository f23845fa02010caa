"""Reward variants for research on reward shaping (importing this module registers them).

Every variant is a pure function of the ``[n, K]`` outcome arrays and numeric coefficients,
vectorized over the K candidates, so the env, the oracle, batched evaluation and
``routing-gym compare`` all read the same matrix. ``c`` below is a route's correctness in
[0, 1] (fractional correctness gives the expected reward ``c * r_correct + (1 - c) * r_wrong``);
``E``, ``T``, ``P`` are its joules, seconds and mean watts.

**The gate** holds when, for every query, every fully correct route earns more than every
fully wrong route of the same query. Variants with an analytical gate reject coefficients
that break it (``GateViolationError``, unless ``allow_ungated=True``); the others
(``lagrangian``) are checked on the data each time a ``Reward`` scores outcomes and warn
with ``GateWarning`` when some correct route scores at or below a wrong one
(``rewards.check_gate_on_data`` lists the queries).

| name | correct route | wrong route | gate holds iff |
|---|---|---|---|
| ``gated_rank`` (core) | ``2 - sum_m lambda_m z_m``, z = rank in [0, 1] | ``-1`` | lambdas >= 0, sum < 3 |
| ``magnitude_linear_query`` | ``2 - sum_m lambda_m z_m``, z = min-max of x within the query | ``-1`` | lambdas >= 0, sum < 3 |
| ``magnitude_log_query`` | same, z = min-max of log1p(x) within the query | ``-1`` | lambdas >= 0, sum < 3 |
| ``magnitude_linear_pool`` | same, z = min(x / scale, 1) | ``-1`` | lambdas >= 0, sum < 3, scales > 0 |
| ``magnitude_log_pool`` | same, z = min(log1p(x) / log1p(scale), 1) | ``-1`` | lambdas >= 0, sum < 3, scales > 0 |
| ``centered_<base>`` | base reward minus the query's mean over its K candidates | | the base's gate |
| ``lagrangian`` | ``1 - mu E`` | ``-mu E`` | data: mu (E_correct - E_wrong) < 1 per query |
| ``greenserv`` | ``(1 - lambda_e) - lambda_e e``, e = min-max of E within the query | ``-lambda_e e`` | 0 <= lambda_e < 0.5 |
| ``greenserv_pool`` | same, e = min(E / scale_j, 1) | same | 0 <= lambda_e < 0.5, scale_j > 0 |

The three cost terms (m = t latency, e energy, p power) are normalised the same way, so
``lambda_t``, ``lambda_e`` and ``lambda_p`` trade off on one footing. Per-query normalisation
compares a route with the query's other candidates only (the cheapest gets 0, the dearest 1,
proportionally in between, unlike ``gated_rank``'s ranks, which ignore how much dearer);
per-pool normalisation compares across queries too (a 3 kJ MATH answer is penalized more
than an 80 J GSM8K one), with a stated pool constant: ``pool_scales(tournament)`` gives the
largest per-model mean on the training split. Log joules damp the heavy tail of reasoning
models. When every candidate costs the same (or K = 1) the per-query z is 0.
"""

from __future__ import annotations

import inspect
import numpy as np

from routing_gym.envs.rewards import (
    CORRECT_BASE,
    WRONG_REWARD,
    CoefficientValueError,
    RewardBreakdown,
    _gated_rank_gate,
    get_reward,
    register_reward,
)
from routing_gym.tournament import Outcomes, Tournament

# Reference scales of the pool-normalised variants (defaults; set them per pool with
# ``pool_scales``): about one reasoning-model answer in the reference paper's pool.
DEFAULT_SCALE_J = 1000.0
DEFAULT_SCALE_S = 30.0
DEFAULT_SCALE_W = 300.0
GREENSERV_GATE = 0.5


def _min_max(values: np.ndarray) -> np.ndarray:
    """``(x - min) / (max - min)`` within each query (last axis); 0 where all are equal."""
    low = values.min(axis=-1, keepdims=True)
    span = values.max(axis=-1, keepdims=True) - low
    return np.divide(values - low, span, out=np.zeros_like(values, dtype=np.float64), where=span > 0)


def _pool(values: np.ndarray, scale: float, log: bool) -> np.ndarray:
    # Saturating at the scale keeps z in [0, 1], which is what makes the gate analytical.
    z = np.log1p(values) / np.log1p(scale) if log else values / scale
    return np.minimum(z, 1.0)


def _gated(outcomes: Outcomes, z: dict[str, np.ndarray], lambdas: dict[str, float]) -> RewardBreakdown:
    penalty = sum(lambdas[m] * z[m] for m in z)
    total = outcomes.correct * (CORRECT_BASE - penalty) + (1.0 - outcomes.correct) * WRONG_REWARD
    return RewardBreakdown(total, {f"z_{m}": v for m, v in z.items()})


def _metrics(outcomes: Outcomes) -> dict[str, np.ndarray]:
    return {"latency": outcomes.latency_s, "energy": outcomes.energy_j, "power": outcomes.mean_power_w}


def _pool_gate(
    lambda_t: float = 0.0,
    lambda_e: float = 0.0,
    lambda_p: float = 0.0,
    scale_s: float = DEFAULT_SCALE_S,
    scale_j: float = DEFAULT_SCALE_J,
    scale_w: float = DEFAULT_SCALE_W,
) -> str | None:
    bad = {k: v for k, v in {"scale_s": scale_s, "scale_j": scale_j, "scale_w": scale_w}.items() if not v > 0}
    if bad:
        return f"pool scales must be > 0, got {bad}"
    return _gated_rank_gate(lambda_t, lambda_e, lambda_p)


@register_reward("magnitude_linear_query", gate=_gated_rank_gate)
def magnitude_linear_query(
    outcomes: Outcomes, lambda_t: float = 0.0, lambda_e: float = 0.0, lambda_p: float = 0.0
) -> RewardBreakdown:
    """Gated reward with per-query min-max normalised costs.

    ``z_m = (x - min_K x) / (max_K x - min_K x)`` for x = seconds, joules, watts of the
    query's K candidates; correct ``2 - (lambda_t z_t + lambda_e z_e + lambda_p z_p)``, wrong
    ``-1``. Gate: all lambdas >= 0 and their sum < 3.
    """
    z = {m: _min_max(x) for m, x in _metrics(outcomes).items()}
    return _gated(outcomes, z, {"latency": lambda_t, "energy": lambda_e, "power": lambda_p})


@register_reward("magnitude_log_query", gate=_gated_rank_gate)
def magnitude_log_query(
    outcomes: Outcomes, lambda_t: float = 0.0, lambda_e: float = 0.0, lambda_p: float = 0.0
) -> RewardBreakdown:
    """Gated reward with per-query min-max normalised log costs.

    ``z_m`` is the min-max of ``log1p(x)`` within the query (a 10x dearer model is one step,
    whatever the absolute joules); correct ``2 - sum lambda_m z_m``, wrong ``-1``. Gate: all
    lambdas >= 0 and their sum < 3.
    """
    z = {m: _min_max(np.log1p(x)) for m, x in _metrics(outcomes).items()}
    return _gated(outcomes, z, {"latency": lambda_t, "energy": lambda_e, "power": lambda_p})


@register_reward("magnitude_linear_pool", gate=_pool_gate)
def magnitude_linear_pool(
    outcomes: Outcomes,
    lambda_t: float = 0.0,
    lambda_e: float = 0.0,
    lambda_p: float = 0.0,
    scale_s: float = DEFAULT_SCALE_S,
    scale_j: float = DEFAULT_SCALE_J,
    scale_w: float = DEFAULT_SCALE_W,
) -> RewardBreakdown:
    """Gated reward with pool-normalised costs.

    ``z_m = min(x / scale_m, 1)`` with one constant per pool (``pool_scales(tournament)``);
    correct ``2 - sum lambda_m z_m``, wrong ``-1``. Gate: lambdas >= 0, sum < 3, scales > 0.
    """
    scales = {"latency": scale_s, "energy": scale_j, "power": scale_w}
    z = {m: _pool(x, scales[m], log=False) for m, x in _metrics(outcomes).items()}
    return _gated(outcomes, z, {"latency": lambda_t, "energy": lambda_e, "power": lambda_p})


@register_reward("magnitude_log_pool", gate=_pool_gate)
def magnitude_log_pool(
    outcomes: Outcomes,
    lambda_t: float = 0.0,
    lambda_e: float = 0.0,
    lambda_p: float = 0.0,
    scale_s: float = DEFAULT_SCALE_S,
    scale_j: float = DEFAULT_SCALE_J,
    scale_w: float = DEFAULT_SCALE_W,
) -> RewardBreakdown:
    """Gated reward with pool-normalised log costs.

    ``z_m = min(log1p(x) / log1p(scale_m), 1)``; correct ``2 - sum lambda_m z_m``, wrong
    ``-1``. Gate: lambdas >= 0, sum < 3, scales > 0.
    """
    scales = {"latency": scale_s, "energy": scale_j, "power": scale_w}
    z = {m: _pool(x, scales[m], log=True) for m, x in _metrics(outcomes).items()}
    return _gated(outcomes, z, {"latency": lambda_t, "energy": lambda_e, "power": lambda_p})


@register_reward("lagrangian")
def lagrangian(outcomes: Outcomes, mu: float = 1e-3) -> RewardBreakdown:
    """The Lagrangian of accuracy under an energy constraint: ``c - mu * E``.

    ``mu`` is in 1/J (the default, 1e-3, prices a kJ like one wrong answer). No analytical
    gate: a correct route beats a wrong one of the same query iff ``mu (E_correct -
    E_wrong) < 1``, which depends on the data: ``Reward`` checks it and warns (``GateWarning``).
    """
    if not (np.isfinite(mu) and mu >= 0):
        raise CoefficientValueError(f"lagrangian: mu must be a finite number >= 0 (a price per joule), got {mu}")
    return RewardBreakdown(outcomes.correct - mu * outcomes.energy_j, {"energy_cost": mu * outcomes.energy_j})


def _greenserv_gate(lambda_e: float = GREENSERV_GATE, scale_j: float = DEFAULT_SCALE_J) -> str | None:
    if not scale_j > 0:
        return f"scale_j must be > 0, got {scale_j}"
    if not 0 <= lambda_e < GREENSERV_GATE:
        return (
            f"lambda_e = {lambda_e:g} is outside [0, 0.5): a correct route at the dearest energy earns "
            f"{1 - 2 * lambda_e:g}, not above a wrong route at the cheapest (0)"
        )
    return None


def _greenserv_query_gate(lambda_e: float = GREENSERV_GATE) -> str | None:
    return _greenserv_gate(lambda_e)


def _greenserv(outcomes: Outcomes, lambda_e: float, e: np.ndarray) -> RewardBreakdown:
    total = (1.0 - lambda_e) * outcomes.correct - lambda_e * e
    return RewardBreakdown(total, {"z_energy": e})


# GreenServ's own setting (lambda_e = 0.5) sits exactly on the gate: an expensive correct
# route ties a cheap wrong one. It stays the default so the paper's comparison row can be
# reproduced with allow_ungated=True.
@register_reward("greenserv", gate=_greenserv_query_gate)
def greenserv(outcomes: Outcomes, lambda_e: float = GREENSERV_GATE) -> RewardBreakdown:
    """GreenServ's scalarisation: ``(1 - lambda_e) * c - lambda_e * e``.

    ``e`` is the route's joules min-max normalised within the query. Gate: ``0 <= lambda_e <
    0.5`` (at 0.5, GreenServ's setting, the dearest correct route ties the cheapest wrong
    one at 0, so it needs ``allow_ungated=True``).
    """
    return _greenserv(outcomes, lambda_e, _min_max(outcomes.energy_j))


@register_reward("greenserv_pool", gate=_greenserv_gate)
def greenserv_pool(outcomes: Outcomes, lambda_e: float = GREENSERV_GATE, scale_j: float = DEFAULT_SCALE_J) -> RewardBreakdown:
    """GreenServ with pool-normalised energy ``e = min(E / scale_j, 1)``; gate as ``greenserv``."""
    return _greenserv(outcomes, lambda_e, _pool(outcomes.energy_j, scale_j, log=False))


def register_centered(base: str, name: str | None = None) -> str:
    """Register ``centered_<base>``: the base reward minus the query's mean candidate reward.

    ``r'(i, a) = r(i, a) - mean_k r(i, k)``. It takes the base's coefficients and gate:
    subtracting a per-query constant keeps the order of a query's routes (so the oracle and
    the gate are unchanged) but removes the query's difficulty from the signal: a query
    that every model answers (or none does) is worth ~0, as with an advantage baseline.
    Returns the registered name.
    """
    entry = get_reward(base)
    name = name or f"centered_{base}"

    def centered(outcomes: Outcomes, **coefficients: float) -> RewardBreakdown:
        result = entry.fn(outcomes, **coefficients)
        if not isinstance(result, RewardBreakdown):
            result = RewardBreakdown(np.asarray(result, dtype=np.float64))
        baseline = result.total.mean(axis=-1, keepdims=True)
        return RewardBreakdown(result.total - baseline, {**result.components, "query_mean": np.broadcast_to(baseline, result.total.shape)})

    # The registry reads coefficient names and defaults from the signature: keep the base's.
    centered.__signature__ = inspect.signature(entry.fn)  # type: ignore[attr-defined]
    centered.__doc__ = f"``{base}`` centered by the query's mean candidate reward.\n\n{entry.doc}"
    centered.__name__ = name
    register_reward(name, gate=entry.gate)(centered)
    return name


CENTERED_GATED_RANK = register_centered("gated_rank")


def pool_scales(tournament: Tournament, split: str | None = "train") -> dict[str, float]:
    """Pool constants for the ``*_pool`` variants: the largest per-model mean seconds,
    joules and watts on ``split`` (so the dearest model's average route has z = 1)."""
    rows = tournament.split_rows(split)
    o = tournament.outcomes(rows)
    return {
        "scale_s": float(o.latency_s.mean(axis=0).max()),
        "scale_j": float(o.energy_j.mean(axis=0).max()),
        "scale_w": float(o.mean_power_w.mean(axis=0).max()),
    }


VARIANTS: tuple[str, ...] = (
    "magnitude_linear_query",
    "magnitude_log_query",
    "magnitude_linear_pool",
    "magnitude_log_pool",
    CENTERED_GATED_RANK,
    "lagrangian",
    "greenserv",
    "greenserv_pool",
)
