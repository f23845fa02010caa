"""Reward functions: a registry of pure functions vectorized over the K candidates.

A reward function takes the ``Outcomes`` of a block of ``n`` queries (``[n, K]`` arrays) and
keyword coefficients, and returns a ``RewardBreakdown``: the ``[n, K]`` reward of routing each
query to each candidate, plus named ``[n, K]`` components (shown in ``info``). The env, the
oracle and batched evaluation all read the same matrix, so they can never disagree.

Register your own with ``@register_reward("name")``; it then works in ``RoutingEnv``,
every agent and ``routing-gym compare``::

    @register_reward("accuracy_minus_joules")
    def accuracy_minus_joules(outcomes, mu=1e-3):
        return RewardBreakdown(outcomes.correct - mu * outcomes.energy_j)

**Fractional correctness.** ``correct`` in [0, 1] is read as a probability of success
(e.g. a pass rate over samples): every reward here is the *expected* reward,
``c * r_correct + (1 - c) * r_wrong``. For 0/1 correctness this is the plain reward.
"""

from __future__ import annotations

import contextlib
import inspect
import numbers
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np

from routing_gym.errors import GateViolationError, UnknownNameError, UsageError
from routing_gym.tournament import Outcomes, Tournament

DEFAULT_INVALID_PENALTY = -2.0
# The reference paper's RL energy coefficient: the one default of every env, compare and the
# agents that train on their own objective.
DEFAULT_COEFFICIENTS: dict[str, float] = {"lambda_e": 0.4}
WRONG_REWARD = -1.0
CORRECT_BASE = 2.0


@dataclass
class RewardBreakdown:
    """``total[n, K]`` plus named ``[n, K]`` components (penalties, bonuses)."""

    total: np.ndarray
    components: dict[str, np.ndarray] = field(default_factory=dict)


RewardFn = Callable[..., RewardBreakdown]


@dataclass(frozen=True)
class RewardEntry:
    name: str
    fn: RewardFn
    gate: Callable[..., str | None] | None  # returns why the gate breaks, or None
    defaults: dict[str, Any]
    doc: str


REWARDS: dict[str, RewardEntry] = {}


def register_reward(name: str, gate: Callable[..., str | None] | None = None) -> Callable[[RewardFn], RewardFn]:
    """Register ``fn(outcomes, **coefficients) -> RewardBreakdown | ndarray`` under ``name``.

    ``gate(**coefficients)`` may return a string explaining why those coefficients let a
    correct route score at or below a wrong one (``None`` when the gate holds). Rewards
    without an analytical gate are checked on the data each time a ``Reward`` scores
    outcomes (``check_gate_on_data``): a query where some correct route scores at or below a
    wrong one emits a ``GateWarning`` naming the query and both rewards (a warning, not an
    error, because such rewards are studied on purpose; ``allow_ungated=True`` silences it,
    ``warnings.simplefilter("error", GateWarning)`` makes it fatal).
    """

    def decorator(fn: RewardFn) -> RewardFn:
        if name in REWARDS and REWARDS[name].fn is not fn:
            raise ValueError(f"reward {name!r} is already registered (by {REWARDS[name].fn.__module__})")
        params = inspect.signature(fn).parameters
        defaults = {k: p.default for k, p in list(params.items())[1:] if p.default is not inspect.Parameter.empty}
        REWARDS[name] = RewardEntry(name, fn, gate, defaults, inspect.getdoc(fn) or "")
        return fn

    return decorator


def get_reward(name: str) -> RewardEntry:
    if name not in REWARDS:
        raise UnknownNameError("reward", name, list(REWARDS), hint="`routing-gym rewards` describes each; a reward "
                               "from your own module needs --import MODULE (or path/to/file.py) on the command line")
    return REWARDS[name]


def resolve_coefficients(reward: str, coefficients: Mapping[str, Any] | None) -> dict[str, Any]:
    """``coefficients`` as a dict; None means ``DEFAULT_COEFFICIENTS`` restricted to those the
    reward takes (so ``gated_rank`` defaults to lambda_e = 0.4 and a reward without lambda_e to {})."""
    if coefficients is not None:
        return dict(coefficients)
    takes = get_reward(reward).defaults
    return {k: v for k, v in DEFAULT_COEFFICIENTS.items() if k in takes}


