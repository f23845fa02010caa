"""Vowpal Wabbit's contextual bandits: ``cb_explore_adf`` with SquareCB, epsilon-greedy and RegCB.

The field's production contextual-bandit learner (``pip install routing-gym[vw]``, the PyPI
``vowpalwabbit``), driven through the training env like ``linucb``: on each training query the
agent shows VW one *action-dependent-feature* example (a ``shared`` line with the question, then
one line per model of the pool), VW's exploration layer returns a probability for each model, the
agent draws a model from it (numpy, seeded by ``ctx.seed``), steps the env, and VW learns from the
chosen model's reward alone (bandit feedback) as a cost in [0, 1] (``reward_range`` mapped onto
1 .. 0: SquareCB's and RegCB's constants assume costs of that scale), with the probability it was
drawn with (VW's ``mtr`` estimator)::

    shared |f 0:0.12 1:-0.05 ... 35:1 39:1                <- the question's features (text, benchmark)
    |a m0                                                  <- model 0
    0:0.0:0.91 |a m1                                       <- model 1, chosen: cost, probability
    ...

The interaction of the question's namespaces with ``a`` makes the predicted cost depend on the
question and the model together; ``|a m<k>`` alone is each model's intercept.

Features (``features``): by default the project's ``ObservationFeaturizer`` (``"tfidf-svd"``,
32 text columns, the benchmark one-hot and a bias: ``linucb``'s features, so the two differ in the
learner alone), as VW's dense namespace ``f`` with the interaction ``f x a``; any other featurizer
kind works the same way. ``"text"`` is VW's own hashed namespace of the question's lower-cased
words plus the benchmark as one feature, the way VW is used in production. On paper-pool (5 seeds)
the featurizer gave the higher mean reward for SquareCB (1.112 against 1.069) and RegCB (1.067
against 1.010), the lower one for epsilon-greedy (0.874 against 0.906), and fitted in about half
the time (``experiments/results/vw/``, written by ``experiments/vw_study.py``). An unseen
benchmark gets an all-zero one-hot (``"text"``: a feature VW never trained, weight zero), so it
carries nothing: the question is routed by its text alone, as the agent contract asks.

Exploration (the registered names):

- ``vw-squarecb``: SquareCB (Foster & Rakhlin 2020), ``--squarecb --gamma_scale``;
- ``vw-epsilon``: epsilon-greedy, ``--epsilon``;
- ``vw-regcb``: RegCB-Opt (Foster et al. 2018), ``--regcbopt --mellowness``, the optimistic
  variant that Bietti, Agarwal & Langford's bake-off (JMLR 2021) found the strongest; its cost
  bounds are clipped to [0, 1].

``reward_range`` is gated_rank's (a wrong route -1, the best correct one 2) by default; set it for
a reward of another range (a reward outside it gives a cost outside [0, 1]: VW learns it, RegCB
clips its bounds).

At evaluation the policy is frozen and deterministic: the model with the highest probability under
VW's exploration layer in predict-only mode (nothing is learned, so the order of the queries does
not matter). For SquareCB and epsilon-greedy that is exactly the greedy model on the learned costs
(every other model gets at most 1/K); RegCB-Opt's is the model with the lowest *lower* confidence
bound on its cost (optimism stays on at test, as VW plays it). Ties go to the lowest model index.

Seeds: ``--random_seed ctx.seed`` for VW and ``ctx.seed`` for the draws and the env's query
order: a seed gives the same actions, in any process. A VW workspace does not pickle, so the agent
pickles the model's bytes (VW's own model file) and loads them back (``__getstate__``): ``save``,
``Agent.load`` and the process executors move a fitted agent like any other.
"""

from __future__ import annotations

import os
import re
import tempfile
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from routing_gym.envs.observation import ObservationBatch
from routing_gym.envs.rewards import CORRECT_BASE, WRONG_REWARD
from routing_gym_agents.bandits import REWARD_LAMBDA_KNOB
from routing_gym_agents.base import Agent, FitContext, featurizer_for_context
from routing_gym_agents.registry import register_agent

EXPLORATIONS = ("squarecb", "epsilon", "regcb")
_NOT_WORD = re.compile(r"[^0-9a-z]+")  # VW's text format reserves '|', ':' and whitespace


