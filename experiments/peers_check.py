"""Do Minari's DataCollector and d3rlpy take routing-gym, each in a venv of its own? (issue 51)

Two round trips, each in a throwaway venv under ``--venv-root`` built as
``experiments/clients_check.py`` builds its clients' (``pip install torch==2.13.0 <packages>
-e <this repo>`` in one command):

1. ``minari``: ``minari[create]`` (the ``DataCollector`` extra, which pulls jax). Every registered
   id is recorded with ``DataCollector(env, record_infos=True, data_format="arrow")`` for
   ``--steps`` random valid actions, written with ``create_dataset`` and read back with
   ``minari.load_dataset`` (an MO id through gymnasium's ``TransformReward``, its objectives
   weighted equally: Minari stores scalar rewards). One row per id: ``minari.md``.
2. ``d3rlpy``: d3rlpy 2.8.1 pins ``gymnasium==1.0.0`` while this package needs 1.1+, so pip is
   first asked (``--dry-run``) to resolve ``d3rlpy`` beside this repo, and what it says is
   recorded; then d3rlpy goes in with ``--no-deps`` beside its other requirements. There,
   ``routing-gym data export paper-pool --format minari --observation dict|features`` writes a
   dataset and ``d3rlpy.datasets.get_minari`` loads it for ``DiscreteBC`` to fit ``--d3rlpy-steps``
   steps. One row per observation kind, with d3rlpy's first error, and whether d3rlpy's
   conversion, run past the env, gives each episode its own observation: ``d3rlpy.md``.

    OMP_NUM_THREADS=1 python experiments/peers_check.py                    # ~5 min the first time (venvs)
    OMP_NUM_THREADS=1 python experiments/peers_check.py --only d3rlpy

Venvs are kept and reused (``--fresh`` rebuilds them); their install logs sit beside them.
Outputs under ``--out`` (default ``experiments/results/peers/``): ``minari.md``, ``d3rlpy.md``,
``peers.json`` and ``README.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from clients_check import TORCH, Client, build_venv, last_error  # noqa: E402  (the same venv recipe)

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "experiments" / "results" / "peers"
MINARI = Client("Minari DataCollector", "minari", ("minari[create]",))
# d3rlpy's own requirements but gymnasium (its pin, 1.0.0, cannot import this package) and torch (pinned above).
D3RLPY = Client("d3rlpy", "d3rlpy", ("minari", "gym>=0.26", "h5py", "structlog", "colorama", "dataclasses-json", "click",
                                     "typing-extensions", "scikit-learn", "tqdm"), extra_no_deps=("d3rlpy==2.8.1",))

# Runs in the minari venv; argv: steps; prints one JSON line per registered id.
RECORD = """
import json, sys, tempfile, os
os.environ["MINARI_DATASETS_PATH"] = tempfile.mkdtemp()
import gymnasium as gym, numpy as np, minari
import routing_gym  # registers the ids
from minari import DataCollector
steps = int(sys.argv[1])
for env_id in sorted(i for i in gym.registry if i.startswith("RoutingGym/")):
    row = {"env_id": env_id, "works": False, "steps": 0, "infos": 0, "error": ""}
    try:
        mo = "/MO-" in env_id
        env = gym.make(env_id, disable_env_checker=mo)
        if mo:
            w = np.full(env.unwrapped.reward_dim, 1 / env.unwrapped.reward_dim)
            env = gym.wrappers.TransformReward(env, lambda r: float(np.dot(r, w)))
        env = DataCollector(env, record_infos=True, data_format="arrow")
        env.reset(seed=0)
        env.action_space.seed(0)
        for _ in range(steps):
            mask = env.unwrapped.action_masks().astype(np.int8) if hasattr(env.unwrapped, "action_masks") else None
            _, _, terminated, truncated, _ = env.step(env.action_space.sample(mask=mask))
            row["steps"] += 1
            if terminated or truncated:
                env.reset()
        name = "peers/" + env_id.split("/")[1].lower().removesuffix("-v0") + "-v0"
        env.create_dataset(dataset_id=name, algorithm_name="random")
        back = minari.load_dataset(name)
        row["infos"] = len(next(back.iterate_episodes()).infos)
        row["works"] = back.total_steps == row["steps"]
    except Exception as exc:
        row["error"] = f"{type(exc).__name__}: {exc}"[:300]
    print(json.dumps(row), flush=True)