def rank_penalty(values: np.ndarray) -> np.ndarray:
    """Ascending rank of each candidate among the query's K, scaled to [0, 1].

    Tie rule: tied values share the lowest rank of their group ("min" / competition
    ranking), so identical costs get identical penalties and the cheapest is always 0.
    ``[85, 95, 280, 3800] -> [0, 1/3, 2/3, 1]``; ``[10, 10, 20] -> [0, 0, 1]``. With K = 1
    the penalty is 0. Only the order matters: any strictly increasing rescaling of the
    values (joules to kWh, log joules) gives the same penalties.

    A NaN cost raises ``ValueError`` naming the query and candidate: every comparison with
    NaN is false, so it would otherwise rank as the cheapest model.
    """
    values = np.asarray(values, dtype=np.float64)
    if np.isnan(values).any():
        position = np.argwhere(np.isnan(values))[0]
        raise ValueError(
            f"rank_penalty: NaN cost at index {tuple(int(i) for i in position)} (query, candidate) of "
            f"{np.isnan(values).sum()} NaN value(s); a NaN cannot be ranked: fill in or drop that outcome"
        )
    k = values.shape[-1]
    if k <= 1:
        return np.zeros_like(values)
    return _min_rank(values) / (k - 1)


def _min_rank(values: np.ndarray) -> np.ndarray:
    """0-based competition rank along the last axis: how many candidates cost strictly less.

    O(K^2) per query, which for pools of tens of models beats sorting and avoids importing
    scipy.stats (1.4 s) at start-up.
    """
    return (values[..., None, :] < values[..., :, None]).sum(axis=-1).astype(np.float64)


def _gated_rank_gate(lambda_t: float = 0.0, lambda_e: float = 0.0, lambda_p: float = 0.0) -> str | None:
    coefficients = {"lambda_t": lambda_t, "lambda_e": lambda_e, "lambda_p": lambda_p}
    negative = {k: v for k, v in coefficients.items() if v < 0}
    if negative:
        return f"penalty coefficients must be >= 0, got {negative}"
    worst = CORRECT_BASE - sum(coefficients.values())
    if worst <= WRONG_REWARD:
        return (
            f"lambda_t + lambda_e + lambda_p = {sum(coefficients.values()):g} >= 3: the most expensive correct "
            f"route would earn {worst:g}, not above a wrong route ({WRONG_REWARD:g})"
        )
    return None


@register_reward("gated_rank", gate=_gated_rank_gate)
def gated_rank(outcomes: Outcomes, lambda_t: float = 0.0, lambda_e: float = 0.0, lambda_p: float = 0.0) -> RewardBreakdown:
    """The reference paper's gated rank reward.

    For query i and candidate a, ``z_t``, ``z_e``, ``z_p`` are the rank penalties
    (``rank_penalty``) of a's latency, energy and mean power among the query's K candidates.
    A correct route earns ``2 - (lambda_t z_t + lambda_e z_e + lambda_p z_p)``, a wrong route
    ``-1``; fractional correctness c gives ``c * correct + (1 - c) * wrong``. The gate holds
    (every correct route above every wrong one) iff all lambdas are >= 0 and sum below 3.
    """
    z_t, z_e, z_p = (rank_penalty(x) for x in (outcomes.latency_s, outcomes.energy_j, outcomes.mean_power_w))
    correct_reward = CORRECT_BASE - (lambda_t * z_t + lambda_e * z_e + lambda_p * z_p)
    total = outcomes.correct * correct_reward + (1.0 - outcomes.correct) * WRONG_REWARD
    return RewardBreakdown(total, {"z_latency": z_t, "z_energy": z_e, "z_power": z_p})


class GateWarning(UserWarning):
    """A reward without an analytical gate lets a correct route score at or below a wrong one
    on the data it was evaluated on."""


class CoefficientTypeError(UsageError, TypeError):
    """A reward coefficient is not a number (a string, None, a bool) or not one the reward takes."""


class CoefficientValueError(UsageError, ValueError):
    """A reward coefficient is NaN or infinite, or out of the range the reward accepts."""


