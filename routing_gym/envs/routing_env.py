"""RoutingEnv: replay a tournament as a contextual bandit."""

from __future__ import annotations

from typing import Any, ClassVar

from gymnasium import spaces

from routing_gym.envs.replay import ReplayEnv, RoutingConfig
from routing_gym.errors import RoutingGymError
from routing_gym.tournament.scoring import BatchResult, action_index


def default_config() -> dict[str, Any]:
    """Every RoutingEnv option with its default (``RoutingConfig``); pass overrides as keywords."""
    return RoutingConfig().to_dict()


class RoutingEnv(ReplayEnv):
    """
    ## Description
    Replays a tournament (every candidate model's logged answer to every question) as a
    contextual bandit: each episode shows one question and the agent routes it to one of K
    answer models. Nothing is generated at run time; the chosen model's logged correctness,
    joules, seconds and watts are looked up.

    ## Action Space
    `Discrete(K)`: the index of the answer model (order of `tournament.model_ids`), as an
    integer or an integral float. Booleans, non-integral values and indices outside `[0, K)`
    are invalid: they raise `InvalidActionError` (`invalid_action="raise"`, the default) or
    earn `invalid_penalty` (`invalid_action="penalize"`). `action_masks()` says which
    actions are valid (all of them here; fewer in `ChangingPoolEnv`).

    ## Observation Space
    A `Dict` with:
    - `"text"`: `Text` — the question as shown to a router; the charset is every character
      the tournament's prompts use, `max_length` its longest prompt;
    - `"benchmark"`: `Discrete(B)` — index into `tournament.benchmarks`;
    - `"difficulty"`: `Box(0, 1, (1,))` — only with `include_difficulty=True` on a tournament
      that records difficulty. *Privileged*: the generator's latent, which no deployed router
      sees; `compare` labels agents trained with it not deployable.

    ## Rewards
    The registered reward (default `gated_rank` with `lambda_e = 0.4`, the paper's RL setting
    and `compare`'s default): a correct route earns `2 - (lambda_t z_t + lambda_e z_e +
    lambda_p z_p)`, where the z are the chosen model's rank penalties in [0, 1] among the
    query's candidates for latency, energy and power; a wrong route earns -1; an invalid
    action `invalid_penalty`. Coefficients that break the gate are rejected unless
    `allow_ungated=True`. See `routing_gym.envs.rewards`.

    ## Starting State
    `reset()` draws the next query of the split: a fresh seeded permutation per pass
    (`order="shuffle"`) or table order (`order="sequential"`). `reset(options={"query_id":
    ...})` or `reset(options={"index": i})` (position within the split) pins a query.

    ## Episode End
    Every episode is one step: `terminated=True`, `truncated=False` (so no value is ever
    bootstrapped into the bandit reward). With `stream=T` an episode is a stream of T queries
    instead: each step scores the route exactly as above and shows the next query
    (`terminated=False`), and the T-th step is `truncated=True` (the stream is cut, not over).
    A client that vectorizes with gymnasium's next-step autoreset (CleanRL's `SyncVectorEnv`)
    then spends one reset step in T+1, not one in two. The `-stream` ids set T = 100. A
    learner that bootstraps (`gamma > 0`) adds later queries' rewards to a route's return:
    they do not depend on the route, so they add variance, not bias; `gamma=0` removes it.

    ## Info
    After `reset`: `query_id`. After `step` (about the routed query): also `model_id`, `valid`, `correct`, `energy_j`,
    `latency_s`, `mean_power_w`, `oracle_reward` (best reward available for the query, for
    regret) and the reward components (e.g. `z_energy`); with `stream`, `next_query_id` (the
    query now shown). Info is for logging and regret; agents learn what a query *is* from the
    observation. `oracle_reward`, `reward_matrix` and `evaluate` describe routes not taken:
    privileged handles. The env a bandit agent trains on (`FitContext.make_env`) is the
    bandit-feedback view (`hide_counterfactuals()`): no `oracle_reward` in its info, and
    `reward_matrix` / `evaluate` raise `PrivilegedAccessError`.

    ## Arguments
    `RoutingConfig` (see `default_config()`); pass a config or keyword overrides, and
    gymnasium's `render_mode` (None: nothing renders). Unknown keywords raise Python's own
    `TypeError: ... got an unexpected keyword argument 'x'`. Registered ids:
    `RoutingGym/Replay-v0` (any tournament) and the procedural presets, each also as
    `-features-v0` (a `Box` observation) and `-features-stream-v0` (`registration.py`).

    ## Batched evaluation
    `evaluate(actions)` scores one action per query of the split in split order, vectorized,
    with the one scorer of `routing_gym.tournament.scoring`; `observations()` gives the matching
    `ObservationBatch`.
    """

    config_class: ClassVar[type[RoutingConfig]] = RoutingConfig
    config: RoutingConfig

    def __init__(self, config: RoutingConfig | None = None, **overrides: Any):
        super().__init__(config, **overrides)
        self.observation_space = self._make_observation_space()
        self.action_space = spaces.Discrete(self.tournament.n_models)
        self._current: int | None = None
        self._routed = 0  # queries routed in this episode (streams)

    def _make_observation_space(self) -> spaces.Dict:
        return spaces.Dict(self._question_spaces)

    # ------------------------------------------------------------------ gymnasium API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        if seed is not None:
            self.sampler.restart()
        self._before_draw()
        self._current = self._draw(options)
        self._routed = 0
        return self._observe(self._current), self._complete_info(self._reset_info(self._current))

    def step(self, action):
        if self._current is None:
            raise RoutingGymError("step() called before reset() (or after the episode ended): reset() shows the first query")
        mask = self._valid_now()
        n_actions = self.action_space.n
        # a plain in-range int with every model valid needs none of the action rule's checks
        a = action if mask is None and type(action) is int and 0 <= action < n_actions else \
            self._checked_action(action, n_actions, mask, self.config.invalid_action)
        position, self._current = self._current, None
        info = self.core.route_info(position, a)
        if a is None:
            requested = action_index(action)
            if requested is not None and 0 <= requested < self.action_space.n:
                info["requested_model_id"] = self.tournament.model_ids[requested]  # e.g. a model outside the pool
        if mask is not None:  # the best reward among the actions valid now
            info["oracle_reward"] = float(self.core.reward_matrix[position][mask].max())
        self._add_info(info)
        reward = float(self.reward.invalid_penalty) if a is None else self.core.reward_matrix.item(position, a)
        if self.config.stream is None:
            return self._observe(position), reward, True, False, self._complete_info(info)
        # A stream: show the next query; the last one shown when the stream is cut is never routed.
        self._routed += 1
        self._before_draw()
        shown = self.sampler.next(self.np_random)
        info["next_query_id"] = self.core.query_ids[shown]
        truncated = self._routed >= self.config.stream
        self._current = None if truncated else shown
        return self._observe(shown), reward, False, truncated, self._complete_info(info)

    # ------------------------------------------------------------------ batched API
    def evaluate(self, actions: Any) -> BatchResult:
        """Score one action per query of the split (in split order) at once.

        Invalid actions (see the action rule; e.g. -1 for an unparsable choice) earn
        ``invalid_penalty``, count as wrong and cost nothing; they never raise here.
        """
        self._check_counterfactuals("evaluate()")
        return self.core.score(actions, self._valid_now())

    def info_defaults(self) -> dict[str, Any]:
        """``ReplayEnv.info_defaults`` plus the route's keys, ``requested_model_id`` (an invalid
        action's model) and, for a stream, ``next_query_id``."""
        out = {**super().info_defaults(), **self.core.route_info_defaults(), "requested_model_id": ""}
        if self.config.stream is not None:
            out["next_query_id"] = ""
        return out

    # ------------------------------------------------------------------ hooks for variants
    def _reset_info(self, position: int) -> dict[str, Any]:
        """The info ``reset`` returns (before the defaults fill the other keys)."""
        return self.core.query_info(position)

    def _before_draw(self) -> None:
        """Called by ``reset`` before the next query is drawn (pool events, counters)."""

    def _add_info(self, info: dict[str, Any]) -> None:
        """Extra step info of a variant."""

    def _observe(self, position: int) -> dict[str, Any]:
        return self.core.observation(position, self.config.include_difficulty)  # ReplayEnv._question, one call less