"""

# Runs in the d3rlpy venv; argv: dataset id, steps; prints one JSON line.
D3RLPY_FIT = """
import json, sys, traceback
import d3rlpy
dataset_id, steps = sys.argv[1], int(sys.argv[2])
row = {"works": False, "error": "", "observation_shape": None}
try:
    dataset, env = d3rlpy.datasets.get_minari(dataset_id)
    row["observation_shape"] = str(getattr(dataset.dataset_info.observation_signature, "shape", "?"))
    row["env_observation_space"] = str(env.observation_space)
    algo = d3rlpy.algos.DiscreteBCConfig().create(device="cpu:0")
    algo.fit(dataset, n_steps=steps, n_steps_per_epoch=steps, show_progress=False, save_interval=10**9)
    obs, _ = env.reset(seed=0)
    algo.predict(obs[None])  # the recovered env's observation, as an evaluator would pass it
    row["works"] = True
except Exception as exc:
    row["error"] = f"{type(exc).__name__}: {exc}"[:300]
    row["where"] = traceback.extract_tb(exc.__traceback__)[-1].filename.split("site-packages/")[-1]
# Past the env: d3rlpy's own conversion with its TimeLimit replaced by a pass-through, then each
# d3rlpy episode's observation against the Minari episode's (they should be the same query).
try:
    import minari, numpy as np
    d3rlpy.datasets.GymnasiumTimeLimit = lambda env, max_episode_steps=None: env
    dataset, _ = d3rlpy.datasets.get_minari(dataset_id)
    episodes = list(minari.load_dataset(dataset_id).iterate_episodes())
    own = [np.array_equal(d.observations[0], m.observations[0]) for d, m in zip(dataset.episodes, episodes)]
    row["aligned"] = f"{sum(own)} of {len(episodes)}"
except Exception as exc:
    row["aligned"] = f"{type(exc).__name__}: {exc}"[:200]
