"""The env–agent contract: observations in, actions out.

An agent learns in one of two ways (its ``feedback`` attribute):

- ``"bandit"``: online through an environment on the training split; only the chosen model's
  outcome is revealed (``FitContext.make_env`` / ``make_vec_env``, any registered variant
  through ``env_fn``). Those envs are the *bandit-feedback view*: the step info holds the
  observation's handles and the outcome of the route taken, no ``oracle_reward``, and the
  env's per-route arrays (``reward_matrix``, ``evaluate``) raise ``PrivilegedAccessError``;
- ``"full"``: from the whole training table, every model's outcome on every training query, as
  the paper's SFT target and most routing baselines do (``FitContext.train_observations`` with
  ``train_outcomes`` / ``train_reward_matrix`` in the same order). Legitimate (it is training
  data), and reported as such: ``compare``'s "training feedback" column says "full
  information" for these agents and for a bandit agent that reads the training table.

Training envs replay the training split only: ``make_env(split="test")`` (or another
tournament) raises ``PrivilegedAccessError`` unless the agent declared ``test_outcomes``.

It then routes with **one** entry point, ``act_batch(ObservationBatch) -> actions``; ``act(obs)``
is a thin alias for a batch of one. What a query *is* comes from its observation only (turn
it into features with one ``ObservationFeaturizer``, fitted on the training observations and
saved with the agent); ``info`` is for logging and regret.

**Privileged information.** Held-out outcomes (``"test_outcomes"``), the models' answer texts
(``"outputs"``) and the generator's latent ``difficulty`` (``"difficulty"``) are what no
deployed router has. An agent that needs them declares ``privileged`` (oracle, Smoothie); only
then does ``FitContext.privileged`` (or a difficulty column) exist for it, and ``compare``
labels it not deployable. An agent that did not declare it gets ``PrivilegedAccessError``.

Python cannot forbid reading held-out outcomes by other roads (rebuilding the tournament by
name, private attributes, the files themselves), so ``compare`` *verifies* each deployable
row: the audit (``routing_gym.eval.execution.audit``) fits and runs the agent a second time on a copy
whose held-out outcomes are replaced, and a row whose actions change is not deployable. For
the audit to mean anything an agent must be deterministic for a given ``ctx.seed``.
"""

from __future__ import annotations

import importlib
import json
import pickle
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Literal, Protocol, runtime_checkable

import gymnasium as gym
import numpy as np
import pandas as pd

from routing_gym.envs import ObservationBatch, Reward, RoutingEnv
from routing_gym.envs.replay import COUNTERFACTUAL_INFO_KEYS
from routing_gym.envs.vector_env import RoutingVectorEnv, per_env_infos
from routing_gym.errors import PrivilegedAccessError, RoutingGymError, UnseenModelsError
from routing_gym.tournament import Outcomes, Tournament

if TYPE_CHECKING:
    from routing_gym.eval.generalisation.unseen_models import ModelDescription

Feedback = Literal["bandit", "full"]
PRIVILEGES = ("test_outcomes", "outputs", "difficulty")
MANIFEST = "routing_gym_agent.json"  # in a directory an agent saved: which class loads it

# Called once per online decision: (step, action, reward, info) — regret curves, collapse hooks.
StepHook = Callable[[int, int, float, dict[str, Any]], None]
EnvFactory = Callable[..., gym.Env]


class StepHooks(gym.Wrapper):
    """Calls every hook after each step of the wrapped env, counting steps across episodes.

    ``FitContext.make_env`` puts it around every training env, so any bandit-feedback agent
    (a user's own too) gets regret curves and collapse tracking without extra code."""

    def __init__(self, env: gym.Env, hooks: list[StepHook]):
        super().__init__(env)
        self.hooks = hooks
        self.steps = 0

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        a = int(action) if np.ndim(action) == 0 else int(np.asarray(action).reshape(-1)[0])
        for hook in self.hooks:
            hook(self.steps, a, float(reward), info)
        self.steps += 1
        return obs, reward, terminated, truncated, info


