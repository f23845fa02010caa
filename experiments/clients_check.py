"""Do RL libraries run routing-gym by env id, unmodified?

Three checks, each printing a markdown table and writing it under ``--out``
(default ``experiments/results/clients/``):

1. ``clients``: one throwaway venv per client under ``--venv-root`` (``python3 -m venv``, then
   ``pip install torch==2.13.0 <client> -e <this repo>`` in one command, so torch stays the CPU
   2.13.0). Each client is driven by env id only, the way its own docs do it, for ``--steps``
   steps on each id of ``--ids``: SB3 (``make_vec_env(id, n_envs=4)`` + PPO), TorchRL
   (``GymEnv(id)`` + ``Collector``), Tianshou 2 (``EnvFactoryRegistered(task=id)``
   + its PPO experiment), and CleanRL's own ``ppo.py`` / ``dqn.py`` from the PyPI ``cleanrl``
   package, run as shipped (``python -m cleanrl.ppo --env-id <id>``). A row says whether it
   worked, its env steps per second (the client's own loop: training included), and the first
   error otherwise. ``table.md`` / ``clients.json``.
2. ``reset-share``: the share of zero-reward reset steps inside a vector env built the way
   CleanRL builds it (gymnasium ``SyncVectorEnv``, default next-step autoreset,
   ``RecordEpisodeStatistics``), for a one-query id and its stream id. ``reset_share.md``.
3. ``parity``: SB3 PPO on a ``-features`` id against today's route, ``BoxObservation`` around
   the Dict id: same seed, same budget, held-out (test split) mean reward. ``ppo_parity.md``.

    OMP_NUM_THREADS=1 python experiments/clients_check.py                  # all three (~15 min the first time)
    OMP_NUM_THREADS=1 python experiments/clients_check.py --only reset-share parity
    OMP_NUM_THREADS=1 python experiments/clients_check.py --only clients --clients sb3 torchrl

Venvs are kept and reused (``--fresh`` rebuilds them); their install logs sit beside them. A run
of some clients replaces their rows in ``clients.json`` and rewrites ``table.md`` with all rows.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import textwrap
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import gymnasium as gym
import numpy as np

REPO = Path(__file__).resolve().parents[1]
TORCH = "torch==2.13.0"
DEFAULT_IDS = ("RoutingGym/PaperPool-features-v0", "RoutingGym/PaperPool-features-stream-v0")

# Each client: what its venv installs (one pip command beside torch and this repo; `extra_no_deps`
# a second command with --no-deps, for a package whose declared pins cannot install here), and
# how it runs: a Python snippet (argv: env id, steps; prints one JSON line) or a module's CLI.
SB3 = """
import json, sys, time
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env
env_id, steps = sys.argv[1], int(sys.argv[2])
venv = make_vec_env(env_id, n_envs=4, seed=0)
model = PPO("MlpPolicy", venv, n_steps=256, batch_size=256, device="cpu", seed=0)
start = time.perf_counter()
model.learn(steps)
print(json.dumps({"steps": model.num_timesteps, "seconds": time.perf_counter() - start}))
"""
TORCHRL = """
import json, sys, time
from torchrl.collectors import Collector  # SyncDataCollector before 0.14
from torchrl.envs import GymEnv
env_id, steps = sys.argv[1], int(sys.argv[2])
env = GymEnv(env_id)
collector = Collector(env, policy=None, frames_per_batch=512, total_frames=steps)
start, frames = time.perf_counter(), 0
for batch in collector:
    frames += batch.numel()
print(json.dumps({"steps": frames, "seconds": time.perf_counter() - start}))
"""
TIANSHOU = """
import json, sys, time
from tianshou.highlevel.config import OffPolicyTrainingConfig
from tianshou.highlevel.env import EnvFactoryRegistered, VectorEnvType
from tianshou.highlevel.experiment import DQNExperimentBuilder, ExperimentConfig
env_id, steps = sys.argv[1], int(sys.argv[2])
factory = EnvFactoryRegistered(task=env_id, venv_type=VectorEnvType.DUMMY)
training = OffPolicyTrainingConfig(max_epochs=1, epoch_num_steps=steps, num_training_envs=4, num_test_envs=1,
                                   test_step_num_episodes=1, collection_step_num_env_steps=64, buffer_size=steps)