print(json.dumps(row))
"""


def run_json_lines(command: list[str], env: dict[str, str], timeout: int) -> tuple[list[dict], str]:
    """The JSON lines a snippet printed, and the error it ended with (empty when it exited 0)."""
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env, cwd=REPO)
    except subprocess.TimeoutExpired:
        return [], f"timed out after {timeout} s"
    rows = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    return rows, "" if result.returncode == 0 else last_error(result.stderr or result.stdout)


def child_env(**extra: str) -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore", **extra}


def minari_check(root: Path, fresh: bool, steps: int, timeout: int) -> tuple[list[dict], str]:
    python, error = build_venv(MINARI, root, fresh)
    if python is None:
        return [], error
    return run_json_lines([str(python), "-c", textwrap.dedent(RECORD), str(steps)], child_env(), timeout)


def minari_table(rows: list[dict], error: str, steps: int) -> str:
    works = sum(r["works"] for r in rows)
    lines = [f"`DataCollector(env, record_infos=True, data_format=\"arrow\")` on every registered id, {steps} random "
             f"valid steps each, then `create_dataset` and `minari.load_dataset` (venv: `pip install {TORCH} "
             f"minari[create] -e .`). {works} of {len(rows)} ids recorded and read back.", ""]
    if error:
        lines += [f"The run ended with: {error}", ""]
    lines += ["| env id | works | steps | info keys | first error |", "|---|---|---:|---:|---|"]
    for r in rows:
        lines.append(f"| `{r['env_id']}` | {'yes' if r['works'] else 'no'} | {r['steps']} | {r['infos']} | "
                     f"{r['error'].replace('|', chr(92) + '|')} |")
    return "\n".join(lines)


def d3rlpy_check(root: Path, fresh: bool, steps: int, timeout: int) -> tuple[str, list[dict], str]:
    """What pip says of ``d3rlpy`` beside this repo, then one row per exported observation kind."""
    python, error = build_venv(D3RLPY, root, fresh)
    if python is None:
        return "", [], error
    resolve = subprocess.run([str(python), "-m", "pip", "install", "--dry-run", TORCH, "d3rlpy", "-e", str(REPO)],
                             capture_output=True, text=True, timeout=timeout)
    would = [line for line in resolve.stdout.splitlines() if line.startswith("Would install")]
    plain = would[0] if resolve.returncode == 0 and would else last_error(resolve.stderr or resolve.stdout)
    rows = []
    with tempfile.TemporaryDirectory() as datasets:
        env = child_env(MINARI_DATASETS_PATH=datasets)
        for observation in ("dict", "features"):
            dataset_id = f"routing-gym/paper-pool/uniform-{observation}-v0"
            export = subprocess.run(
                [str(python), "-m", "routing_gym", "data", "export", "paper-pool", "--format", "minari", "--policy",
                 "uniform", "--observation", observation, "--out", dataset_id],
                capture_output=True, text=True, timeout=timeout, env=env, cwd=REPO)
            if export.returncode != 0:
                rows.append({"observation": observation, "works": False, "error": "export: " + last_error(export.stderr)})
                continue
            fitted, fit_error = run_json_lines([str(python), "-c", textwrap.dedent(D3RLPY_FIT), dataset_id, str(steps)],
                                               env, timeout)
            row = fitted[0] if fitted else {"works": False, "error": fit_error}
            rows.append({"observation": observation, **row})
    return plain, rows, ""


def d3rlpy_table(plain: str, rows: list[dict], error: str, steps: int) -> str:
    lines = [f"`pip install --dry-run {TORCH} d3rlpy -e .` says: {plain or '-'}", "",
             f"With d3rlpy 2.8.1 installed `--no-deps` (beside {', '.join(D3RLPY.install)}): `routing-gym data export "
             f"paper-pool --format minari --policy uniform --observation ...`, then `d3rlpy.datasets.get_minari(id)` and "
             f"`DiscreteBC` for {steps} steps, then a prediction on the recovered env's observation.", ""]
    if error:
        lines += [f"The check ended with: {error}", ""]
    lines += ["\"Own observation\": d3rlpy's conversion run past the env (its `TimeLimit` replaced by a pass-through): "
              "d3rlpy episodes whose first observation is that of the Minari episode with the same index.", "",
              "| export | works | d3rlpy's observation shape | recovered env's observation space | first error (where) "
              "| own observation |", "|---|---|---|---|---|---|"]
    for r in rows:
        where = f" ({r['where']})" if r.get("where") else ""
        error = (r["error"] + where).replace("|", chr(92) + "|").replace("\n", " ") or "-"
        lines.append(f"| `--observation {r['observation']}` | {'yes' if r['works'] else 'no'} | "
                     f"{r.get('observation_shape') or '-'} | {r.get('env_observation_space') or '-'} | {error} | "
                     f"{(r.get('aligned') or '-').replace(chr(10), ' ')} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", choices=("minari", "d3rlpy"), default=["minari", "d3rlpy"])
    parser.add_argument("--steps", type=int, default=6, help="DataCollector steps per id")
    parser.add_argument("--d3rlpy-steps", type=int, default=200, help="DiscreteBC gradient steps")
    parser.add_argument("--timeout", type=int, default=900, help="seconds per child run")
    parser.add_argument("--venv-root", type=Path, default=Path("/tmp/routing-gym-peers"))
    parser.add_argument("--fresh", action="store_true", help="rebuild the venvs")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    report: dict = json.loads((args.out / "peers.json").read_text()) if (args.out / "peers.json").exists() else {}
    if "minari" in args.only:
        rows, error = minari_check(args.venv_root, args.fresh, args.steps, args.timeout)
        table = minari_table(rows, error, args.steps)
        (args.out / "minari.md").write_text(table + "\n")
        report["minari"] = {"rows": rows, "error": error}
        print(table)
    if "d3rlpy" in args.only:
        plain, rows, error = d3rlpy_check(args.venv_root, args.fresh, args.d3rlpy_steps, args.timeout)
        table = d3rlpy_table(plain, rows, error, args.d3rlpy_steps)
        (args.out / "d3rlpy.md").write_text(table + "\n")
        report["d3rlpy"] = {"pip_plain_install": plain, "rows": rows, "error": error}
        print(table)
    (args.out / "peers.json").write_text(json.dumps(report, indent=1) + "\n")
    from results_readme import write_readme  # experiments/results_readme.py

    write_readme(args.out, "Do Minari's DataCollector and d3rlpy take routing-gym?",
                 f"This run wrote the checks {', '.join(args.only)} (`peers.json` keeps the other's rows from an "
                 f"earlier run).\n\n{__doc__}")


if __name__ == "__main__":
    main()