class VectorStepHooks(gym.vector.VectorWrapper):
    """``StepHooks`` for a vector env: after each step, every hook is called once per env (env 0
    first) with that env's info (``per_env_infos``: the ended episode's), counting decisions."""

    def __init__(self, env: gym.vector.VectorEnv, hooks: list[StepHook]):
        super().__init__(env)
        self.hooks = hooks
        self.steps = 0

    def step(self, actions):
        obs, rewards, terminated, truncated, infos = self.env.step(actions)
        flat = np.asarray(actions).reshape(self.num_envs, -1)[:, 0]
        for a, r, info in zip(flat.tolist(), np.asarray(rewards).tolist(), per_env_infos(infos, self.num_envs)):
            for hook in self.hooks:
                hook(self.steps, int(a), float(r), info)
            self.steps += 1
        return obs, rewards, terminated, truncated, infos


class BanditInfo(dict):
    """Step info of the bandit-feedback view: reading a counterfactual key raises a clear error."""

    def __missing__(self, key: str) -> Any:
        if key in COUNTERFACTUAL_INFO_KEYS:
            raise PrivilegedAccessError(
                f"info[{key!r}] describes routes not taken; the env a bandit agent trains on shows only the chosen "
                "route's outcome (regret is logged by the evaluator's step hooks, which see it)"
            )
        raise KeyError(key)


def bandit_info(info: dict[str, Any]) -> BanditInfo:
    """``info`` without its counterfactual keys (also inside a vector env's ``final_info``)."""
    out = BanditInfo((k, v) for k, v in info.items() if k.lstrip("_") not in COUNTERFACTUAL_INFO_KEYS)
    if isinstance(out.get("final_info"), dict):
        out["final_info"] = bandit_info(out["final_info"])
    return out


class BanditFeedback(gym.Wrapper):
    """The bandit-feedback view of a training env: counterfactual info removed (the step hooks,
    inside this wrapper, still see it), at ``reset`` too, whose info holds every step key."""

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        obs, info = self.env.reset(seed=seed, options=options)
        return obs, bandit_info(info)

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward, terminated, truncated, bandit_info(info)


class VectorBanditFeedback(gym.vector.VectorWrapper):
    """``BanditFeedback`` for a vector env."""

    def reset(self, *, seed: Any = None, options: dict[str, Any] | None = None):
        obs, infos = self.env.reset(seed=seed, options=options)
        return obs, bandit_info(infos)

    def step(self, actions):
        obs, rewards, terminated, truncated, infos = self.env.step(actions)
        return obs, rewards, terminated, truncated, bandit_info(infos)


@dataclass(frozen=True)
class PrivilegedAccess:
    """What a privileged agent may read: the whole tournament (held-out rows included)."""

    tournament: Tournament
    reward: Reward
    grants: frozenset[str]

    def rows_of(self, batch: ObservationBatch) -> np.ndarray:
        """Tournament rows of the batch's queries (by their ids)."""
        if batch.query_ids is None:
            raise RoutingGymError("this batch carries no query ids, so its outcomes cannot be looked up")
        index = pd.Index(self.tournament.queries["query_id"])
        rows = index.get_indexer(batch.query_ids)
        if (rows < 0).any():
            missing = [q for q, r in zip(batch.query_ids, rows) if r < 0][:3]
            raise RoutingGymError(f"query ids {missing} are not in tournament {self.tournament.card.name!r}")
        return rows