config = ExperimentConfig(seed=0, device="cpu", watch=False, persistence_enabled=False, log_file_enabled=False)
experiment = DQNExperimentBuilder(factory, config, training).build()
start = time.perf_counter()
experiment.run()
print(json.dumps({"steps": steps, "seconds": time.perf_counter() - start}))
"""


@dataclass(frozen=True)
class Client:
    name: str
    venv: str  # clients with the same venv name share one
    install: tuple[str, ...]
    snippet: str | None = None
    module: str | None = None  # CleanRL: `python -m <module> --env-id ID --total-timesteps N ...`
    module_args: tuple[str, ...] = ()
    extra_no_deps: tuple[str, ...] = ()
    module_prefix: bool = True  # pass `routing_gym:<id>` (gymnasium imports the module); old gym: the plain id


# cleanrl 1.2.0 (its latest on PyPI) declares Requires-Python <3.11 and pins gym 0.23.1,
# stable-baselines3 1.2.0, wandb 0.13, pygame 2.1.0, huggingface-hub 0.11, ...: it goes in with
# --no-deps --ignore-requires-python, beside what its ppo.py and dqn.py import: old gym 0.23.1
# (ppo.py), gymnasium and SB3 >= 2 (dqn.py: its own check asks for 2.x), tensorboard (both).
CLEANRL_INSTALL = ("stable-baselines3>=2", "tensorboard", "gym==0.23.1")
# Tianshou's high-level API (the module of EnvFactoryRegistered) imports rliable: its [eval] extra.
CLIENTS = {
    "sb3": Client("Stable-Baselines3 (make_vec_env(id) + PPO)", "sb3", ("stable-baselines3",), snippet=SB3),
    "torchrl": Client("TorchRL (GymEnv(id) + Collector)", "torchrl", ("torchrl",), snippet=TORCHRL),
    "tianshou": Client("Tianshou 2 (EnvFactoryRegistered(task=id) + DQN)", "tianshou", ("tianshou[eval]>=2",), snippet=TIANSHOU),
    "cleanrl-ppo": Client(
        "CleanRL ppo.py (PyPI cleanrl 1.2.0, unmodified)", "cleanrl", CLEANRL_INSTALL, module="cleanrl.ppo",
        module_args=("--cuda", "False", "--num-envs", "4", "--num-steps", "128"), extra_no_deps=("cleanrl==1.2.0",),
        module_prefix=False,  # gym 0.23 reads `routing_gym:RoutingGym` as a namespace; its plugin hook registers the ids
    ),
    "cleanrl-dqn": Client(
        "CleanRL dqn.py (PyPI cleanrl 1.2.0, unmodified)", "cleanrl", CLEANRL_INSTALL, module="cleanrl.dqn",
        module_args=("--cuda", "False", "--learning-starts", "500", "--train-frequency", "4"), extra_no_deps=("cleanrl==1.2.0",),
    ),
}


@dataclass
class Row:
    client: str
    env_id: str
    works: bool
    steps: int
    steps_per_s: float | None
    first_error: str


def build_venv(client: Client, root: Path, fresh: bool) -> tuple[Path | None, str]:
    """The client's venv (built once), or None and the install's first error."""
    key = client.venv
    venv = root / key
    python = venv / "bin" / "python"
    done = venv / ".installed"
    log = root / f"{key}-install.log"
    if done.exists() and not fresh:
        return python, ""
    if venv.exists():
        subprocess.run(["rm", "-rf", str(venv)], check=True)
    root.mkdir(parents=True, exist_ok=True)  # morl_check calls this without making the root first
    commands = [["python3", "-m", "venv", str(venv)],
                [str(python), "-m", "pip", "install", TORCH, *client.install, "-e", str(REPO)]]
    if client.extra_no_deps:
        commands.append([str(python), "-m", "pip", "install", "--no-deps", "--ignore-requires-python", *client.extra_no_deps])
    with open(log, "w") as out:
        for command in commands:
            out.write("$ " + " ".join(command) + "\n")
            out.flush()
            result = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT)
            if result.returncode != 0:
                return None, f"install failed: {last_error(log.read_text())} ({log})"
    done.touch()
    return python, ""


def last_error(text: str) -> str:
    """The error a run ended with: the last ``ERROR:`` / ``SomethingError: ...`` line."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in reversed(lines):
        if line.startswith("ERROR:") or re.match(r"^[\w.]+(Error|Exception|Exit|NotFound|Warning)\b.*", line):
            return line[:300]
    return (lines[-1][:300] if lines else "no output")