def _check_number(owner: str, name: str, value: object) -> None:
    """A coefficient must be a finite real number: not a string, None, bool, NaN or inf."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise CoefficientTypeError(f"{owner}: {name} must be a number, got {type(value).__name__} {value!r}")
    if not np.isfinite(float(value)):
        raise CoefficientValueError(f"{owner}: {name} must be finite, got {value!r}")


@dataclass(frozen=True)
class Reward:
    """A registered reward bound to coefficients; call it on ``Outcomes``.

    Every coefficient and ``invalid_penalty`` must be a finite real number (``TypeError``
    for a string or None, ``ValueError`` for NaN or inf, each naming the coefficient). A
    reward with an analytical gate rejects coefficients that break it at construction;
    one without (``lagrangian``, most user rewards) is checked on the data when called
    and warns with ``GateWarning``, once per ``Reward`` (see ``register_reward``).
    """

    name: str = "gated_rank"
    coefficients: dict[str, float] = field(default_factory=dict)
    invalid_penalty: float = DEFAULT_INVALID_PENALTY
    allow_ungated: bool = False
    # set once the data-gate warning was shown, so a reward scored per batch warns once
    _gate_warned: bool = field(default=False, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        entry = get_reward(self.name)
        unknown = set(self.coefficients) - set(entry.defaults)
        if unknown:
            raise CoefficientTypeError(
                f"reward {self.name!r} has no coefficient(s) {sorted(unknown)}; it takes {sorted(entry.defaults)}"
            )
        for name, value in self.coefficients.items():
            _check_number(f"reward {self.name!r}", f"coefficient {name!r}", value)
        _check_number(f"reward {self.name!r}", "invalid_penalty", self.invalid_penalty)
        if self.invalid_penalty >= 0:
            raise CoefficientValueError(f"invalid_penalty must be a finite negative number, got {self.invalid_penalty}")
        if entry.gate is not None and not self.allow_ungated:
            why = entry.gate(**self.coefficients)
            if why:
                raise GateViolationError(
                    f"reward {self.name!r} with {self.coefficients}: {why}. To study it anyway pass allow_ungated=True "
                    "(command line: --allow-ungated; sweep config: allow_ungated: true)"
                )

    @classmethod
    def of(cls, spec: Reward | Mapping[str, float] | None) -> Reward:
        """``spec`` itself if it is a ``Reward``, else ``gated_rank`` with those coefficients
        (none: all zero)."""
        return spec if isinstance(spec, Reward) else cls("gated_rank", dict(spec or {}))

    @property
    def entry(self) -> RewardEntry:
        return get_reward(self.name)

    def __call__(self, outcomes: Outcomes) -> RewardBreakdown:
        result = self.entry.fn(outcomes, **self.coefficients)
        if not isinstance(result, RewardBreakdown):
            result = RewardBreakdown(np.asarray(result, dtype=np.float64))
        if result.total.shape != outcomes.correct.shape:
            raise ValueError(
                f"reward {self.name!r} returned shape {result.total.shape}, expected {outcomes.correct.shape}"
            )
        if self.entry.gate is None and not self.allow_ungated:
            self._warn_if_gate_breaks(result.total, outcomes.correct)
        return result

    def _warn_if_gate_breaks(self, total: np.ndarray, correct: np.ndarray) -> None:
        broken = check_gate_on_data(total, correct)
        if not broken.size or self._gate_warned:
            return
        object.__setattr__(self, "_gate_warned", True)
        row = int(broken[0])
        worst_correct = float(np.where(correct[row] >= 1.0, total[row], np.inf).min())
        best_wrong = float(np.where(correct[row] <= 0.0, total[row], -np.inf).max())
        warnings.warn(
            f"{self.describe()} has no analytical gate and breaks it on this data: in {broken.size} of "
            f"{len(total)} queries some correct route scores at or below a wrong one (first: row {row} of the scored "
            f"queries, "
            f"a correct route earns {worst_correct:g}, a wrong one {best_wrong:g}). Lower the coefficients, or "
            f"pass allow_ungated=True (--allow-ungated) to study it anyway.",
            GateWarning,
            stacklevel=3,
        )

    def matrix(self, tournament: Tournament, rows: np.ndarray | None = None) -> np.ndarray:
        """The ``[n, K]`` reward of every route for ``rows`` of the tournament."""
        return self(tournament.outcomes(rows)).total

    def describe(self) -> str:
        coefficients = ", ".join(f"{k}={v:g}" for k, v in sorted(self.coefficients.items()))
        return f"{self.name}({coefficients})"


def check_gate_on_data(reward_matrix: np.ndarray, correct: np.ndarray) -> np.ndarray:
    """Rows (queries) where some fully correct route does not beat every fully wrong one."""
    correct_min = np.where(correct >= 1.0, reward_matrix, np.inf).min(axis=1)
    wrong_max = np.where(correct <= 0.0, reward_matrix, -np.inf).max(axis=1)
    return np.flatnonzero(correct_min <= wrong_max)


def data_gate_note(reward: Reward, tournament: Tournament) -> str | None:
    """For a reward without an analytical gate: one sentence saying on how many of the
    tournament's queries (all splits) some correct route scores at or below a wrong one, or
    None when the gate holds (or ``allow_ungated`` was asked for). ``compare`` records it in
    its notes and warns once per (reward, tournament) instead of once per env it builds."""
    if reward.entry.gate is not None or reward.allow_ungated:
        return None
    silent = Reward(reward.name, dict(reward.coefficients), reward.invalid_penalty, allow_ungated=True)
    broken = check_gate_on_data(silent.matrix(tournament), tournament.correct)
    if not broken.size:
        return None
    return (f"{reward.describe()} has no analytical gate and breaks it on {tournament.card.name}: in {broken.size} of "
            f"{tournament.n_queries} queries some correct route scores at or below a wrong one (lower the coefficients, "
            "or pass --allow-ungated to state that this is intended)")


@contextlib.contextmanager
def gate_reported() -> Iterator[None]:
    """Silence ``GateWarning`` inside: the caller has checked the gate on the whole tournament
    and reported it once (``data_gate_note``), so each env, cell and table it builds stays quiet."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GateWarning)
        yield