class FitContext:
    """Everything an agent may learn from: the training split of one tournament.

    Args:
        tournament: the tournament; agents see its training split only (``train_*``).
        reward: the training objective (and compare's evaluation reward); recorded in logs.
        train_split: which split is training.
        seed: the agent's seed.
        env_fn: ``env_fn(**overrides) -> gym.Env`` builds a training env; default: a
            ``RoutingEnv`` over ``train_split`` with ``reward`` that penalizes invalid actions.
            Pass any variant here (budget, changing pool, ...) to train on it.
        env_kwargs: overrides given to every env the context builds.
        step_hooks: called after every training step of every env the context builds.
        progress: agents may show progress bars.
        grants: the privileges this context grants (``compare`` grants what an agent declares).
        feedback: the agent's declared feedback (``compare`` passes ``agent.feedback``).
            ``"bandit"`` (the default): every env the context builds is the bandit-feedback
            view. Either way, reading the training table (``train_outcomes``,
            ``train_reward_matrix``, ``train_tournament``) and building envs is recorded
            (``training_feedback``).
    """

    def __init__(
        self,
        tournament: Tournament,
        reward: Reward,
        train_split: str = "train",
        seed: int = 0,
        env_fn: EnvFactory | None = None,
        env_kwargs: dict[str, Any] | None = None,
        step_hooks: list[StepHook] | None = None,
        progress: bool = False,
        grants: frozenset[str] | set[str] = frozenset(),
        feedback: Feedback = "bandit",
    ):
        if feedback not in ("bandit", "full"):
            raise RoutingGymError(f"feedback must be 'bandit' or 'full', got {feedback!r}")
        unknown = sorted(set(grants) - set(PRIVILEGES))
        if unknown:
            raise RoutingGymError(f"unknown privilege(s) {unknown}; privileges: {', '.join(PRIVILEGES)}")
        self._tournament = tournament
        self.reward = reward
        self.train_split = train_split
        self.seed = seed
        self.env_fn = env_fn
        self.env_kwargs = dict(env_kwargs or {})
        self.step_hooks = list(step_hooks or [])
        self.progress = progress
        self.grants = frozenset(grants)
        self.feedback = feedback
        self.reads: set[str] = set()  # training-table reads and "env": what training_feedback reports
        self._train_rows = tournament.split_rows(train_split)

    # ------------------------------------------------------------------ what any agent may read
    @property
    def tournament(self) -> Tournament:
        raise PrivilegedAccessError(
            "FitContext.tournament holds held-out outcomes: learn from ctx.train_observations(), "
            "ctx.train_outcomes(), ctx.train_reward_matrix() or ctx.train_tournament; an agent that needs "
            "held-out outcomes declares `privileged = frozenset({'test_outcomes'})` and reads ctx.privileged"
        )

    @property
    def n_models(self) -> int:
        return self._tournament.n_models

    @property
    def model_ids(self) -> list[str]:
        return list(self._tournament.model_ids)

    @property
    def models(self) -> pd.DataFrame:
        """The pool's static facts (ids, parameters, family, ...), no outcomes."""
        return self._tournament.models.copy()

    @property
    def benchmarks(self) -> list[str]:
        """The names behind the observation's benchmark codes."""
        return self._tournament.benchmarks

    @property
    def n_train(self) -> int:
        return len(self._train_rows)

    @property
    def train_tournament(self) -> Tournament:
        """The training split as a tournament of its own (no held-out row in it; full information)."""
        self._read_full("train_tournament")
        if not hasattr(self, "_train_tournament"):
            self._train_tournament = self._tournament.subset(rows=self._train_rows)
        return self._train_tournament

    def train_observations(self) -> ObservationBatch:
        """The observations of the training queries, in the order of ``train_outcomes``."""
        return ObservationBatch.from_tournament(self._tournament, self._train_rows, "difficulty" in self.grants)

    def train_outcomes(self) -> Outcomes:
        """Full-information training table (for ``feedback = "full"`` agents)."""
        self._read_full("train_outcomes")
        return self._tournament.outcomes(self._train_rows)

    def train_reward_matrix(self) -> np.ndarray:
        """``[n_train, K]`` reward of every route on training queries (full information)."""
        self._read_full("train_reward_matrix")
        return self.reward.matrix(self._tournament, self._train_rows)

    def _read_full(self, what: str) -> None:
        self.reads.add(what)

    @property
    def training_feedback(self) -> str:
        """What the agent learned from: ``"full information"`` (it read the training table, or
        trained on an env with ``feedback = "full"`` declared), ``"bandit"`` (envs of the
        bandit-feedback view only) or ``"none"`` (neither: e.g. random)."""
        if self.reads - {"env"} or (self.feedback == "full" and "env" in self.reads):
            return "full information"
        return "bandit" if "env" in self.reads else "none"

    @property
    def objective(self) -> str:
        """The training objective, as recorded in compare's outputs."""
        return self.reward.describe()

    # ------------------------------------------------------------------ training envs
    def make_env(self, **overrides: Any) -> gym.Env:
        """A training env (``env_fn``, default a ``RoutingEnv`` over the training split with
        this context's reward, invalid actions penalized) with the step hooks attached."""
        kwargs = {**self.env_kwargs, **overrides}
        self._check_training_only(kwargs)
        env = self.env_fn(**kwargs) if self.env_fn is not None else self._default_env(**kwargs)
        env = StepHooks(env, self.step_hooks) if self.step_hooks else env
        return self._feedback_view(env, BanditFeedback)

    def _check_training_only(self, kwargs: dict[str, Any]) -> None:
        """Training envs replay this context's training split, nothing else."""
        if "test_outcomes" in self.grants:
            return
        if "tournament" in kwargs:
            raise PrivilegedAccessError("a training env replays this context's tournament; another tournament "
                                        "(or the same one rebuilt) is not training data")
        split = kwargs.get("split", self.train_split)
        if split != self.train_split:
            raise PrivilegedAccessError(
                f"make_env(split={split!r}): training envs replay the training split {self.train_split!r} only; "
                "an agent that needs held-out outcomes declares `privileged = frozenset({'test_outcomes'})` and is "
                "reported not deployable"
            )

    def _feedback_view(self, env: Any, wrapper: type) -> Any:
        """A bandit agent's env: per-route arrays hidden, counterfactual info stripped."""
        self.reads.add("env")
        if self.feedback != "bandit":
            return env
        hide = getattr(env.unwrapped, "hide_counterfactuals", None)
        if hide is not None:
            hide()
        return wrapper(env)

    def make_vec_env(self, n: int, featurizer: Any = None, **overrides: Any) -> gym.vector.VectorEnv:
        """``n`` training envs stepped together, same-step autoreset (every step is a real one),
        the step hooks called once per env and step.

        Default env: one ``RoutingVectorEnv`` over the training split (the n envs are array
        gathers over one replay core). With an ``env_fn``: a ``SyncVectorEnv`` of ``make_env``.
        ``featurizer``: a fitted ``ObservationFeaturizer``; observations are then its ``Box``
        view (the native env's precomputed features, or ``BoxObservation`` per env)."""
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        if self.env_fn is None:
            self._check_training_only({**self.env_kwargs, **overrides})
            kwargs = self._default_env_kwargs(**{**self.env_kwargs, **overrides})
            view = {} if featurizer is None else {"observation": "features", "featurizer": featurizer}
            venv: gym.vector.VectorEnv = RoutingVectorEnv(n, **kwargs, **view)
            venv = VectorStepHooks(venv, self.step_hooks) if self.step_hooks else venv
            return self._feedback_view(venv, VectorBanditFeedback)

        def make_one() -> gym.Env:
            env = self.make_env(**overrides)
            if featurizer is None:
                return env
            from routing_gym.envs.wrappers import BoxObservation

            return BoxObservation(env, featurizer=featurizer)

        return gym.vector.SyncVectorEnv([make_one for _ in range(n)], autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)

    def _default_env(self, **overrides: Any) -> RoutingEnv:
        return RoutingEnv(**self._default_env_kwargs(**overrides))

    def _default_env_kwargs(self, **overrides: Any) -> dict[str, Any]:
        kwargs: dict[str, Any] = dict(
            tournament=self._tournament,
            split=self.train_split,
            reward=self.reward.name,
            coefficients=self.reward.coefficients,
            invalid_penalty=self.reward.invalid_penalty,
            allow_ungated=self.reward.allow_ungated,
            invalid_action="penalize",
            include_difficulty="difficulty" in self.grants,
        )
        kwargs.update(overrides)
        if kwargs.get("include_difficulty") and "difficulty" not in self.grants:
            raise PrivilegedAccessError("include_difficulty shows the generator's latent: declare privileged = {'difficulty'}")
        return kwargs

    # ------------------------------------------------------------------ privileged
    @property
    def privileged(self) -> PrivilegedAccess:
        """Held-out outcomes and answers, for an agent granted ``test_outcomes`` or ``outputs``."""
        if not self.grants & {"test_outcomes", "outputs"}:
            raise PrivilegedAccessError(
                "this agent was not granted held-out outcomes: declare `privileged = frozenset({'test_outcomes'})` "
                "(or 'outputs') on the agent class; compare then grants it and labels the agent not deployable"
            )
        return PrivilegedAccess(self._tournament, self.reward, self.grants)


