"""ServingEnv: route a stream of arriving questions to model servers that batch them."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from gymnasium import spaces

from routing_gym.envs.replay import ReplayEnv, RoutingConfig
from routing_gym.envs.rewards import CORRECT_BASE, WRONG_REWARD, rank_penalty
from routing_gym.errors import RoutingGymError, UnknownNameError
from routing_gym.serving.simulator import ServingSimulator

ARRIVALS = ("poisson", "bursty", "daily")
ENERGIES = ("physics", "load-free")
STATE_KEYS = ("queue", "batch_fill", "wait_s", "tpot_s")


def default_config() -> dict[str, Any]:
    """Every ServingEnv option with its default (``ServingConfig``); pass overrides as keywords."""
    return ServingConfig().to_dict()


@dataclass(frozen=True)
class ServingConfig(RoutingConfig):
    """A replay config plus the arrival process, the servers and the SLO."""

    tournament: Any = "paper-pool"
    episode_length: int = 500  # arrivals per episode
    arrival: str = "poisson"  # "poisson" | "bursty" (two-state) | "daily" (sinusoidal rate)
    rate: float = 8.0  # mean arrivals per second
    burst_ratio: float = 4.0  # bursty: high-state rate / low-state rate (mean rate kept)
    burst_mean_s: float = 30.0  # bursty: mean dwell time in each state
    day_s: float = 600.0  # daily: period of the cycle (a compressed day)
    day_amplitude: float = 0.8  # daily: rate(t) = rate x (1 + amplitude sin(2 pi t / day_s))
    replicas: Any = 1  # per model: an int, or a sequence of one int per model
    max_batch: Any = None  # per replica: None (physics.DEFAULT_MAX_BATCH), an int or one per model
    energy: str = "physics"  # "physics" (batch curves) | "load-free" (the tournament's own outcomes, no queueing)
    curves: Any = None  # a batch-curve table file; None: ML.ENERGY's H100 runs under the data directory
    idle_w_per_gpu: float = 65.0
    slo_s: float = 60.0  # end-to-end latency objective
    slo_penalty: float = 0.5  # subtracted from a request's reward when it misses the SLO

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.arrival not in ARRIVALS:
            raise UnknownNameError("arrival", self.arrival, list(ARRIVALS))
        if self.energy not in ENERGIES:
            raise UnknownNameError("energy", self.energy, list(ENERGIES))
        if self.stream is not None:
            raise ValueError("ServingEnv episodes are already streams of episode_length arrivals: stream must be None")
        for name in ("rate", "burst_ratio", "burst_mean_s", "day_s", "slo_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)!r}")
        if not (isinstance(self.episode_length, (int, np.integer)) and self.episode_length >= 1):
            raise ValueError(f"episode_length must be an integer >= 1, got {self.episode_length!r}")
        if not 0 <= self.day_amplitude < 1:
            raise ValueError(f"day_amplitude must be in [0, 1), got {self.day_amplitude!r}")


def arrival_times(config: ServingConfig, rng: np.random.Generator) -> np.ndarray:
    """``episode_length`` arrival times (seconds) of the configured process, from ``rng``."""
    n, rate = int(config.episode_length), float(config.rate)
    if config.arrival == "poisson":
        return np.cumsum(rng.exponential(1.0 / rate, n))
    if config.arrival == "bursty":
        # a two-state Markov-modulated Poisson process with equal mean dwell: mean rate = rate
        r = config.burst_ratio
        rates = (2.0 * rate / (1.0 + r), 2.0 * rate * r / (1.0 + r))
        times, t, state = [], 0.0, int(rng.integers(2))
        switch = rng.exponential(config.burst_mean_s)
        while len(times) < n:
            gap = rng.exponential(1.0 / rates[state])
            if t + gap > switch:  # memoryless: restart the draw in the other state
                t, state = switch, 1 - state
                switch = t + rng.exponential(config.burst_mean_s)
                continue
            t += gap
            times.append(t)
        return np.asarray(times)
    # daily: thinning of a Poisson process at the peak rate
    peak = rate * (1.0 + config.day_amplitude)
    times, t = [], 0.0
    while len(times) < n:
        t += rng.exponential(1.0 / peak)
        if rng.random() * peak <= rate * (1.0 + config.day_amplitude * math.sin(2.0 * math.pi * t / config.day_s)):
            times.append(t)
    return np.asarray(times)


_PHYSICS: dict[tuple, tuple] = {}


def _physics(tournament: Any, curves: Any, max_batch: Any, idle_w: float) -> tuple:
    """The tournament's server physics, cached per process by content (fitting takes ~2 s)."""
    from routing_gym.serving.curves import mlenergy_tables, read_batch_curves
    from routing_gym.serving.physics import DEFAULT_MAX_BATCH, physics_for_tournament

    key = (tournament.fingerprint, None if curves is None else str(curves), max_batch, idle_w)
    if key not in _PHYSICS:
        table = mlenergy_tables() if curves is None else read_batch_curves(curves)
        cap = DEFAULT_MAX_BATCH if max_batch is None else max(max_batch) if isinstance(max_batch, tuple) else int(max_batch)
        _PHYSICS[key] = tuple(physics_for_tournament(tournament.models, table, None, max_batch=cap, idle_w_per_gpu=idle_w))
    return _PHYSICS[key]


