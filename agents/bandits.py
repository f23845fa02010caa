"""Linear contextual bandits in plain numpy: LinUCB, epsilon-greedy and linear Thompson sampling.

Written to be read and modified (CleanRL style: one file, no framework). All three share the
same loop and the same per-arm ridge regression; they differ only in ``select``:

    for each training query (online, through the context's env, bandit feedback):
        x      = features(observation)            # TF-IDF + SVD, benchmark one-hot, bias
        a      = select(x)                        # the exploration rule
        r      = env.step(a)                      # only the chosen model's outcome is revealed
        update arm a's ridge regression with (x, r)

Regret needs the best route's reward, which a bandit never sees: the evaluator logs it through
the context's step hooks (``compare`` does), not the agent.

After training the policy is frozen and greedy: ``argmax_a  theta_a . x`` on held-out queries.

Per-arm ridge regression (disjoint model, Li et al. 2010): ``A_a = ridge I + sum x x^T`` and
``b_a = sum r x``, ``theta_a = A_a^{-1} b_a``. We keep ``A_a^{-1}`` directly and update it
with the Sherman-Morrison formula, so one update is O(d^2) instead of a d x d inverse.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from routing_gym.envs.observation import ObservationBatch
from routing_gym.eval.frontier import CostKnob
from routing_gym_agents.base import Agent, FitContext, featurizer_for_context
from routing_gym_agents.registry import register_agent


# One bandit trained per energy coefficient of the training reward (``routing-gym frontier``);
# shared by every agent that learns the env's reward online (also agents/vw.py).
REWARD_LAMBDA_KNOB = CostKnob("lambda_e", applies="reward", cheaper_when="higher", grid=(0.0, 0.4, 0.8, 1.2, 1.6, 2.0, 2.4))


class RidgeArms:
    """K independent ridge regressions ``r ~ theta_a . x`` that share one feature space."""

    def __init__(self, n_arms: int, dim: int, ridge: float = 1.0):
        if ridge <= 0:
            raise ValueError(f"ridge regularisation must be > 0, got {ridge}")
        self.A_inv = np.repeat(np.eye(dim)[None] / ridge, n_arms, axis=0)  # [K, d, d]
        self.b = np.zeros((n_arms, dim))  # [K, d]
        self.theta = np.zeros((n_arms, dim))  # [K, d], kept equal to A_inv @ b
        self.counts = np.zeros(n_arms, dtype=np.int64)

    def means(self, x: np.ndarray) -> np.ndarray:
        """Predicted reward of every arm for one context ``x[d]`` (or a batch ``x[n, d]``)."""
        return x @ self.theta.T

    def variances(self, x: np.ndarray) -> np.ndarray:
        """``x^T A_a^{-1} x`` for every arm: how unsure each arm's estimate is at ``x``."""
        return (self.A_inv @ x) @ x  # [K, d] then [K]; faster than the equivalent einsum

    def update(self, arm: int, x: np.ndarray, reward: float) -> None:
        A_inv = self.A_inv[arm]
        Ax = A_inv @ x
        A_inv -= np.outer(Ax, Ax) / (1.0 + x @ Ax)  # Sherman-Morrison: (A + x x^T)^{-1}
        self.b[arm] += reward * x
        self.theta[arm] = A_inv @ self.b[arm]
        self.counts[arm] += 1