class Agent(ABC):
    """Base class of every router. Subclass, set ``feedback``, implement ``fit`` and
    ``act_batch``, and register with ``@register_agent("name")``.

    Unseen benchmarks: an observation's ``benchmark`` is a code into ``FitContext.benchmarks``
    (the tournament's list), and a held-out split (``Tournament.with_held_out_benchmarks``) can
    show a code that no training observation carried. The contract for such an *unseen label*:
    the agent routes it as it routes any question (a model index; never an error, never an index
    out of the pool), and the label carries nothing: two unseen benchmarks are routed alike.
    Label routers (``per-benchmark``, the label-nested routers' per-(benchmark, model) tables) use
    their pooled choice, the table of all training rows together; content routers read the text (the
    ``ObservationFeaturizer`` gives an unseen benchmark an all-zero one-hot, so no untrained
    weight of its column acts); agents that never read the label (fixed, random, cascade, the
    text controller, the privileged oracle and Smoothie) are unaffected. A code outside
    ``[0, len(ctx.benchmarks))`` is not an observation of the tournament: agents that index a
    per-benchmark table refuse it with a ``ValueError`` naming the range, the others treat it as
    unseen. ``docs/agents.md`` lists each registered agent's behaviour;
    ``tests/test_unseen_benchmarks.py`` checks it for every registered agent.

    Unseen models (``routing_gym.eval.generalisation.unseen_models``, UniRoute's protocol): after ``fit``,
    ``add_models(description)`` appends models the agent never trained on, each described only by
    its outcomes on a stated number of calibration (training) questions; afterwards ``act_batch``
    may return ``K_seen + j`` for the j-th new model. Agents that can set ``describes_new_models =
    True``; the base ``add_models`` raises ``UnseenModelsError``.

    Router overhead: an agent whose routing decision itself costs something (the text
    controller decodes tokens) sets ``self.overhead`` in ``act_batch`` to a dict of per-query
    arrays or means, e.g. ``{"decode_s": ..., "generated_tokens": ..., "joules": ...}``;
    ``routing-gym compare`` reports each entry beside the answer joules.
    """

    name: ClassVar[str] = "agent"
    feedback: ClassVar[Feedback] = "full"
    privileged: frozenset[str] = frozenset()  # subset of PRIVILEGES; non-empty: not deployable
    # Non-empty: compare does not audit this agent (a second fit would cost too much) and its
    # row says "unverified (<reason>)", never "yes".
    audit_skip_reason: ClassVar[str] = ""
    # False: fit ignores FitContext.reward (it learns from correctness and joules, or from an
    # objective of its own), so the agent routes the same under every reward; compare marks its rows.
    trains_on_reward: ClassVar[bool] = True
    # True: add_models estimates a new model's parameters from its calibration outcomes.
    describes_new_models: ClassVar[bool] = False
    # False: the agent's routing never reads the question beyond its benchmark label (a fixed model,
    # a label-only or a random router): compare keeps it out of the content-gain family, and it is never
    # "routes beyond the task label" (its population content gain is at most 0 by construction).
    reads_question: ClassVar[bool] = True
    # False: fit never reads FitContext.seed (nor draws unseeded randomness), so every seed routes
    # alike; compare then fits and audits the agent once and reports that run for each seed
    # (tests/test_seed_dependence.py fits every registered agent so declared with two seeds).
    seed_dependent: ClassVar[bool] = True

    @property
    def deployable(self) -> bool:
        return not self.privileged

    def add_models(self, description: ModelDescription) -> None:
        """Append new models, each described by its outcomes on calibration questions (class
        docstring); their indices follow the trained pool's. Default: this agent cannot."""
        from routing_gym_agents.registry import AGENTS, load_plugins

        load_plugins()
        able = sorted(n for n, (cls, _) in AGENTS.items() if cls.describes_new_models)
        raise UnseenModelsError(
            f"{self.name} cannot route to models it did not train on ({type(self).__name__}.describes_new_models is "
            f"False); agents that estimate a new model from calibration outcomes: {', '.join(able)}"
        )

    def fit(self, ctx: FitContext) -> dict[str, Any]:
        """Learn from the training split; return logs (e.g. ``{"regret": [...]}``)."""
        return {}

    @abstractmethod
    def act_batch(self, batch: ObservationBatch) -> np.ndarray:
        """One model index per observation of ``batch`` (an invalid index counts as invalid)."""

    def act(self, observation: dict[str, Any]) -> int:
        """Route one env observation (a batch of one through ``act_batch``)."""
        return int(self.act_batch(ObservationBatch.from_observations([observation]))[0])

    def save(self, path: str | Path) -> None:
        """Default: pickle the agent (featurizer included) to a file. Agents holding torch or
        SB3 models save a directory and write ``MANIFEST`` into it (``write_manifest``)."""
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as handle:
            pickle.dump(self, handle)

    @classmethod
    def load(cls, path: str | Path) -> Agent:
        """Load what ``save`` wrote, whichever agent class wrote it."""
        path = Path(path)
        if path.is_dir():
            manifest = path / MANIFEST
            if not manifest.exists():
                raise RoutingGymError(f"{path} is a directory but not a saved agent ({MANIFEST} is missing)")
            spec = json.loads(manifest.read_text())
            saved_cls = getattr(importlib.import_module(spec["module"]), spec["class"])
            if not issubclass(saved_cls, cls):
                raise TypeError(f"{path} holds a {saved_cls.__name__}, not a {cls.__name__}")
            if saved_cls.load.__func__ is Agent.load.__func__:
                raise RoutingGymError(f"{saved_cls.__name__} saved a directory but does not override load()")
            return saved_cls.load(path)
        with open(path, "rb") as handle:
            agent = pickle.load(handle)
        if not isinstance(agent, cls):
            raise TypeError(f"{path} holds a {type(agent).__name__}, not a {cls.__name__}")
        return agent

    def write_manifest(self, directory: Path) -> None:
        """Record which class loads ``directory`` (for ``Agent.load``)."""
        spec = {"module": type(self).__module__, "class": type(self).__qualname__}
        (Path(directory) / MANIFEST).write_text(json.dumps(spec))