def _workspace(args: str) -> Any:
    try:
        from vowpalwabbit import Workspace
    except ModuleNotFoundError as exc:  # an optional dependency: say which extra brings it
        raise ModuleNotFoundError("the vw-* agents need Vowpal Wabbit: pip install 'routing-gym[vw]'",
                                  name=exc.name) from exc
    return Workspace(args)


@register_agent("vw-squarecb", exploration="squarecb")
@register_agent("vw-epsilon", exploration="epsilon")
@register_agent("vw-regcb", exploration="regcb")
class VWContextualBandit(Agent):
    """Vowpal Wabbit's ``cb_explore_adf`` with SquareCB, epsilon-greedy or RegCB-Opt exploration,
    trained online on bandit feedback through the training env (one pass); at test it routes to
    the model VW's frozen exploration layer rates highest: the greedy one on the learned costs
    (RegCB-Opt: the lowest lower confidence bound). Details in the module docstring.

    Args:
        exploration: ``"squarecb"``, ``"epsilon"`` or ``"regcb"`` (RegCB-Opt).
        features: an ``ObservationFeaturizer`` kind or ``"text"`` (VW's hashed words + benchmark).
        dim: text columns of a featurizer kind (ignored for ``"text"``).
        epochs: passes over the training split (each a new seeded query order).
        gamma_scale: SquareCB's gamma scale (VW's default 10).
        epsilon: epsilon-greedy's exploration probability (VW's default 0.05).
        mellowness: RegCB's confidence width (VW's default 0.1).
        reward_range: ``(low, high)`` rewards, mapped onto VW's costs 1 and 0.
        bits: VW's hash table size, ``2**bits`` weights.
        learning_rate: VW's ``-l``.
    """

    name = "vw-squarecb"
    feedback = "bandit"
    cost_knob = REWARD_LAMBDA_KNOB

    def __init__(self, exploration: str = "squarecb", features: str = "tfidf-svd", dim: int = 32, epochs: int = 1,
                 gamma_scale: float = 10.0, epsilon: float = 0.05, mellowness: float = 0.1,
                 reward_range: tuple[float, float] = (WRONG_REWARD, CORRECT_BASE), bits: int = 18,
                 learning_rate: float = 0.5):
        if exploration not in EXPLORATIONS:
            raise ValueError(f"exploration must be one of {EXPLORATIONS}, got {exploration!r}")
        if epochs < 1:
            raise ValueError(f"epochs must be >= 1, got {epochs}")
        if not 0 <= epsilon <= 1:
            raise ValueError(f"epsilon must be in [0, 1], got {epsilon}")
        if gamma_scale <= 0 or mellowness <= 0 or learning_rate <= 0:
            raise ValueError(f"gamma_scale, mellowness and learning_rate must be > 0, got {gamma_scale}, "
                             f"{mellowness}, {learning_rate}")
        if not reward_range[0] < reward_range[1]:
            raise ValueError(f"reward_range must be (low, high) with low < high, got {reward_range}")
        if not 1 <= bits <= 30:
            raise ValueError(f"bits must be in [1, 30], got {bits}")
        self.exploration = exploration
        self.features = features
        self.dim = dim
        self.epochs = epochs
        self.gamma_scale = gamma_scale
        self.epsilon = epsilon
        self.mellowness = mellowness
        self.reward_range = (float(reward_range[0]), float(reward_range[1]))
        self.bits = bits
        self.learning_rate = learning_rate
        self.featurizer = None  # an ObservationFeaturizer, unless features == "text"
        self.n_models = 0
        self._ws: Any = None

    # ------------------------------------------------------------------ VW's command line and examples
    def vw_args(self, seed: int) -> str:
        """VW's command line for this agent and ``seed``."""
        explore = {"squarecb": f"--squarecb --gamma_scale {self.gamma_scale:g}",
                   "epsilon": f"--epsilon {self.epsilon:g}",
                   "regcb": f"--regcbopt --mellowness {self.mellowness:g}"}
        interactions = "-q qa -q ba" if self.features == "text" else "-q fa"
        return (f"--cb_explore_adf --cb_type mtr {explore[self.exploration]} {interactions} -b {self.bits} "
                f"-l {self.learning_rate:g} --random_seed {seed} --quiet")

    def shared_lines(self, batch: ObservationBatch) -> list[str]:
        """The ``shared`` line of every observation of ``batch`` (module docstring)."""
        if self.featurizer is None:
            return [f"shared |q {_NOT_WORD.sub(' ', str(text).lower())} |b b{int(b)}"
                    for text, b in zip(batch.texts, batch.benchmarks)]
        x = self.featurizer.transform(batch)
        return ["shared |f " + " ".join(f"{j}:{row[j]:.6g}" for j in np.flatnonzero(row)) for row in x]

    def cost(self, reward: float) -> float:
        """VW's cost of ``reward``: ``reward_range`` mapped onto 1 .. 0."""
        low, high = self.reward_range
        return (high - reward) / (high - low)

    def _example(self, shared: str, chosen: tuple[int, float, float] | None = None) -> list[str]:
        lines = [shared, *(f"|a m{k}" for k in range(self.n_models))]
        if chosen is not None:
            a, cost, prob = chosen
            lines[1 + a] = f"0:{cost:.9g}:{prob:.9g} {lines[1 + a]}"
        return lines

    def _pmf(self, shared: str) -> np.ndarray:
        return np.asarray(self._ws.predict(self._example(shared)), dtype=np.float64)

    # ------------------------------------------------------------------ online training
    def fit(self, ctx: FitContext) -> dict[str, Any]:
        if self.features != "text":
            self.featurizer = featurizer_for_context(ctx, kind=self.features, dim=self.dim, bias=True)
        self.n_models = ctx.n_models
        self._ws = _workspace(self.vw_args(ctx.seed))
        train = ctx.train_observations()
        # The shared line depends on the question alone: computed once per training question.
        table = dict(zip(zip(train.texts, (int(b) for b in train.benchmarks)), self.shared_lines(train)))
        env = ctx.make_env()
        rng = np.random.default_rng(ctx.seed)
        n_steps = self.epochs * ctx.n_train
        rewards, actions = np.empty(n_steps), np.empty(n_steps, dtype=np.int64)
        obs, _ = env.reset(seed=ctx.seed)  # seeds the query order (a new permutation each pass)
        for step in tqdm(range(n_steps), desc=f"{self.name} online", disable=not ctx.progress):
            key = (obs["text"], int(obs["benchmark"]))
            shared = table[key] if key in table else self.shared_lines(ObservationBatch.from_observations([obs]))[0]
            pmf = self._pmf(shared)
            a = int(rng.choice(len(pmf), p=pmf / pmf.sum()))
            obs, r, terminated, truncated, _ = env.step(a)
            self._ws.learn(self._example(shared, (a, self.cost(float(r)), float(pmf[a]))))
            rewards[step], actions[step] = r, a
            if terminated or truncated:
                obs, _ = env.reset()
        return {"objective": ctx.objective, "reward": rewards.tolist(), "actions": actions.tolist(),
                "arm_counts": np.bincount(actions, minlength=self.n_models).tolist(), "vw_args": self.vw_args(ctx.seed)}

    # ------------------------------------------------------------------ frozen deterministic policy
    def act_batch(self, batch: ObservationBatch) -> np.ndarray:
        if self._ws is None:
            raise RuntimeError(f"{self.name}: call fit() before act_batch()")
        return np.array([int(np.argmax(self._pmf(shared))) for shared in self.shared_lines(batch)], dtype=np.int64)

    # ------------------------------------------------------------------ pickling: VW's model bytes
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        ws = state.pop("_ws")
        state["_model"] = None
        if ws is not None:
            with tempfile.TemporaryDirectory() as tmp:
                path = os.path.join(tmp, "model.vw")
                ws.save(path)
                with open(path, "rb") as handle:
                    state["_model"] = handle.read()
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        model = state.pop("_model", None)
        self.__dict__.update(state)
        self._ws = None
        if model is not None:
            with tempfile.TemporaryDirectory() as tmp:
                path = os.path.join(tmp, "model.vw")
                with open(path, "wb") as handle:
                    handle.write(model)
                # The model file keeps VW's options (exploration, interactions, seed) itself.
                self._ws = _workspace(f"-i {path} --quiet")