class LinearBandit(Agent):
    """Shared online loop; subclasses implement ``select`` (the exploration rule).

    Cost knob: the training reward's energy coefficient ``lambda_e``; one bandit is trained per
    value (``routing-gym frontier``). Training budget: ``epochs``, passes over the training
    split (each a new seeded query order); every pass is more online decisions, so regret
    logged over training grows with it (``experiments/routers_study.py`` measures content gain
    against passes on mmlu-pro)."""

    feedback = "bandit"
    cost_knob = REWARD_LAMBDA_KNOB

    def __init__(self, features: str = "tfidf-svd", dim: int = 32, ridge: float = 1.0, epochs: int = 1):
        if epochs < 1:
            raise ValueError(f"epochs must be >= 1, got {epochs}")
        self.feature_config: dict[str, Any] = {"kind": features, "dim": dim, "bias": True}
        self.ridge = ridge
        self.epochs = epochs
        self.featurizer = None  # the ObservationFeaturizer, fitted on the training observations
        self.arms: RidgeArms | None = None

    # ------------------------------------------------------------------ the exploration rule
    @abstractmethod
    def select(self, x: np.ndarray, step: int, rng: np.random.Generator) -> int:
        """The arm to pull for context ``x`` at online step ``step``."""

    # ------------------------------------------------------------------ what the bandit sees and learns
    def prepare(self, ctx: FitContext) -> None:
        """Fit everything the contexts need on the training observations (never held-out ones)."""
        self.featurizer = featurizer_for_context(ctx, **self.feature_config)

    def contexts(self, batch: ObservationBatch) -> np.ndarray:
        """``float64 [n, d]`` contexts of a batch of observations (training and routing alike)."""
        return self.featurizer.transform(batch).astype(np.float64)

    def _context_table(self, batch: ObservationBatch) -> dict[tuple[str, int], np.ndarray]:
        return {(text, int(b)): x for text, b, x in zip(batch.texts, batch.benchmarks, self.contexts(batch))}

    def _context_of(self, obs: dict[str, Any], table: dict[tuple[str, int], np.ndarray]) -> np.ndarray:
        x = table.get((obs["text"], int(obs["benchmark"])))
        return x if x is not None else self.contexts(ObservationBatch.from_observations([obs]))[0]

    def learning_reward(self, reward: float, info: dict[str, Any]) -> float:
        """The signal the arms regress on; the env's reward unless a variant says otherwise."""
        return reward

    def objective(self, ctx: FitContext) -> str:
        """The reward the arms learn (recorded in the fit logs)."""
        return ctx.objective

    # ------------------------------------------------------------------ online training
    def fit(self, ctx: FitContext) -> dict[str, Any]:
        self.prepare(ctx)
        env = ctx.make_env()
        n_steps = self.epochs * ctx.n_train
        rng = np.random.default_rng(ctx.seed)
        # Contexts depend on the question (text, benchmark) alone, so the training questions'
        # are computed in one batch and each step looks its observation up; an observation the
        # table lacks (another env's questions) is featurized on the spot, with the same result.
        table = self._context_table(ctx.train_observations())
        obs, _ = env.reset(seed=ctx.seed)  # seeds the query order (a new permutation each pass)
        x = self._context_of(obs, table)
        self.arms = RidgeArms(ctx.n_models, len(x), self.ridge)
        rewards = np.empty(n_steps)
        actions = np.empty(n_steps, dtype=np.int64)
        for step in tqdm(range(n_steps), desc=f"{self.name} online", disable=not ctx.progress):
            a = self.select(x, step, rng)
            obs, r, terminated, truncated, info = env.step(a)
            self.arms.update(a, x, self.learning_reward(r, info))
            rewards[step], actions[step] = r, a
            if terminated or truncated:
                obs, _ = env.reset()
            x = self._context_of(obs, table)
        return {
            "objective": self.objective(ctx),
            "reward": rewards.tolist(),
            "actions": actions.tolist(),
            "arm_counts": self.arms.counts.tolist(),
        }

    # ------------------------------------------------------------------ frozen greedy policy
    def act_batch(self, batch: ObservationBatch) -> np.ndarray:
        if self.arms is None:
            raise RuntimeError(f"{self.name}: call fit() before act_batch()")
        return self.arms.means(self.contexts(batch)).argmax(axis=1)


def _argmax_random_ties(scores: np.ndarray, rng: np.random.Generator) -> int:
    """Argmax that breaks exact ties at random (early on every arm scores the same)."""
    best = np.flatnonzero(scores >= scores.max() - 1e-12)
    return int(best[0] if len(best) == 1 else rng.choice(best))


@register_agent("linucb")
class LinUCB(LinearBandit):
    """Disjoint LinUCB: pick ``argmax theta_a . x + alpha * sqrt(x^T A_a^{-1} x)``."""

    name = "linucb"

    def __init__(self, alpha: float = 1.0, **kwargs: Any):
        super().__init__(**kwargs)
        if alpha < 0:
            raise ValueError(f"alpha must be >= 0, got {alpha}")
        self.alpha = alpha

    def select(self, x: np.ndarray, step: int, rng: np.random.Generator) -> int:
        ucb = self.arms.means(x) + self.alpha * np.sqrt(self.arms.variances(x))
        return _argmax_random_ties(ucb, rng)


@register_agent("epsilon-greedy")
class EpsilonGreedy(LinearBandit):
    """With probability ``eps_t`` a uniform random arm, else the greedy one.

    ``eps_t = epsilon * half_life / (half_life + t)``: exploration halves after ``half_life``
    steps and keeps decaying like 1/t, the classic schedule with a sublinear regret bound.
    """

    name = "epsilon-greedy"

    def __init__(self, epsilon: float = 0.3, half_life: float = 200.0, **kwargs: Any):
        super().__init__(**kwargs)
        if not 0 <= epsilon <= 1:
            raise ValueError(f"epsilon must be in [0, 1], got {epsilon}")
        if half_life <= 0:
            raise ValueError(f"half_life must be > 0 steps, got {half_life}")
        self.epsilon = epsilon
        self.half_life = half_life

    def epsilon_at(self, step: int) -> float:
        return self.epsilon * self.half_life / (self.half_life + step)

    def select(self, x: np.ndarray, step: int, rng: np.random.Generator) -> int:
        if rng.random() < self.epsilon_at(step):
            return int(rng.integers(len(self.arms.counts)))
        return _argmax_random_ties(self.arms.means(x), rng)


@register_agent("thompson")
class LinearThompson(LinearBandit):
    """Linear Thompson sampling: sample ``theta_a ~ N(theta_hat_a, v^2 A_a^{-1})``, act greedily.

    Only ``theta_a . x`` matters for the choice, and for one context that is a 1-D normal
    ``N(theta_hat_a . x, v^2 x^T A_a^{-1} x)``: sampling it directly is exact and avoids a
    d x d Cholesky factor per arm and step.
    """

    name = "thompson"

    def __init__(self, v: float = 0.5, **kwargs: Any):
        super().__init__(**kwargs)
        if v < 0:
            raise ValueError(f"v (posterior scale) must be >= 0, got {v}")
        self.v = v

    def select(self, x: np.ndarray, step: int, rng: np.random.Generator) -> int:
        std = self.v * np.sqrt(self.arms.variances(x))
        return int(np.argmax(self.arms.means(x) + std * rng.standard_normal(len(std))))