def gate_status(entry: RewardEntry) -> str:
    """How a reward's gate is checked, and whether its default coefficients pass it."""
    if entry.gate is None:
        return "none: checked on the data (GateWarning)"
    return "analytical" + ("" if entry.gate(**entry.defaults) is None else "; the defaults break it (allow_ungated)")


def reward_catalog() -> list[dict[str, Any]]:
    """Every registered reward (``routing-gym rewards``): name, coefficients with their
    defaults, gate status and the first line of its docstring."""
    return [{"name": name, "coefficients": dict(entry.defaults), "gate": gate_status(entry),
             "meaning": (entry.doc.splitlines() or [""])[0].replace("``", "")}
            for name, entry in sorted(REWARDS.items())]


TIE_BREAKS = ("auto", "largest", "cheapest", "first")


def oracle_targets(
    tournament: Tournament,
    reward: Reward | dict[str, float] | None = None,
    tie_break: str = "auto",
    rows: np.ndarray | None = None,
) -> np.ndarray:
    """Per query, the route with the highest reward (the SFT target and the oracle agent).

    ``reward`` is a ``Reward`` or a dict of ``gated_rank`` coefficients (default all zero).
    Among routes tied at the best reward, ``tie_break`` picks:

    - ``"largest"``: the model with the most parameters (then the lowest energy) — the paper's
      accuracy-only target, where every correct route earns 2;
    - ``"cheapest"``: the lowest-energy model (then the fewest parameters);
    - ``"first"``: the lowest model index;
    - ``"auto"`` (default): ``"largest"`` when every coefficient is zero, else ``"cheapest"``.

    With gated_rank and only ``lambda_e > 0`` the best route is therefore the lowest-energy
    correct model. **When every candidate is wrong** all routes tie at -1 and the rule is
    always the cheapest model (nothing is bought by spending more joules), whatever
    ``tie_break`` says.
    """
    if tie_break not in TIE_BREAKS:
        raise UnknownNameError("tie_break", tie_break, list(TIE_BREAKS))
    reward = Reward.of(reward)
    matrix = reward.matrix(tournament, rows)
    outcomes = tournament.outcomes(rows)
    n, k = matrix.shape
    if tie_break == "auto":
        tie_break = "largest" if all(v == 0 for v in reward.coefficients.values()) else "cheapest"
    params = np.nan_to_num(tournament.models["params_b"].to_numpy(dtype=float), nan=0.0)
    energy_rank = _min_rank(outcomes.energy_j)
    size_rank = np.broadcast_to(_min_rank(params), (n, k))
    keys = {
        "largest": -size_rank * (k + 1) + energy_rank,
        "cheapest": energy_rank * (k + 1) + size_rank,
        "first": np.broadcast_to(np.arange(k, dtype=float), (n, k)),
    }
    all_wrong = outcomes.correct.max(axis=1) <= 0
    key = np.where(all_wrong[:, None], keys["cheapest"], keys[tie_break])
    best = matrix.max(axis=1, keepdims=True)
    tied = matrix >= best - 1e-9 * np.maximum(1.0, np.abs(best))
    return np.where(tied, key, np.inf).argmin(axis=1)


