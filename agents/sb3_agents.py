"""Stable-Baselines3 routers: PPO, A2C and DQN trained through the context's env (bandit feedback).

Each agent sees the observation through ``BoxObservation`` (text features fitted on the
training observations, the benchmark one-hot and any other observation key flattened),
learns online from the chosen model's reward only, and routes held-out questions with its policy: greedily (``deterministic=True``, the
default) or by sampling (``deterministic=False``; for DQN that is SB3's epsilon-greedy with
the final exploration rate).

Every online decision goes to ``FitContext.step_hooks`` (through the env ``make_env`` returns)
and to a built-in ``CollapseTracker``, so ``fit`` returns the collapse summary. The env is the
bandit-feedback view (no oracle reward in its info): the per-step regret is the evaluator's,
logged through the context's step hooks. Agents are saved in SB3's own zip format next to a small pickle of the
featurizer and settings (``save``/``load``).

SB3 and torch are imported inside functions: ``import routing_gym_agents`` stays light.
"""

from __future__ import annotations

import pickle
import time
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from routing_gym.errors import RoutingGymError, UnknownNameError
from routing_gym.envs.observation import ObservationBatch
from routing_gym_agents.base import Agent, FitContext, featurizer_for_context
from routing_gym_agents.registry import register_agent

ALGOS = ("ppo", "a2c", "dqn")
MODEL_FILE = "sb3_model.zip"
AGENT_FILE = "agent.pkl"

# Defaults tuned for one-step episodes on a few thousand steps (SB3's own defaults target
# long-horizon control: PPO's 2,048-step rollouts or A2C's 5-step ones learn slowly here).
ALGO_DEFAULTS: dict[str, dict[str, Any]] = {
    "ppo": {"learning_rate": 1e-3, "n_steps": 256, "batch_size": 64, "n_epochs": 4},
    "a2c": {"learning_rate": 1e-3, "n_steps": 32, "normalize_advantage": True},
    "dqn": {
        "learning_rate": 1e-3,
        "learning_starts": 200,
        "buffer_size": 50_000,
        "batch_size": 64,
        "train_freq": 1,
        "gradient_steps": 1,
        "target_update_interval": 500,
        "exploration_fraction": 0.3,
        "exploration_final_eps": 0.02,
    },
}