def run_client(client: Client, python: Path, env_id: str, steps: int, workdir: Path, timeout: int) -> Row:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    if client.snippet is not None:
        command = [str(python), "-c", textwrap.dedent(client.snippet), env_id, str(steps)]
    else:
        command = [str(python), "-m", client.module, "--env-id", env_id, "--total-timesteps", str(steps), *client.module_args]
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=workdir, env=env)
    except subprocess.TimeoutExpired:
        return Row(client.name, env_id, False, 0, None, f"timed out after {timeout} s")
    output = result.stdout + "\n" + result.stderr
    if result.returncode != 0:
        return Row(client.name, env_id, False, 0, None, last_error(result.stderr or result.stdout))
    if client.snippet is not None:
        report = json.loads(result.stdout.strip().splitlines()[-1])
        return Row(client.name, env_id, True, int(report["steps"]), report["steps"] / report["seconds"], "")
    sps = re.findall(r"SPS:\s*([\d.]+)", output)  # CleanRL prints its own steps per second
    return Row(client.name, env_id, True, steps, float(sps[-1]) if sps else None, "")


def merged_rows(path: Path, new: list[Row]) -> list[Row]:
    """The rows of an earlier run at ``path`` with this run's rows in place of theirs (same
    client and id), so checking one client again updates its rows of the table."""
    old = [Row(**row) for row in json.loads(path.read_text())] if path.exists() else []
    fresh = {(r.client, r.env_id) for r in new}
    return [r for r in old if (r.client, r.env_id) not in fresh] + new


def clients_table(rows: list[Row]) -> str:
    lines = ["| client | env id | works | env steps | steps/s | first error |", "|---|---|---|---:|---:|---|"]
    for r in rows:
        rate = f"{r.steps_per_s:,.0f}" if r.steps_per_s else "-"
        error = r.first_error.replace("|", "\\|")
        lines.append(f"| {r.client} | `{r.env_id}` | {'yes' if r.works else 'no'} | {r.steps:,} | {rate} | {error} |")
    return "\n".join(lines)


def reset_step_share(env_id: str, num_envs: int = 4, steps: int = 404, seed: int = 0, **kwargs) -> float:
    """Share of zero-reward steps in a vector env built the way CleanRL builds it (gymnasium's
    ``SyncVectorEnv``, default next-step autoreset, ``RecordEpisodeStatistics``), random actions.
    A routing reward is never 0, so a zero reward is a reset step."""
    import routing_gym  # noqa: F401  (registers the ids)

    envs = gym.vector.SyncVectorEnv(
        [lambda: gym.wrappers.RecordEpisodeStatistics(gym.make(env_id, **kwargs)) for _ in range(num_envs)]
    )
    envs.reset(seed=seed)
    envs.action_space.seed(seed)
    zero = 0
    for _ in range(steps):
        _, rewards, _, _, _ = envs.step(envs.action_space.sample())
        zero += int((np.asarray(rewards) == 0).sum())
    envs.close()
    return zero / (steps * num_envs)


def reset_share_table(base: str, steps: int) -> str:
    from routing_gym.envs import STREAM_LENGTH, features_id, stream_id

    lines = [
        f"Zero-reward reset steps in a CleanRL-style `SyncVectorEnv` (4 envs x {steps:,} steps, next-step autoreset, random actions)",
        "",
        "| env id | episode | zero-reward reset steps | expected |",
        "|---|---|---:|---:|",
    ]
    for env_id, episode, expected in (
        (features_id(base), "1 query", 0.5),
        (stream_id(base), f"stream of {STREAM_LENGTH} queries", 1 / (STREAM_LENGTH + 1)),
    ):
        share = reset_step_share(env_id, steps=steps)
        lines.append(f"| `{env_id}` | {episode} | {share:.2%} | {expected:.2%} |")
    return "\n".join(lines)


