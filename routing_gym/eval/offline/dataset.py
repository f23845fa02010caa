"""A logged tournament as a Minari dataset (``routing-gym data export T --format minari``).

A replayed tournament is an offline dataset of one-step episodes: per query of a split, a
logging policy picks one model (``ope.simulate_log``, so a seed gives exactly the log that
``ope.ope_trials`` draws with that seed), and the episode records

- ``observations``: the question twice (Minari stores T + 1 observations; a one-step
  episode's terminal observation is its query, as ``RoutingEnv.step`` returns it), as the
  env's ``Dict`` (text, benchmark) or its ``Box`` features (``observation="features"``);
- ``actions``: the logged model; ``rewards``: its scalar reward (``reward``, compare's default);
- ``infos`` (T + 1 = 2 entries, both the query's record): ``query_id``, ``row``,
  ``propensity`` (the logging probability of the logged action), ``action_probs`` ``[K]``,
  and every model's outcome ``[K]``: ``correct``, ``energy_j``, ``latency_s``,
  ``mean_power_w`` and the scalar ``reward`` of every route. Minari stores rewards as scalars,
  so the counterfactual outcomes that off-policy evaluation needs sit in the infos.

The dataset's metadata key ``routing_gym`` names the tournament, split, reward, policy, epsilon,
seed and model ids; ``logged_data`` reads a dataset back into ``ope.LoggedData`` and value
matrices, so the OPE study runs on it unchanged. Minari is imported inside the functions
(the ``offline`` extra); storage is Minari's ``arrow`` format (pyarrow is a core dependency).
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from routing_gym.envs import DEFAULT_COEFFICIENTS, REPLAY_ID, ObservationBatch, Reward
from routing_gym.envs.routing_env import RoutingEnv
from routing_gym.errors import RoutingGymError, UsageError
from routing_gym.eval.offline.ope import LoggedData, as_probabilities, epsilon_greedy_logging, simulate_log, uniform_logging
from routing_gym.tournament import Tournament

OUTCOME_KEYS = ("correct", "energy_j", "latency_s", "mean_power_w")
# What the OPE study estimates; one logged route reveals all of them (its columns of LoggedData.rewards).
OPE_METRICS = ("reward", "correct", "energy_j")
METADATA_KEY = "routing_gym"


@dataclass
class OfflineLog:
    """A Minari dataset read back: the log, every route's values and the export's settings."""

    log: LoggedData  # rewards: [n, len(metrics)] of the logged routes
    values: dict[str, np.ndarray]  # metric -> [n, K], every route (from the infos)
    rows: np.ndarray  # tournament rows, in episode order
    probabilities: np.ndarray  # [n, K] the logging policy's action probabilities
    settings: dict[str, Any]


def logging_probabilities(t: Tournament, rows: np.ndarray, policy: str, reward: Reward, epsilon: float,
                          seed: int) -> np.ndarray:
    """``[n, K]``: ``uniform``, or a registered agent trained on the training split (seed
    ``seed``) and made epsilon-greedy around its routes (epsilon 0: its routes, propensity 1)."""
    if policy == "uniform":
        return uniform_logging(len(rows), t.n_models)
    if not 0 <= epsilon <= 1:
        raise RoutingGymError(f"--epsilon must lie in [0, 1], got {epsilon}")
    from routing_gym_agents import FitContext, make_agent  # the agents package sits above routing_gym

    agent = make_agent(policy)
    agent.fit(FitContext(t, reward, seed=seed))
    actions = np.asarray(agent.act_batch(ObservationBatch.from_tournament(t, rows)), dtype=np.int64)
    return as_probabilities(actions, t.n_models) if epsilon == 0 else epsilon_greedy_logging(actions, t.n_models, epsilon)


def export_minari(tournament: Any, dataset_id: str, policy: str = "uniform", split: str = "test", seed: int = 0,
                  epsilon: float = 0.2, reward: Reward | None = None, observation: str = "dict") -> Any:
    """Write ``dataset_id`` (under ``MINARI_DATASETS_PATH``) and return the ``MinariDataset``."""
    import minari
    from minari.data_collector import EpisodeBuffer

    from routing_gym.sources import resolve_tournament

    check_minari_id(dataset_id)  # before any work

    reward = reward or Reward("gated_rank", dict(DEFAULT_COEFFICIENTS))  # compare's default
    t = resolve_tournament(tournament)
    env: Any = RoutingEnv(tournament=t, split=split, reward=reward.name, coefficients=reward.coefficients,
                          invalid_penalty=reward.invalid_penalty)
    rows = env.rows
    batch = env.observations()
    if observation == "features":
        from routing_gym.envs.wrappers import BoxObservation

        env = BoxObservation(env)
        shown: Any = env.features(batch)
    elif observation == "dict":
        shown = None
    else:
        raise RoutingGymError(f"observation must be 'dict' or 'features', got {observation!r}")
    probs = logging_probabilities(t, rows, policy, reward, epsilon, seed)
    matrix = env.unwrapped.reward_matrix
    values = {"reward": matrix, **{k: getattr(t, k)[rows] for k in OUTCOME_KEYS}}
    log = simulate_log(np.stack([values[m] for m in OPE_METRICS], axis=-1), probs, np.random.default_rng(seed))
    buffers = []
    for i in range(len(rows)):
        obs = ({"text": [batch.texts[i]] * 2, "benchmark": [int(batch.benchmarks[i])] * 2} if shown is None
               else np.stack([shown[i], shown[i]]))
        record = {"query_id": str(batch.query_ids[i]), "row": int(rows[i]), "propensity": float(log.propensities[i]),
                  "action_probs": probs[i].copy(), **{k: np.asarray(v[i], dtype=np.float64) for k, v in values.items()}}
        buffers.append(EpisodeBuffer(
            id=i, observations=obs, actions=[int(log.actions[i])], rewards=[float(matrix[i, log.actions[i]])],
            terminations=[True], truncations=[False], infos={k: [v, v] for k, v in record.items()},
        ))
    name = tournament if isinstance(tournament, str) else None
    recover = gym_env(name, split, reward, observation) if name is not None else None
    with _removed_on_failure(dataset_id), warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # Minari warns for each optional metadata field left empty
        dataset = minari.create_dataset_from_buffers(
            dataset_id, buffers, env=recover, action_space=env.action_space, observation_space=env.observation_space,
            algorithm_name=f"{policy} logging" + ("" if policy == "uniform" else f" (epsilon {epsilon:g})"),
            author="routing-gym data export", data_format="arrow",
            description=(f"{t.card.name} ({t.card.provenance}), split {split}: {len(rows)} one-step episodes; "
                         f"actions from {policy} logging, rewards {reward.describe()}; every model's outcome in infos"),
        )
        dataset.storage.update_metadata({METADATA_KEY: {
            "tournament": t.card.name, "tournament_spec": name, "fingerprint": t.fingerprint, "split": split,
            "reward": reward.name, "coefficients": dict(reward.coefficients), "policy": policy, "epsilon": epsilon,
            "seed": seed, "observation": observation, "model_ids": list(t.model_ids),
        }})
    return dataset


def check_minari_id(dataset_id: str) -> None:
    """A dataset id Minari accepts (``(namespace/)name-vN``, Minari's own parser) and that names
    no existing dataset; otherwise a usage error, before anything is written."""
    from minari.dataset.minari_dataset import parse_dataset_id
    from minari.storage import get_dataset_path

    try:
        version = parse_dataset_id(dataset_id)[2]
    except (ValueError, TypeError):  # Minari 0.5 raises TypeError when "-vN" is missing
        version = None
    if version is None:
        raise UsageError(f"Minari dataset id {dataset_id!r}: expected (namespace/)name-vN, e.g. "
                         f"routing-gym/{_id_stem(dataset_id)}-v0 (letters, digits, - and _; the version is required)")
    if get_dataset_path(dataset_id).exists():  # Minari refuses to overwrite a dataset
        raise UsageError(f"Minari dataset {dataset_id!r} already exists ({get_dataset_path(dataset_id)}); "
                         "pick another id or delete it (minari.delete_dataset)")


def _id_stem(dataset_id: str) -> str:
    stem = "".join(c if c.isalnum() or c in "-_" else "-" for c in dataset_id.rsplit("/", 1)[-1]).strip("-_")
    return stem or "my-dataset"


@contextlib.contextmanager
def _removed_on_failure(dataset_id: str) -> Iterator[None]:
    """Delete what a failed ``create_dataset_from_buffers`` left (the dataset folder and a namespace
    folder it created), so that a retry with the same id does not find it "already exists"."""
    import shutil

    from minari.storage import get_dataset_path

    root = get_dataset_path()
    created = [p for p in reversed(get_dataset_path(dataset_id).relative_to(root).parents) if str(p) != "."]
    fresh = [root / p for p in created if not (root / p).exists()] + [get_dataset_path(dataset_id)]
    try:
        yield
    except BaseException:
        shutil.rmtree(fresh[0], ignore_errors=True)  # the outermost folder created holds everything below it
        raise


def gym_env(tournament: str, split: str, reward: Reward, observation: str) -> Any:
    """The env the dataset was logged on, by id (``recover_environment`` and d3rlpy need one)."""
    import gymnasium as gym

    return gym.make(REPLAY_ID, tournament=tournament, split=split, reward=reward.name,
                    coefficients=dict(reward.coefficients), observation=observation)


def logged_data(dataset: Any, metrics: tuple[str, ...] = OPE_METRICS) -> OfflineLog:
    """A Minari dataset written by ``export_minari`` as the OPE inputs (episode order)."""
    settings = dataset.storage.metadata.get(METADATA_KEY)
    if settings is None:
        raise RoutingGymError(f"Minari dataset {dataset.spec.dataset_id!r} has no {METADATA_KEY!r} metadata: "
                              "it was not written by `routing-gym data export --format minari`")
    episodes = list(dataset.iterate_episodes())
    missing = [m for m in metrics if m not in episodes[0].infos]
    if missing:
        raise RoutingGymError(f"Minari dataset {dataset.spec.dataset_id!r}: infos lack {missing}")
    values = {m: np.stack([ep.infos[m][-1] for ep in episodes]) for m in metrics}
    actions = np.array([int(ep.actions[0]) for ep in episodes], dtype=np.int64)
    propensities = np.array([float(ep.infos["propensity"][-1]) for ep in episodes])
    idx = np.arange(len(actions))
    revealed = np.stack([values[m][idx, actions] for m in metrics], axis=-1)
    rows = np.array([int(ep.infos["row"][-1]) for ep in episodes], dtype=np.int64)
    probabilities = np.stack([ep.infos["action_probs"][-1] for ep in episodes])
    return OfflineLog(LoggedData(actions, propensities, revealed), values, rows, probabilities, settings)