class SB3Agent(Agent):
    """A Stable-Baselines3 policy over ``BoxObservation`` features.

    Args:
        algo: ``"ppo"``, ``"a2c"`` or ``"dqn"``.
        total_timesteps: online decisions (env steps) to train for. PPO and A2C collect whole
            rollouts of ``n_steps``, so they make up to ``n_steps - 1`` more (``fit`` logs the
            actual count as ``timesteps``).
        learning_rate: optimiser step size (default per algorithm, see ``ALGO_DEFAULTS``).
        ent_coef: entropy bonus of PPO/A2C (higher keeps the policy spread over models; 0 lets
            it collapse freely). DQN has none: it explores with epsilon-greedy instead.
        net_arch: hidden layer sizes of the policy/value (or Q) network.
        features: ``routing_gym.features.FeatureConfig`` fields (default TF-IDF + SVD, 64-d).
        deterministic: greedy (True) or sampled (False) routing at evaluation.
        collapse_window / collapse_threshold: settings of the built-in ``CollapseTracker``.
        include_difficulty: train and route with the generator's latent difficulty in the
            observation (privileged: the agent is then reported as not deployable).
        seed: overrides ``FitContext.seed`` when given.
        n_envs: envs stepped together while training. 1 (default): one env, as SB3 wraps it.
            More: ``FitContext.make_vec_env(n_envs)`` (the native ``RoutingVectorEnv`` with
            precomputed features for the default env) through SB3's ``VecEnv`` adapter; PPO/A2C
            rollouts then hold ``n_steps * n_envs`` decisions.
        algo_kwargs: any further SB3 constructor argument (e.g. ``n_steps``, ``gamma``,
            ``exploration_fraction``), merged over ``ALGO_DEFAULTS``.
    """

    feedback: ClassVar[str] = "bandit"

    def __init__(
        self,
        algo: str = "ppo",
        total_timesteps: int = 10_000,
        learning_rate: float | None = None,
        ent_coef: float | None = None,
        net_arch: tuple[int, ...] | list[int] = (64,),
        features: dict[str, Any] | None = None,
        deterministic: bool = True,
        collapse_window: int = 200,
        collapse_threshold: float = 0.9,
        seed: int | None = None,
        progress: bool = False,
        include_difficulty: bool = False,
        n_envs: int = 1,
        **algo_kwargs: Any,
    ):
        if algo not in ALGOS:
            raise UnknownNameError("SB3 algorithm", algo, list(ALGOS))
        if total_timesteps < 1:
            raise ValueError(f"total_timesteps must be >= 1, got {total_timesteps}")
        if isinstance(n_envs, bool) or not isinstance(n_envs, int) or n_envs < 1:
            raise ValueError(f"n_envs must be a positive integer, got {n_envs!r}")
        if algo == "dqn" and ent_coef is not None:
            raise TypeError(
                "DQN has no entropy coefficient; tune exploration_fraction / exploration_final_eps instead"
            )
        self.algo = algo
        self.total_timesteps = int(total_timesteps)
        self.n_envs = n_envs
        self.learning_rate = learning_rate
        self.ent_coef = 0.0 if ent_coef is None and algo != "dqn" else ent_coef
        self.net_arch = list(net_arch)
        self.features = {"kind": "tfidf-svd", "dim": 64, **(features or {})}
        self.deterministic = deterministic
        self.collapse_window = collapse_window
        self.collapse_threshold = collapse_threshold
        self.seed = seed
        self.progress = progress
        self.algo_kwargs = algo_kwargs
        self.model: Any = None
        self.featurizer: Any = None
        self.n_models: int | None = None
        self.model_ids: list[str] | None = None
        self.collapse: Any = None  # the CollapseTracker of the last fit
        self.privileged = frozenset({"difficulty"}) if include_difficulty else frozenset()
        self.box: Any = None  # the training env's BoxFeatures (the featurizer with the observation layout)

    # ------------------------------------------------------------------ training
    def sb3_kwargs(self) -> dict[str, Any]:
        """The SB3 constructor arguments this agent uses (besides policy, env and seed)."""
        kwargs = {**ALGO_DEFAULTS[self.algo], **self.algo_kwargs}
        if self.learning_rate is not None:
            kwargs["learning_rate"] = self.learning_rate
        if self.ent_coef is not None:
            kwargs["ent_coef"] = self.ent_coef
        kwargs["policy_kwargs"] = {"net_arch": list(self.net_arch), **kwargs.get("policy_kwargs", {})}
        return kwargs

    def fit(self, ctx: FitContext) -> dict[str, Any]:
        """Train online on the training split; returns collapse logs."""
        import torch
        from stable_baselines3 import A2C, DQN, PPO

        from routing_gym.envs.wrappers import BoxObservation
        from routing_gym.eval.collapse import CollapseTracker, make_step_hook_callback

        torch.set_num_threads(1)  # 2 busy cores: more threads ran DQN 3x slower
        seed = ctx.seed if self.seed is None else self.seed
        self.featurizer = featurizer_for_context(ctx, **self.features)
        if self.n_envs == 1:
            env = BoxObservation(ctx.make_env(), featurizer=self.featurizer)
            self.box = env.box
        else:
            from routing_gym.envs.vector_env import RoutingVectorEnv, to_sb3

            venv = ctx.make_vec_env(self.n_envs, featurizer=self.featurizer)
            base = venv.unwrapped
            self.box = base.box if isinstance(base, RoutingVectorEnv) else base.envs[0].box
            env = to_sb3(venv)
        self.n_models = ctx.n_models
        self.model_ids = ctx.model_ids
        cls = {"ppo": PPO, "a2c": A2C, "dqn": DQN}[self.algo]
        try:
            self.model = cls("MlpPolicy", env, seed=seed, device="cpu", verbose=0, **self.sb3_kwargs())
        except TypeError as exc:  # e.g. a PPO-only option given to DQN
            raise TypeError(f"{self.algo.upper()} rejected the agent's SB3 arguments: {exc}") from None

        tracker = CollapseTracker(
            n_models=ctx.n_models, model_ids=ctx.model_ids, window=self.collapse_window, threshold=self.collapse_threshold
        )
        hooks = [tracker]
        start = time.perf_counter()
        self.model.learn(
            total_timesteps=self.total_timesteps,
            callback=make_step_hook_callback(hooks, tracker=tracker),
            progress_bar=self.progress or ctx.progress,
        )
        self.collapse = tracker
        return {
            "objective": ctx.objective,
            "collapse": tracker.summary(),
            "collapse_windows": tracker.to_frame().to_dict("records"),
            "train_seconds": time.perf_counter() - start,
            "timesteps": int(self.model.num_timesteps),
        }

    # ------------------------------------------------------------------ routing
    def features_of(self, batch: ObservationBatch) -> np.ndarray:
        """The Box observations of a batch (the training env's ``BoxObservation.features``)."""
        self._check_fitted()
        low, high = self.model.observation_space.low, self.model.observation_space.high
        return np.clip(self.box.features(batch), low, high).astype(np.float32)

    def act_batch(self, batch: ObservationBatch, deterministic: bool | None = None) -> np.ndarray:
        """One model index per query; ``deterministic`` overrides the agent's setting."""
        if len(batch) == 0:
            return np.zeros(0, dtype=np.int64)
        x = self.features_of(batch)
        greedy = self.deterministic if deterministic is None else deterministic
        actions, _ = self.model.predict(x, deterministic=greedy)
        return np.asarray(actions, dtype=np.int64).reshape(-1)

    def action_probabilities(self, batch: ObservationBatch) -> np.ndarray:
        """``[n, K]`` policy probabilities (PPO/A2C); for DQN the one-hot of the greedy action."""
        import torch

        x = self.features_of(batch)
        policy = self.model.policy
        obs, _ = policy.obs_to_tensor(x)
        with torch.no_grad():
            if self.algo == "dqn":
                q = policy.q_net(obs).numpy()
                return np.eye(q.shape[1])[q.argmax(axis=1)]
            return policy.get_distribution(obs).distribution.probs.numpy()

    def _check_fitted(self) -> None:
        if self.model is None or self.box is None:
            raise RoutingGymError(f"{self.name} ({self.algo}) is not trained: call fit(ctx) or load(path) first")

    # ------------------------------------------------------------------ persistence
    def save(self, path: str | Path) -> None:
        """Write a directory: ``sb3_model.zip`` (SB3's format) and ``agent.pkl`` (the rest)."""
        self._check_fitted()
        path = Path(path)
        if path.exists() and not path.is_dir():
            raise RoutingGymError(f"{path} exists and is not a directory; an SB3 agent saves a directory")
        path.mkdir(parents=True, exist_ok=True)
        self.model.save(path / MODEL_FILE)
        state = {k: v for k, v in self.__dict__.items() if k not in ("model", "collapse")}
        with open(path / AGENT_FILE, "wb") as handle:
            pickle.dump({"class": type(self), "state": state}, handle)
        self.write_manifest(path)

    @classmethod
    def load(cls, path: str | Path) -> SB3Agent:
        from stable_baselines3 import A2C, DQN, PPO

        path = Path(path)
        for name in (MODEL_FILE, AGENT_FILE):
            if not (path / name).exists():
                raise RoutingGymError(f"{path} is not a saved SB3 agent: {name} is missing")
        with open(path / AGENT_FILE, "rb") as handle:
            saved = pickle.load(handle)
        agent_cls = saved["class"]
        if not issubclass(agent_cls, cls):
            raise TypeError(f"{path} holds a {agent_cls.__name__}, not a {cls.__name__}")
        agent = agent_cls.__new__(agent_cls)
        agent.__dict__.update(saved["state"])
        agent.model = {"ppo": PPO, "a2c": A2C, "dqn": DQN}[agent.algo].load(path / MODEL_FILE, device="cpu")
        return agent


register_agent("ppo", algo="ppo")(SB3Agent)
register_agent("a2c", algo="a2c")(SB3Agent)
register_agent("dqn", algo="dqn")(SB3Agent)
