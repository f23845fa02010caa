"""A discrete-event simulator of model servers with iteration-level continuous batching.

Each model has ``replicas`` identical replicas; each replica decodes up to ``max_batch``
requests together (one output token per request per iteration, iteration time ``tpot(b)``,
``b x e(b)`` joules, :class:`~routing_gym.serving.physics.ServerPhysics`). A request routed to
a model joins the replica with the fewest running requests; when every replica is full it waits
in the model's FIFO queue and joins the first freed slot. Joining stalls the replica for the
request's prefill (its joules go to the request).

Iterations are advanced in chunks between events: while a replica's batch does not change, its
iteration counter and a per-request cumulative energy share grow linearly, so a request's
joules are the share counter at its completion minus the counter when it joined (its share of
every iteration it was in) — no per-token loop. Events are completions (one global heap,
entries invalidated by a per-replica version) and arrivals (``submit``). A request joining
mid-iteration starts counting at once (a fluid approximation: at most one token's time per
request). A replica with no request draws its idle power; that energy is kept apart
(``idle_energy_j``) and added in the total.

``load_free=True`` is the replay env's world: infinite capacity, every request served alone with
the latency and joules it is given (its tournament outcome).
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from routing_gym.errors import RoutingGymError
from routing_gym.serving.physics import ServerPhysics


@dataclass(frozen=True)
class Completion:
    """One finished request: its id, model, arrival and finish time and attributed joules."""

    request: int
    model: int
    arrival_s: float
    finish_s: float
    energy_j: float

    @property
    def latency_s(self) -> float:
        return self.finish_s - self.arrival_s


class ServingSimulator:
    """Model servers for ``physics`` (one per model) with ``replicas`` replicas each."""

    def __init__(self, physics: Sequence[ServerPhysics], replicas: int | Sequence[int] = 1,
                 max_batch: int | Sequence[int] | None = None, load_free: bool = False) -> None:
        k = len(physics)
        reps = [replicas] * k if isinstance(replicas, int) else list(replicas)
        caps = [p.max_batch for p in physics] if max_batch is None else (
            [max_batch] * k if isinstance(max_batch, int) else list(max_batch))
        if len(reps) != k or len(caps) != k or min(reps) < 1 or min(caps) < 1:
            raise RoutingGymError(f"replicas and max_batch: one integer >= 1 per model ({k}), got {replicas!r}, {max_batch!r}")
        self.physics = [p if p.max_batch == c else p.with_max_batch(c) for p, c in zip(physics, caps)]
        self.replicas, self.max_batch, self.load_free = reps, caps, load_free
        self.model_of = [m for m in range(k) for _ in range(reps[m])]
        self.replicas_of = [[r for r, m in enumerate(self.model_of) if m == mm] for mm in range(k)]
        # per-replica lookups as Python lists: indexing a list is several times faster than numpy scalars
        self._tpot = [self.physics[m].tpot_s.tolist() for m in self.model_of]
        self._jpt = [self.physics[m].joules_per_token.tolist() for m in self.model_of]
        self._idle_w = [self.physics[m].idle_power_w for m in self.model_of]
        self._prefill_s = [self.physics[m].prefill_s_per_token for m in self.model_of]
        self._prefill_j = [self.physics[m].prefill_j_per_token for m in self.model_of]
        # model_state's vectorized view: replicas of a model are contiguous, starting at _starts
        self._starts = np.array([reps[0] for reps in self.replicas_of])
        self._caps = np.array(caps)
        self._n_reps = np.array(reps, dtype=np.float64)
        self._tpot_table = np.stack([np.pad(p.tpot_s, (0, max(caps) + 1 - len(p.tpot_s)), mode="edge") for p in self.physics])
        self.reset()

    def reset(self) -> None:
        n = len(self.model_of)
        self.now = 0.0
        self._t = [0.0] * n  # time each replica's state is valid at
        self._iters = [0.0] * n  # iterations decoded (tokens per running request)
        self._share = [0.0] * n  # joules per running request, cumulative
        self._stall = [0.0] * n  # prefill seconds left before decoding resumes
        self.batch = [0] * n
        self._finish: list[list[tuple[float, int]]] = [[] for _ in range(n)]
        self._version = [0] * n
        self._events: list[tuple[float, int, int]] = []
        self.queues: list[deque[int]] = [deque() for _ in self.physics]
        self.active_energy_j = 0.0
        self.idle_energy_j = 0.0
        self.completed = 0
        self.in_system = 0
        self._arrival: list[float] = []
        self._join_share: list[float] = []
        self._tokens: list[tuple[float, float]] = []  # (input tokens, output tokens)
        self._model: list[int] = []
        self._fixed: list[tuple[float, float]] = []  # load-free: (latency, joules)

    # ------------------------------------------------------------------ arrivals
    def submit(self, t: float, model: int, input_tokens: float, output_tokens: float,
               latency_s: float = 0.0, energy_j: float = 0.0) -> tuple[int, list[Completion]]:
        """Route a request arriving at ``t`` to ``model``; returns its id and the requests that
        completed up to ``t``. ``latency_s`` / ``energy_j``: its outcome when ``load_free``."""
        done = self.advance(t)
        rid = len(self._arrival)
        self._arrival.append(t)
        self._model.append(model)
        self._tokens.append((float(input_tokens), max(float(output_tokens), 1.0)))
        self._join_share.append(0.0)
        self.in_system += 1
        if self.load_free:
            self._fixed.append((latency_s, energy_j))
            heapq.heappush(self._events, (t + latency_s, -1, rid))
            return rid, done
        best, fewest = -1, 1 << 30
        for r in self.replicas_of[model]:
            if self.batch[r] < fewest:
                best, fewest = r, self.batch[r]
        if fewest >= self.max_batch[model]:
            self.queues[model].append(rid)
        else:
            self._progress(best, t)
            self._admit(best, rid)
            self._schedule(best)
        return rid, done

    def _admit(self, r: int, rid: int) -> None:
        inp, out = self._tokens[rid]
        self._stall[r] += inp * self._prefill_s[r]
        self._join_share[rid] = self._share[r]
        heapq.heappush(self._finish[r], (self._iters[r] + out, rid))
        self.batch[r] += 1

    # ------------------------------------------------------------------ time
    def _progress(self, r: int, t: float) -> None:
        """Decode replica ``r`` from its last time to ``t`` (no completion in between)."""
        dt = t - self._t[r]
        if dt <= 0.0:
            return
        self._t[r] = t
        b = self.batch[r]
        if b == 0:
            self.idle_energy_j += self._idle_w[r] * dt
            return
        stall = self._stall[r]
        if stall > 0.0:
            used = stall if stall < dt else dt
            self._stall[r] = stall - used
            dt -= used
        k = dt / self._tpot[r][b]
        self._iters[r] += k
        share = k * self._jpt[r][b]
        self._share[r] += share
        self.active_energy_j += share * b

    def _schedule(self, r: int) -> None:
        self._version[r] += 1
        if self.batch[r]:
            b = self.batch[r]
            due = self._t[r] + self._stall[r] + (self._finish[r][0][0] - self._iters[r]) * self._tpot[r][b]
            heapq.heappush(self._events, (due, r, self._version[r]))

    def advance(self, t: float) -> list[Completion]:
        """Run every event up to time ``t``; the requests that completed, in order."""
        done: list[Completion] = []
        events = self._events
        while events and events[0][0] <= t:
            due, r, tag = heapq.heappop(events)
            if r < 0:  # a load-free completion: tag is the request
                latency, energy = self._fixed[tag]
                self.active_energy_j += energy
                done.append(Completion(tag, self._model[tag], self._arrival[tag], due, energy))
                continue
            if tag != self._version[r]:
                continue
            self._complete(r, due, done)
        if t != float("inf"):
            self.now = max(self.now, t)
        self.completed += len(done)
        self.in_system -= len(done)
        return done

    def _complete(self, r: int, due: float, done: list[Completion]) -> None:
        finish = self._finish[r]
        target = finish[0][0]
        b = self.batch[r]
        k = target - self._iters[r]  # exactly the iterations to the first completion (no float drift)
        self._stall[r] = 0.0
        self._iters[r] = target
        share = k * self._jpt[r][b]
        self._share[r] += share
        self.active_energy_j += share * b
        self._t[r] = due
        model = self.model_of[r]
        while finish and finish[0][0] <= target:
            _, rid = heapq.heappop(finish)
            self.batch[r] -= 1
            energy = self._share[r] - self._join_share[rid] + self._tokens[rid][0] * self._prefill_j[r]
            self.active_energy_j += self._tokens[rid][0] * self._prefill_j[r]
            done.append(Completion(rid, model, self._arrival[rid], due, energy))
        queue = self.queues[model]
        while queue and self.batch[r] < self.max_batch[model]:
            self._admit(r, queue.popleft())
        self._schedule(r)

    def drain(self) -> list[Completion]:
        """Run until every submitted request has completed; idle power is counted up to then."""
        done = self.advance(float("inf"))
        end = max([c.finish_s for c in done] + [self.now, *self._t])
        self.settle(end)
        return done

    def settle(self, t: float) -> None:
        """Bring every replica's clock (and its idle energy) to ``t`` (no event may be pending before ``t``)."""
        if self._events and self._events[0][0] < t:
            raise RoutingGymError("settle: events are pending before that time; advance first")
        for r in range(len(self.model_of)):
            self._progress(r, t)
        self.now = max(self.now, t)

    # ------------------------------------------------------------------ state
    def model_state(self, mean_output_tokens: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Per model: queue length, running requests, expected wait before decoding starts
        (0 with a free slot, else the queue ahead served at the full batch's completion rate
        for ``mean_output_tokens``), and the time per output token it would decode at."""
        queue = np.array([len(q) for q in self.queues], dtype=np.float64)
        batches = np.array(self.batch)
        running = np.add.reduceat(batches, self._starts).astype(np.float64)
        least = np.minimum.reduceat(batches, self._starts)
        rows = np.arange(len(self.physics))
        tpot = self._tpot_table[rows, np.minimum(least + 1, self._caps)]
        full = least >= self._caps
        rate = self._n_reps * self._caps / (self._tpot_table[rows, self._caps] * np.asarray(mean_output_tokens, float))
        wait = np.where(full, (queue + 1.0) / rate, 0.0)
        return queue, running, wait, tpot