@runtime_checkable
class CorrectnessPredictor(Protocol):
    """A fitted full-information router that models correctness: ``predict_correct(batch)`` is
    ``[n, K]`` P(model k answers the query correctly), each in [0, 1], from the observation
    only (no held-out outcome). Headroom studies read it through ``isinstance(agent,
    CorrectnessPredictor)``; call it after ``fit``."""

    def predict_correct(self, batch: ObservationBatch) -> np.ndarray: ...


@runtime_checkable
class EnergyPredictor(Protocol):
    """A fitted router that predicts energy: ``predict_energy(batch)`` is ``[n, K]`` joules
    model k would spend answering each query (a per-(benchmark, model) mean or a per-query
    prediction, from the observation only)."""

    def predict_energy(self, batch: ObservationBatch) -> np.ndarray: ...


def featurizer_for_context(ctx: FitContext, **params: Any) -> Any:
    """The shared ``ObservationFeaturizer`` of the question part, fitted on ``ctx``'s training
    observations (text and benchmark; extra keys are added by the agents that read them)."""
    from routing_gym.features import fit_featurizer

    train = ctx.train_observations()
    return fit_featurizer(ObservationBatch(train.texts, train.benchmarks), n_benchmarks=len(ctx.benchmarks), extra_keys=(), **params)