class ServingEnv(ReplayEnv):
    """
    ## Description
    Routing under load. Questions of a tournament arrive over time (a seeded Poisson, bursty
    two-state or daily-cycle process) and each is routed to one of K model servers. Servers
    batch their requests (iteration-level continuous batching, ``routing_gym.serving``): a
    request's time per output token and joules depend on how many others its replica decodes
    with it, from ML.ENERGY's measured curves (or the energy law, labelled derived). The
    routed model's correctness and token counts are the tournament's (replayed), so accuracy is
    real; latency and joules come from the simulation. An idle replica draws idle power,
    reported apart (``idle_energy_j``).

    ## Action Space
    `Discrete(K)`: the model that serves the question shown (order of `tournament.model_ids`);
    the action rule of `RoutingEnv` (invalid actions raise, or earn `invalid_penalty` with
    `invalid_action="penalize"`, and are dropped).

    ## Observation Space
    A `Dict` with the question as in `RoutingEnv` (`"text"`, `"benchmark"`) and the servers'
    state when it arrives, each a `Box(0, inf, (K,), float32)`:
    - `"queue"`: requests waiting for a batch slot, per model;
    - `"batch_fill"`: running requests over the model's capacity (replicas x max batch);
    - `"wait_s"`: expected wait before decoding starts (0 with a free slot);
    - `"tpot_s"`: the time per output token the request would decode at.

    ## Rewards
    Paid when requests complete: each step returns the sum over the requests that completed
    since the previous step. A request earns the gated-rank reward (`gated_rank`, the
    env's `coefficients`: lambda_t, lambda_e, lambda_p) of its end-to-end latency, attributed
    joules and mean power ranked among the K candidates' expected costs when it was routed (the
    candidates' tokens at their servers' state then; its own entry replaced by what happened),
    minus `slo_penalty` if its latency exceeded `slo_s`. With `energy="load-free"` every
    request is served alone with its tournament outcome, and the reward is the replay env's.

    ## Starting State
    `reset()` empties the servers, draws the episode's arrival times from the seeded process
    and shows the first question (drawn as in `RoutingEnv`).

    ## Episode End
    After `episode_length` routes: the servers drain, the last step pays every remaining
    request and `terminated=True`. Earlier steps: `terminated=False`, `truncated=False`.

    ## Info
    `query_id`, `row` (the question shown), `model_id` (the route taken, `""` at reset),
    `completed` (requests paid this step) and their `correct`, `energy_j`, `latency_s` sums and
    `slo_misses`; cumulative `active_energy_j`, `idle_energy_j`, and the clock `time_s`.
    No `episode` key (SB3's `Monitor` writes it). `env.unwrapped.log` lists the episode's
    completions so far as (split position, model, correct, joules, seconds, finish time), for
    evaluation; `arrivals` holds the episode's arrival times.

    ## Arguments
    `ServingConfig` (see `default_config()`); ids `RoutingGym/Serving-v0` and
    `RoutingGym/Serving-features-v0` (a `Box` observation for SB3).
    """

    config_class: ClassVar[type[ServingConfig]] = ServingConfig
    config: ServingConfig

    def __init__(self, config: ServingConfig | None = None, **overrides: Any):
        super().__init__(config, **overrides)
        cfg = self.config
        t = self.tournament
        k = t.n_models
        replicas = [int(cfg.replicas)] * k if isinstance(cfg.replicas, (int, np.integer)) else [int(r) for r in cfg.replicas]
        max_batch = cfg.max_batch if cfg.max_batch is None or isinstance(cfg.max_batch, (int, np.integer)) else tuple(cfg.max_batch)
        self.physics = list(_physics(t, cfg.curves, max_batch, float(cfg.idle_w_per_gpu)))
        self.sim = ServingSimulator(self.physics, replicas, None if max_batch is None else
                                    (list(max_batch) if isinstance(max_batch, tuple) else int(max_batch)),
                                    load_free=cfg.energy == "load-free")
        rows = self.core.rows
        self._inp, self._out = t.input_tokens[rows], t.output_tokens[rows]
        self._mean_out = self._out.mean(axis=0)
        o = self.core.outcomes
        self._correct, self._energy, self._latency = o.correct, o.energy_j, o.latency_s
        self._capacity = np.array([r * self.sim.max_batch[m] for m, r in enumerate(replicas)], dtype=np.float64)
        self._prefill_s = np.array([p.prefill_s_per_token for p in self.sim.physics])
        self._prefill_j = np.array([p.prefill_j_per_token for p in self.sim.physics])
        cap = max(self.sim.max_batch)
        self._jpt_table = np.stack([np.pad(p.joules_per_token, (0, cap + 1 - len(p.joules_per_token)), mode="edge")
                                    for p in self.sim.physics])
        self._models = np.arange(k)
        coef = dict(cfg.coefficients)
        self._lambdas = (float(coef.get("lambda_t", 0.0)), float(coef.get("lambda_e", 0.0)), float(coef.get("lambda_p", 0.0)))
        if cfg.reward != "gated_rank":
            raise RoutingGymError(f"ServingEnv pays the gated_rank family on completion; reward={cfg.reward!r} is not supported")
        box = spaces.Box(0.0, np.inf, shape=(k,), dtype=np.float32)
        self.observation_space = spaces.Dict({**self._question_spaces, **{key: box for key in STATE_KEYS}})
        self.action_space = spaces.Discrete(k)
        self._times = np.zeros(0)
        self._i = 0
        self._current: int | None = None
        self._pending: dict[int, tuple[int, int, np.ndarray, np.ndarray]] = {}
        self.log = []

    # ------------------------------------------------------------------ gymnasium API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        if seed is not None:
            self.sampler.restart()
        self.sim.reset()
        self._pending = {}
        self.log: list[tuple[int, int, float, float, float, float]] = []  # (position, model, correct, J, s, finish)
        self._times = self.arrivals = arrival_times(self.config, self.np_random)
        self._i = 0
        self._current = self._draw(options)
        return self._observe(self._current), self._complete_info(self.core.query_info(self._current))

    def step(self, action):
        if self._current is None:
            raise RoutingGymError("step() called before reset() (or after the episode ended): reset() shows the first question")
        a = self._checked_action(action, self.action_space.n, None, self.config.invalid_action)
        position = self._current
        now = float(self._times[self._i])
        info: dict[str, Any] = {**self.core.query_info(position), "model_id": ""}
        reward = 0.0
        before: list = []
        if a is None:
            reward += self.reward.invalid_penalty
        else:
            info["model_id"] = self.tournament.model_ids[a]
            est_lat, est_j = self._expected_costs(position)
            inp, out = float(self._inp[position, a]), float(self._out[position, a])
            rid, before = self.sim.submit(now, a, inp, out, float(self._latency[position, a]), float(self._energy[position, a]))
            self._pending[rid] = (position, a, est_lat, est_j)
        self._i += 1
        terminated = self._i >= len(self._times)
        done = before + (self.sim.drain() if terminated else self.sim.advance(float(self._times[self._i])))
        reward += self._pay(done, info)
        if terminated:
            self._current = None
            shown = position
        else:
            self._current = shown = self._draw(None)
            info.update(self.core.query_info(shown))
        info.update(active_energy_j=self.sim.active_energy_j, idle_energy_j=self.sim.idle_energy_j, time_s=self.sim.now)
        return self._observe(shown), float(reward), terminated, False, self._complete_info(info)

    def _expected_costs(self, position: int) -> tuple[np.ndarray, np.ndarray]:
        """Every candidate's expected latency and joules for the question, at the servers' state now."""
        if self.sim.load_free:
            return self._latency[position], self._energy[position]
        _, running, wait, tpot = self._state  # the servers when this question arrived (its observation)
        inp, out = self._inp[position], self._out[position]
        batch = np.minimum(np.floor(running / self.sim._n_reps) + 1, self.sim._caps).astype(int)
        jpt = self._jpt_table[self._models, batch]
        return wait + inp * self._prefill_s + out * tpot, out * jpt + inp * self._prefill_j

    def _pay(self, done: list, info: dict[str, Any]) -> float:
        lt, le, lp = self._lambdas
        total = correct = energy = latency = 0.0
        misses = 0
        for c in done:
            position, a, est_lat, est_j = self._pending.pop(c.request)
            lat, joules = est_lat.copy(), est_j.copy()
            lat[a], joules[a] = c.latency_s, c.energy_j
            ok = float(self._correct[position, a])
            z_t, z_e, z_p = (float(rank_penalty(v)[a]) for v in (lat, joules, joules / np.maximum(lat, 1e-12)))
            total += ok * (CORRECT_BASE - lt * z_t - le * z_e - lp * z_p) + (1.0 - ok) * WRONG_REWARD
            if c.latency_s > self.config.slo_s:
                total -= self.config.slo_penalty
                misses += 1
            self.log.append((position, a, ok, c.energy_j, c.latency_s, c.finish_s))
            correct += ok
            energy += c.energy_j
            latency += c.latency_s
        info.update(completed=len(done), correct=correct, energy_j=energy, latency_s=latency, slo_misses=misses)
        return total

    def info_defaults(self) -> dict[str, Any]:
        """The keys of every info (reset and step), with their values where they do not apply."""
        return {**super().info_defaults(), "model_id": "", "completed": 0, "correct": 0.0, "energy_j": 0.0,
                "latency_s": 0.0, "slo_misses": 0, "active_energy_j": 0.0, "idle_energy_j": 0.0, "time_s": 0.0}

    def _observe(self, position: int) -> dict[str, Any]:
        obs = self._question(position)
        self._state = queue, running, wait, tpot = self.sim.model_state(self._mean_out)
        obs.update(queue=queue.astype(np.float32), batch_fill=(running / self._capacity).astype(np.float32),
                   wait_s=wait.astype(np.float32), tpot_s=tpot.astype(np.float32))
        return obs