def ppo_parity_table(base: str, steps: int, seed: int) -> str:
    """PPO on ``<base>-features-v0`` and on ``BoxObservation(<base>)``: held-out mean reward."""
    import torch
    from stable_baselines3 import PPO

    from routing_gym.envs import RoutingEnv, features_id
    from routing_gym.envs.wrappers import BoxObservation

    torch.set_num_threads(1)
    rows = []
    for route, env in (
        (f"`gym.make(\"{features_id(base)}\")`", gym.make(features_id(base))),
        (f"`BoxObservation(gym.make(\"{base}\"))`", BoxObservation(gym.make(base))),
    ):
        start = time.perf_counter()
        model = PPO("MlpPolicy", env, seed=seed, device="cpu")
        model.learn(steps)
        seconds = time.perf_counter() - start
        unwrapped = env.unwrapped
        test = RoutingEnv(tournament=unwrapped.tournament, split="test")
        actions, _ = model.predict(env.get_wrapper_attr("box").features(test.observations()), deterministic=True)
        result = test.evaluate(actions)
        rows.append((route, float(result.rewards.mean()), float(result.correct.mean()), float(result.energy_j.mean()), seconds))
    test = RoutingEnv(tournament=gym.make(base).unwrapped.tournament, split="test")
    lines = [
        f"SB3 PPO (defaults, seed {seed}, {steps:,} steps) on the training split; held-out = the test split "
        f"({len(test.rows):,} queries). Random routing: {test.reward_matrix.mean():.4f}; "
        f"best single model: {test.reward_matrix.mean(axis=0).max():.4f}; oracle: {test.reward_matrix.max(axis=1).mean():.4f}.",
        "",
        "| route | held-out mean reward | accuracy | mean joules (the tournament's, synthetic for a preset) | train seconds |",
        "|---|---:|---:|---:|---:|",
    ]
    for route, reward, accuracy, joules, seconds in rows:
        lines.append(f"| {route} | {reward:.4f} | {accuracy:.4f} | {joules:.1f} | {seconds:.0f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", choices=("clients", "reset-share", "parity"), default=["clients", "reset-share", "parity"])
    parser.add_argument("--clients", nargs="+", choices=list(CLIENTS), default=list(CLIENTS))
    parser.add_argument("--ids", nargs="+", default=list(DEFAULT_IDS))
    parser.add_argument("--steps", type=int, default=4096, help="env steps per client run")
    parser.add_argument("--timeout", type=int, default=900, help="seconds per client run")
    parser.add_argument("--venv-root", type=Path, default=Path("/tmp/routing-gym-clients"))
    parser.add_argument("--fresh", action="store_true", help="rebuild the client venvs")
    parser.add_argument("--base", default="RoutingGym/PaperPool-v0", help="base id of the reset-share and parity checks")
    parser.add_argument("--parity-steps", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=REPO / "experiments" / "results" / "clients")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)

    if "clients" in args.only:
        args.venv_root.mkdir(parents=True, exist_ok=True)
        rows, built = [], {}
        for key in args.clients:
            client = CLIENTS[key]
            if client.venv not in built:
                built[client.venv] = build_venv(client, args.venv_root, args.fresh)
            python, error = built[client.venv]
            for env_id in args.ids:
                if python is None:
                    rows.append(Row(client.name, env_id, False, 0, None, error))
                    continue
                # The module:id form: gymnasium imports routing_gym, which registers the ids.
                name = f"routing_gym:{env_id}" if client.module_prefix else env_id
                rows.append(run_client(client, python, name, args.steps, args.venv_root / f"{key}-runs", args.timeout))
                print(clients_table(rows[-1:]).splitlines()[-1], flush=True)
        rows = merged_rows(args.out / "clients.json", rows)
        table = clients_table(rows)
        header = (f"Each client in its own venv (`pip install {TORCH} <client> -e .`), driven by env id only, "
                  f"{args.steps:,} env steps per run, one CPU thread. steps/s is the client's whole loop (training "
                  f"included) on this machine ({os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.0f} at the end "
                  "of the last run), so compare rows only roughly. CleanRL: `cleanrl==1.2.0` with `--no-deps "
                  "--ignore-requires-python` beside gym 0.23.1, SB3 2.x and tensorboard (its declared pins, Python < 3.11 "
                  "and SB3 1.2.0 among them, cannot install here).\n\n")
        (args.out / "table.md").write_text(header + table + "\n")
        (args.out / "clients.json").write_text(json.dumps([asdict(r) for r in rows], indent=1) + "\n")
        print(table)
    if "reset-share" in args.only:
        table = reset_share_table(args.base, steps=1010)
        (args.out / "reset_share.md").write_text(table + "\n")
        print(table)
    if "parity" in args.only:
        table = ppo_parity_table(args.base, args.parity_steps, args.seed)
        (args.out / "ppo_parity.md").write_text(table + "\n")
        print(table)
    from results_readme import write_readme  # experiments/results_readme.py (here: tests load this file by path)

    write_readme(args.out, "Do RL libraries run routing-gym by env id, unmodified?",
                 f"This run wrote the checks {', '.join(args.only)} (rows of other clients kept from earlier runs are "
                 f"merged into `clients.json` / `table.md`).\n\n{__doc__}")


if __name__ == "__main__":
    main()
