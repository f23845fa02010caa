"""A primal-dual (Lagrangian) router for an average energy budget (the paper's Eq. 7).

The constrained problem is ``max E[reward]  s.t.  E[joules per query] <= B``. Its Lagrangian
``E[reward] - mu (E[joules] / B - 1)`` is maximised per query by the route with the best
``reward_hat(x, a) - mu * joules_hat(x, a) / B``, and the multiplier ``mu >= 0`` is found
online by dual (sub)gradient ascent on the observed spend:

    mu <- clip(mu + dual_lr * (joules_t / B - 1), 0, mu_max)

so ``mu`` rises while the agent spends more than B per query and falls back to 0 when the
budget does not bind. Reward and joules are predicted per model by ridge regressions on the
shared text features (the bandits' ``RidgeArms``). While training, the agent is optimistic
about both: a LinUCB bonus ``alpha * width`` raises the predicted reward and lowers the
predicted joules by ``alpha * width * (running RMS energy residual)``, so a model once
mispredicted as dear is still retried. Feedback is bandit feedback: only the chosen model's
outcome is revealed.

Act-time pacing scales predicted joules by the realised / predicted ratio of the routes taken
in training (the argmax favours models whose cost is under-predicted).

Routing held-out queries (``act_batch``), no outcome is revealed, so by default the agent
keeps pacing on its *predicted* joules: the same dual update with ``joules_hat`` in place of
``joules``, in batch order (``pace_on_predictions=False`` freezes the trained ``mu``).
In ``BudgetRoutingEnv`` episodes (``run_budget_episodes``) it updates on the true joules.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from tqdm.auto import tqdm

from routing_gym.envs.budget_env import BudgetReport, BudgetRoutingEnv, budget_report, median_model_budget
from routing_gym.envs.observation import ObservationBatch
from routing_gym.errors import RoutingGymError
from routing_gym_agents.bandits import RidgeArms
from routing_gym_agents.base import Agent, FitContext, featurizer_for_context
from routing_gym_agents.registry import register_agent

SPEND_DECAY = 0.998  # running statistics forget with a horizon of ~500 routes


@register_agent("lagrangian")
class LagrangianAgent(Agent):
    """Primal-dual router: ``argmax_a reward_hat - mu * joules_hat / B`` with ``mu`` adapted online.

    Args:
        budget_j: B, mean joules per query; None: the training split's median per-model mean
            joules (``BudgetRoutingEnv``'s default).
        dual_lr: step size of the multiplier (per query, on the spend in units of B).
        mu_init: the multiplier at the start of training.
        mu_max: cap on the multiplier (keeps one unlucky stretch from freezing the router).
        alpha: optimism while training: bonus on the predicted reward and discount on the
            predicted joules, both ``alpha`` times the arm's confidence width (0: greedy).
        features / dim / ridge / epochs: as the linear bandits.
        pace_on_predictions: keep adapting ``mu`` on predicted joules while routing held-out
            queries (``act_batch``).
    """

    name = "lagrangian"
    feedback = "bandit"

    def __init__(
        self,
        budget_j: float | None = None,
        dual_lr: float = 0.05,
        mu_init: float = 0.0,
        mu_max: float = 20.0,
        alpha: float = 0.5,
        features: str = "tfidf-svd",
        dim: int = 32,
        ridge: float = 1.0,
        epochs: int = 1,
        pace_on_predictions: bool = True,
    ):
        if budget_j is not None and not (np.isfinite(budget_j) and budget_j > 0):
            raise ValueError(f"budget_j must be a finite number > 0 (mean joules per query), got {budget_j}")
        if dual_lr <= 0 or mu_init < 0 or mu_max <= 0 or alpha < 0 or epochs < 1:
            raise ValueError(
                f"need dual_lr > 0, mu_init >= 0, mu_max > 0, alpha >= 0, epochs >= 1; got dual_lr={dual_lr}, "
                f"mu_init={mu_init}, mu_max={mu_max}, alpha={alpha}, epochs={epochs}"
            )
        self.budget_j = budget_j
        self.dual_lr = dual_lr
        self.mu_init = mu_init
        self.mu_max = mu_max
        self.alpha = alpha
        self.feature_config: dict[str, Any] = {"kind": features, "dim": dim, "bias": True}
        self.ridge = ridge
        self.epochs = epochs
        self.pace_on_predictions = pace_on_predictions
        self.featurizer = None
        self.reward_arms: RidgeArms | None = None
        self.energy_arms: RidgeArms | None = None
        self.budget_: float | None = None  # the B in use (resolved at fit, or set by an episode runner)
        self.energy_scale_: float | None = None  # joules per unit of the energy regression (B at fit)
        self.mu: float = mu_init
        # Running (predicted, realised) joules of the routes taken: the regression is
        # optimistic about the route it picks (the argmax favours under-predicted costs), and
        # pacing on predictions scales them by realised / predicted.
        self.spend_: np.ndarray = np.zeros(2)
        self.energy_noise_: float = 1.0  # running RMS residual of the energy regression (scaled units)

    # ------------------------------------------------------------------ the primal-dual rule
    def scores(self, x: np.ndarray, bonus: float = 0.0) -> np.ndarray:
        """Lagrangian score of every model for contexts ``x`` (``[d]`` or ``[n, d]``)."""
        self._check_fitted()
        reward, joules = self.reward_arms.means(x), self.predicted_joules(x)
        if bonus > 0:
            width = np.sqrt(self.reward_arms.variances(x))  # both heads share each arm's design
            reward = reward + bonus * width
            # Optimism about the cost too: an arm once believed dear would never be retried.
            joules = np.maximum(joules - bonus * width * self.energy_noise_ * self.energy_scale_, 0.0)
        return reward - self.mu * joules / self.budget_

    def predicted_joules(self, x: np.ndarray) -> np.ndarray:
        """Predicted joules of every model for contexts ``x``."""
        return self.energy_arms.means(x) * self.energy_scale_

    @property
    def spend_calibration(self) -> float:
        """Realised over predicted joules of the routes taken in training (1 before any)."""
        predicted, realised = self.spend_
        return float(realised / predicted) if predicted > 0 and realised > 0 else 1.0

    def best_route(self, x: np.ndarray, bonus: float = 0.0) -> int:
        """The Lagrangian argmax for one context (the primal step; not an acting entry point)."""
        return int(np.argmax(self.scores(x, bonus)))

    def dual_step(self, joules: float) -> None:
        """``mu <- clip(mu + dual_lr * (joules / B - 1), 0, mu_max)``."""
        self.mu = float(np.clip(self.mu + self.dual_lr * (joules / self.budget_ - 1.0), 0.0, self.mu_max))

    def observe(self, x: np.ndarray, action: int, reward: float, joules: float) -> None:
        """Learn from one revealed outcome: both regressions and the multiplier."""
        predicted = float(self.predicted_joules(x)[action])
        self.spend_ = SPEND_DECAY * self.spend_ + np.array([max(predicted, 0.0), joules])
        residual = (joules - predicted) / self.energy_scale_
        self.energy_noise_ = float(np.sqrt(SPEND_DECAY * self.energy_noise_**2 + (1 - SPEND_DECAY) * residual**2))
        self.reward_arms.update(action, x, reward)
        self.energy_arms.update(action, x, joules / self.energy_scale_)
        self.dual_step(joules)

    # ------------------------------------------------------------------ training
    def fit(self, ctx: FitContext) -> dict[str, Any]:
        self.featurizer = featurizer_for_context(ctx, **self.feature_config)
        env = ctx.make_env()
        self.budget_ = float(self.budget_j) if self.budget_j is not None else median_model_budget(ctx.train_outcomes().energy_j)
        self.energy_scale_ = self.budget_
        self.mu = self.mu_init
        self.spend_ = np.zeros(2)
        self.energy_noise_ = 1.0
        n_steps = self.epochs * ctx.n_train
        joules, mus = np.empty(n_steps), np.empty(n_steps)
        correct = np.empty(n_steps)
        obs, _ = env.reset(seed=ctx.seed)
        x = self.features_of(ObservationBatch.from_observations([obs]), check=False)[0]
        self.reward_arms = RidgeArms(ctx.n_models, len(x), self.ridge)
        self.energy_arms = RidgeArms(ctx.n_models, len(x), self.ridge)
        for step in tqdm(range(n_steps), desc=f"{self.name} online", disable=not ctx.progress):
            a = self.best_route(x, self.alpha)
            obs, r, terminated, truncated, info = env.step(a)
            self.observe(x, a, r, info["energy_j"])
            joules[step], mus[step], correct[step] = info["energy_j"], self.mu, info["correct"]
            if terminated or truncated:
                obs, _ = env.reset()
            x = self.features_of(ObservationBatch.from_observations([obs]), check=False)[0]
        return {
            "objective": ctx.objective,
            "mu": mus.tolist(),
            "budget_j": self.budget_,
            "train_budget": budget_report(joules[None], correct[None], self.budget_).to_dict(),
        }

    # ------------------------------------------------------------------ routing held-out queries
    def features_of(self, batch: ObservationBatch, check: bool = True) -> np.ndarray:
        if check:
            self._check_fitted()
        return self.featurizer.transform(batch).astype(np.float64)

    def act_batch(self, batch: ObservationBatch) -> np.ndarray:
        """Greedy Lagrangian routes in batch order; with ``pace_on_predictions`` the multiplier
        keeps adapting on predicted joules (the trained ``mu`` is restored afterwards)."""
        X = self.features_of(batch)
        if not self.pace_on_predictions:
            return self.scores(X).argmax(axis=1)
        trained_mu = self.mu
        predicted = self.predicted_joules(X) * self.spend_calibration
        actions = np.empty(len(X), dtype=np.int64)
        for i, x in enumerate(X):
            actions[i] = self.best_route(x)
            self.dual_step(float(predicted[i, actions[i]]))
        self.mu = trained_mu
        return actions

    def _check_fitted(self) -> None:
        if self.reward_arms is None or self.featurizer is None:
            raise RoutingGymError(f"{self.name}: call fit(ctx) before routing")


def run_budget_episodes(
    agent: Agent, env: BudgetRoutingEnv, episodes: int, seed: int = 0, learn: bool = True
) -> tuple[BudgetReport, dict[str, np.ndarray]]:
    """Run ``episodes`` episodes of a ``BudgetRoutingEnv`` and report accuracy and violation.

    Every decision is made from the observation the env returned (the query it shows). A
    ``LagrangianAgent`` routes with its current multiplier and, with ``learn``, updates its
    regressions and multiplier on every revealed outcome; its B is set to the env's budget for
    the run (and restored after). Any other agent routes each observation with ``act``.
    Returns the report and ``[episodes, horizon]`` arrays (``energy_j``, ``correct``,
    ``reward``, ``actions``, plus ``mu`` for a Lagrangian agent).
    """
    if episodes < 1:
        raise ValueError(f"episodes must be >= 1, got {episodes}")
    base = env.unwrapped
    if not isinstance(base, BudgetRoutingEnv):
        raise RoutingGymError(f"run_budget_episodes needs a BudgetRoutingEnv, got {type(base).__name__}")
    shape = (episodes, base.horizon)
    out = {name: np.zeros(shape) for name in ("energy_j", "correct", "reward", "mu")}
    out["actions"] = np.zeros(shape, dtype=np.int64)
    lagrangian = isinstance(agent, LagrangianAgent)
    if lagrangian:
        saved_budget, agent.budget_ = agent.budget_, base.budget_j
    try:
        for episode in range(episodes):
            obs, _ = env.reset(seed=seed if episode == 0 else None)
            for step in range(base.horizon):
                if lagrangian:
                    x = agent.features_of(ObservationBatch.from_observations([obs]))[0]
                    a = agent.best_route(x)
                else:
                    a = agent.act(obs)
                obs, r, terminated, _, info = env.step(a)
                if lagrangian and learn:
                    agent.observe(x, a, r, info["energy_j"])
                out["energy_j"][episode, step], out["correct"][episode, step] = info["energy_j"], info["correct"]
                out["reward"][episode, step], out["actions"][episode, step] = r, a
                out["mu"][episode, step] = agent.mu if lagrangian else np.nan
            if not terminated:
                raise RoutingGymError("BudgetRoutingEnv did not end its episode after `horizon` steps")
    finally:
        if lagrangian:
            agent.budget_ = saved_budget
    return budget_report(out["energy_j"], out["correct"], base.budget_j), out