def sampled_targets(
    tournament: Tournament,
    reward: Reward | dict[str, float] | None,
    temperature: float,
    rng: np.random.Generator,
    rows: np.ndarray | None = None,
) -> np.ndarray:
    """Per query, a route drawn from the Boltzmann distribution ``softmax(reward / temperature)``
    over the K models (reward-weighted SFT targets).

    ``oracle_targets`` gives each query its single best route; with an energy term that is the
    cheapest correct model, so a learner that cannot tell which small model happens to be right
    learns to route small and is mostly wrong. Imitating these draws instead fits, for questions
    that look alike, the mean of their Boltzmann distributions: every correct route earns
    weight, a model right where the others fail earns the most, and the fitted policy stays
    spread rather than a one-hot guess (so spread that, on specialist-pool, a short GRPO run
    moved every greedy choice onto the most accurate model).
    """
    from scipy.special import softmax  # scipy stays out of import time

    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    reward = Reward.of(reward)
    probs = softmax(reward.matrix(tournament, rows) / temperature, axis=1)
    cumulative = probs.cumsum(axis=1)
    draws = rng.random((len(probs), 1))
    return np.minimum((cumulative < draws).sum(axis=1), probs.shape[1] - 1)


def predicted_targets(
    tournament: Tournament,
    reward: Reward | dict[str, float] | None,
    texts: list[str],
    rows: np.ndarray | None = None,
    alpha: float = 3.0,
    read_texts: list[str] | None = None,
) -> np.ndarray:
    """Per query, the route with the highest *predicted* reward: a ridge regression of every
    model's reward on TF-IDF features of ``texts`` (unigrams and bigrams, one text per row of
    ``rows``), fitted on those rows and read back on them, or on ``read_texts`` when given (other
    queries' texts, e.g. held-out ones, to ask how well the regression routes queries it never saw).

    ``oracle_targets`` labels each query with the best route of one noisy draw: where a small
    model happened to be right it is the target, although on questions that read alike the
    small model is mostly wrong. The regression averages those draws over questions whose texts
    share words, so the target is the route that is best *in expectation for questions like
    this one*, which is what a router that reads the text can learn. ``alpha`` is the ridge
    penalty (larger: smoother over texts).
    """
    reward = Reward.of(reward)
    matrix = reward.matrix(tournament, rows)
    if len(texts) != len(matrix):
        raise ValueError(f"predicted_targets: {len(texts)} texts for {len(matrix)} rows")
    return text_regression(texts, matrix, texts if read_texts is None else read_texts, alpha).argmax(axis=1)


def text_regression(texts: Sequence[str], values: np.ndarray, read_texts: Sequence[str], alpha: float = 3.0) -> np.ndarray:
    """``[len(read_texts), K]``: a ridge regression of ``values`` ([n, K], one row per text) on
    TF-IDF features (unigrams and bigrams) of ``texts``, read on ``read_texts``."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import Ridge

    if not alpha > 0:
        raise ValueError(f"alpha must be > 0, got {alpha}")
    vectorizer = TfidfVectorizer(sublinear_tf=True, ngram_range=(1, 2), min_df=2)
    regression = Ridge(alpha=alpha).fit(vectorizer.fit_transform(list(texts)), values)
    return np.asarray(regression.predict(vectorizer.transform(list(read_texts))), dtype=np.float64)
