"""Routing policies for ``RoutingGym/Serving-v0``: state-aware heuristics, replay agents, PPO.

Every policy answers ``act(obs) -> model index`` for the env's ``Dict`` observation (the
question and the servers' state). What they may know beyond it is the training split's table
(legitimate training data): per benchmark, each model's accuracy and mean output tokens.

- ``jsq`` (join the shortest queue): among the *adequate* models (training accuracy on the
  question's benchmark within ``margin`` of the best), the one with the least expected wait,
  then the lowest batch fill;
- ``po2`` (power of two choices): two adequate models drawn at random, the less loaded of them;
- ``energy-greedy`` (batch-aware): the adequate model with the fewest expected joules at the
  batch it would join (mean output tokens x the physics' joules per token at batch + 1);
- ``consolidate``: the busiest adequate model that still has a free slot (fills batches, so
  fewer replicas idle at low batch), else ``jsq``;
- ``agent:<name>``: a registered replay agent fitted on the training split as ``compare`` fits
  it, shown only the question (state-blind, unchanged);
- ``ppo``: SB3 PPO trained on ``RoutingGym/Serving-features-v0`` over the training split.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from routing_gym.envs.observation import ObservationBatch
from routing_gym.errors import UnknownNameError

HEURISTICS = ("jsq", "po2", "energy-greedy", "consolidate")


class TrainingTable:
    """Per (benchmark, model): training accuracy and mean output tokens (``[B, K]`` each)."""

    def __init__(self, env: Any, split: str = "train") -> None:
        t = env.unwrapped.tournament
        rows = t.split_rows(split)
        codes = t.benchmark_codes[rows]
        n_bench, k = len(t.benchmarks), t.n_models
        self.accuracy = np.zeros((n_bench, k))
        self.tokens = np.tile(t.output_tokens[rows].mean(axis=0), (n_bench, 1))
        for b in range(n_bench):
            mask = codes == b
            if mask.any():
                self.accuracy[b] = t.correct[rows][mask].mean(axis=0)
                self.tokens[b] = t.output_tokens[rows][mask].mean(axis=0)
            else:  # a benchmark without training rows: the pooled table
                self.accuracy[b] = t.correct[rows].mean(axis=0)

    def adequate(self, benchmark: int, margin: float) -> np.ndarray:
        acc = self.accuracy[benchmark]
        return np.flatnonzero(acc >= acc.max() - margin)


class HeuristicPolicy:
    """One of :data:`HEURISTICS` over the adequate models of the question's benchmark."""

    def __init__(self, name: str, env: Any, margin: float = 0.05, seed: int = 0) -> None:
        if name not in HEURISTICS:
            raise UnknownNameError("serving heuristic", name, list(HEURISTICS))
        self.name, self.margin = name, margin
        self.table = TrainingTable(env)
        base = env.unwrapped
        self.jpt = base._jpt_table  # joules per token at each batch, per model (the physics: public)
        self.capacity = base._capacity
        self.rng = np.random.default_rng(seed)

    def act(self, obs: dict[str, Any]) -> int:
        models = self.table.adequate(int(obs["benchmark"]), self.margin)
        wait, fill = obs["wait_s"][models], obs["batch_fill"][models]
        if self.name == "po2" and len(models) > 1:
            pick = self.rng.choice(len(models), 2, replace=False)
            models, wait, fill = models[pick], wait[pick], fill[pick]
        if self.name == "energy-greedy":
            batch = np.minimum(np.floor(fill * self.capacity[models]) + 1, self.jpt.shape[1] - 1).astype(int)
            joules = self.table.tokens[int(obs["benchmark"]), models] * self.jpt[models, batch]
            return int(models[np.argmin(joules + 1e9 * (wait > 0))])  # a full server is a last resort
        if self.name == "consolidate":
            open_ = fill < 1.0 - 1e-9
            if open_.any():
                return int(models[open_][np.argmax(fill[open_])])
        return int(models[np.lexsort((fill, wait))[0]])


class AgentPolicy:
    """A replay agent, shown only the question part of each observation."""

    def __init__(self, agent: Any, name: str) -> None:
        self.agent, self.name = agent, name

    def act(self, obs: dict[str, Any]) -> int:
        batch = ObservationBatch(np.array([obs["text"]], dtype=object), np.array([int(obs["benchmark"])]))
        return int(self.agent.act_batch(batch)[0])


def fit_agent(name: str, env: Any, seed: int = 0) -> AgentPolicy:
    """A registered agent fitted on the serving env's tournament's training split, as ``compare`` fits it."""
    from routing_gym_agents.base import FitContext
    from routing_gym_agents.registry import make_agent

    base = env.unwrapped
    agent = make_agent(name)
    agent.fit(FitContext(base.tournament, base.reward, seed=seed, feedback=agent.feedback))
    return AgentPolicy(agent, f"agent:{name}")


class PPOPolicy:
    """SB3 PPO on ``RoutingGym/Serving-features-v0``; acts on the Box view of an observation."""

    name = "ppo"

    def __init__(self, env_kwargs: dict[str, Any], timesteps: int, seed: int = 0) -> None:
        import gymnasium as gym
        from stable_baselines3 import PPO

        self.env = gym.make("RoutingGym/Serving-features-v0", **env_kwargs)
        self.model = PPO("MlpPolicy", self.env, seed=seed, n_steps=512, batch_size=128, gamma=0.9, verbose=0, device="cpu")
        self.model.learn(total_timesteps=timesteps)

    def act(self, obs: dict[str, Any]) -> int:
        box = self.env.get_wrapper_attr("observation")(obs)  # BoxObservation's featurizer, fitted on train
        return int(self.model.predict(box, deterministic=True)[0])


def check_policy_names(names: list[str], reference: str) -> None:
    """Raise a usage error for an unknown policy or agent name, or a reference not among ``names``."""
    from routing_gym.errors import UsageError

    unknown = [n for n in names if n not in (*HEURISTICS, "ppo") and not n.startswith("agent:")]
    if unknown:
        raise UnknownNameError("serving policy", unknown[0], [*HEURISTICS, "agent:<name>", "ppo"])
    agents = [n.split(":", 1)[1] for n in names if n.startswith("agent:")]
    if agents:
        from routing_gym_agents.registry import list_agents, unknown_agent_error

        missing = [a for a in agents if a not in list_agents()]
        if missing:
            raise unknown_agent_error(missing[0])
    if reference not in names:
        raise UsageError(f"--reference {reference!r} is not among the policies run ({', '.join(names)})")


def make_policy(name: str, env: Any, seed: int = 0, ppo_timesteps: int = 20_000,
                env_kwargs: dict[str, Any] | None = None) -> Any:
    """A policy by name: a heuristic, ``agent:<registered name>``, or ``ppo``."""
    if name in HEURISTICS:
        return HeuristicPolicy(name, env, seed=seed)
    if name.startswith("agent:"):
        return fit_agent(name.split(":", 1)[1], env, seed)
    if name == "ppo":
        return PPOPolicy(dict(env_kwargs or {}), ppo_timesteps, seed)
    raise UnknownNameError("serving policy", name, [*HEURISTICS, "agent:<name>", "ppo"])
