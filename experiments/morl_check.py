"""Does a MORL-Baselines multi-policy agent train on an MO id unmodified, and how close does its
front come to the exact one? (issue 34)

MORL-Baselines 1.3.0 pins nothing that clashes with ours, but brings wandb, cvxpy, moviepy and
pycddlib (compiled from source: minutes), so it runs in its own venv under ``--venv-root``,
built as ``experiments/clients_check.py`` builds its clients' (``pip install torch==2.13.0
morl-baselines -e <this repo>`` in one command). There, GPI-LS (``morl_baselines``' ``GPILS``,
its own defaults but for the budget knobs named below) trains on the training split of
``mo_gymnasium.make(--id, objectives=(correct, energy), scale=...)``; its front is then the
greedy (GPI) policy's mean reward vector on every held-out query for ``--weights`` equally
spaced weights, beside the env's exact front (``env.unwrapped.pareto_front()``) and both hulls.
Hypervolume and expected utility come from MORL-Baselines' own ``performance_indicators``
(in its venv) and from ``routing_gym.fronts.mo_fronts`` (pymoo, here): both are reported.

Outputs under ``--out`` (default ``experiments/results/morl/``): ``morl.json`` (every point),
``table.md``, ``front.png`` and ``README.md`` (this command and what each file holds).

    OMP_NUM_THREADS=1 python experiments/morl_check.py --steps 10000        # ~8 min venv the first time, ~7 min GPI-LS
    OMP_NUM_THREADS=1 python experiments/morl_check.py --steps 20000 --weights 41
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from clients_check import Client, build_venv, last_error  # noqa: E402  (the same venv recipe)

from routing_gym.envs.mo_env import OBJECTIVES as ALL_OBJECTIVES, UNITS  # noqa: E402
from routing_gym.fronts import mo_fronts  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "morl"
CLIENT = Client("MORL-Baselines GPI-LS", "morl", ("morl-baselines",))
OBJECTIVES = ("correct", "energy")

# Runs in the MORL-Baselines venv; argv: a JSON of the settings; prints one JSON line.
GPI_LS = """
import json, sys, time
import numpy as np
import mo_gymnasium as mo_gym
import routing_gym  # registers the ids
from morl_baselines.common.performance_indicators import expected_utility, hypervolume
from morl_baselines.common.weights import equally_spaced_weights
from morl_baselines.multi_policy.gpi_pd.gpi_pd import GPILS

s = json.loads(sys.argv[1])
make = lambda split: mo_gym.make(s["id"], split=split, objectives=tuple(s["objectives"]), scale=s["scale"])
env, test = make("train"), make("test")
agent = GPILS(env, log=False, seed=s["seed"], device="cpu", net_arch=[64, 64], batch_size=64, gradient_updates=1,
              learning_starts=200, buffer_size=s["steps"], target_net_update_freq=200, initial_epsilon=1.0,
              final_epsilon=0.05, epsilon_decay_steps=s["steps"] // 2, gamma=0.0)
ref = np.array(s["ref_point"], dtype=float)
exact = [np.asarray(p) for p in test.unwrapped.pareto_front(gamma=0.0)]
start = time.perf_counter()
agent.train(total_timesteps=s["steps"], eval_env=test, ref_point=ref, known_pareto_front=exact,
            timesteps_per_iter=s["steps_per_iter"], num_eval_episodes_for_front=s["eval_episodes"], checkpoints=False)
seconds = time.perf_counter() - start
# The agent's front: its greedy (GPI) route for each weight on every held-out query, exactly scored.
values = test.unwrapped.objective_matrix
batch = test.unwrapped.observations()
obs = test.get_wrapper_attr("features")(batch)  # the -features id: BoxObservation's batched view
weights = equally_spaced_weights(len(s["objectives"]), s["weights"])
points = []
for w in weights:
    actions = [agent.eval(o, w) for o in obs]
    points.append(values[np.arange(len(values)), actions].mean(axis=0))
weights_eu = equally_spaced_weights(len(s["objectives"]), 101)
report = {
    "seconds": seconds, "steps": s["steps"], "agent_points": [p.tolist() for p in points],
    "weights": [w.tolist() for w in weights], "exact_front": [p.tolist() for p in exact],
    "fixed_model_hull": test.unwrapped.fixed_model_hull().tolist(), "task_aware_hull": test.unwrapped.task_aware_hull().tolist(),
    "morl_baselines": {name: {"hypervolume": float(hypervolume(ref, front)), "expected_utility": float(expected_utility(front, weights_eu))}
                       for name, front in (("agent", points), ("exact", exact))},
}
print(json.dumps(report))
"""


def run_gpi_ls(python: Path, settings: dict, timeout: int) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore", "WANDB_MODE": "disabled"}
    result = subprocess.run([str(python), "-c", textwrap.dedent(GPI_LS), json.dumps(settings)], capture_output=True,
                            text=True, timeout=timeout, env=env)
    if result.returncode != 0:
        raise SystemExit(f"GPI-LS failed: {last_error(result.stderr or result.stdout)}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def plot(report: dict, title: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.6))
    for key, label, style in (("exact_front", "exact front (oracle, per-query best route)", "-"),
                              ("task_aware_hull", "task-aware hull", "--"), ("fixed_model_hull", "fixed-model hull", ":")):
        p = np.array(report[key])
        ax.plot(-p[:, 1], p[:, 0], style, marker="." if key != "exact_front" else None, label=label)
    agent = np.array(report["agent_points"])
    ax.scatter(-agent[:, 1], agent[:, 0], color="C3", zorder=3, label=f"GPI-LS, {len(agent)} weights")
    ax.set_xlabel(f"{report['objective_labels'][1].lstrip('-')}  (held-out mean, lower is better)")
    ax.set_ylabel(f"{report['objective_labels'][0]}  (held-out mean)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def markdown(report: dict, settings: dict, command: str) -> str:
    ref = settings["ref_point"]
    lines = [f"# GPI-LS (MORL-Baselines) on {settings['id']} against the exact front", "",
             f"Objectives {list(OBJECTIVES)}, scale `{settings['scale']}` ({', '.join(report['objective_labels'])}); "
             f"GPI-LS trained {report['steps']} steps on the training split ({report['seconds']:.0f} s wall in its "
             f"venv); every front evaluated on the held-out split. Reference point {ref}. Expected utility: "
             "101 equally spaced weights.", "",
             "| front | points | hypervolume (MORL-Baselines) | hypervolume (routing_gym, pymoo) | expected utility (MORL-Baselines) | expected utility (routing_gym) |",
             "|---|---:|---:|---:|---:|---:|"]
    for name, key in (("exact (oracle)", "exact"), ("GPI-LS", "agent")):
        mb, ours = report["morl_baselines"][key], report["routing_gym"][key]
        lines.append(f"| {name} | {ours['points']} | {mb['hypervolume']:.4f} | {ours['hypervolume']:.4f} | "
                     f"{mb['expected_utility']:.4f} | {ours['expected_utility']:.4f} |")
    for name, key in (("task-aware hull", "task_aware_hull"), ("fixed-model hull", "fixed_model_hull")):
        ours = report["routing_gym"][key]
        lines.append(f"| {name} | {ours['points']} | — | {ours['hypervolume']:.4f} | — | {ours['expected_utility']:.4f} |")
    lines += ["", f"Command: `{command}`", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--id", default="RoutingGym/MO-PaperPool-features-v0")
    parser.add_argument("--scale", default="rank", choices=("raw", "rank"))
    parser.add_argument("--steps", type=int, default=10000, help="GPI-LS training steps (one query each)")
    parser.add_argument("--steps-per-iter", type=int, default=1000, help="steps per GPI-LS weight iteration")
    parser.add_argument("--eval-episodes", type=int, default=50, help="episodes (queries) per GPI-LS weight evaluation")
    parser.add_argument("--weights", type=int, default=21, help="weights at which the trained agent's front is read")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--venv-root", type=Path, default=Path("/tmp/routing-gym-morl"))
    parser.add_argument("--fresh", action="store_true", help="rebuild the venv")
    parser.add_argument("--timeout", type=int, default=3000)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)

    import mo_gymnasium as mo_gym

    test = mo_gym.make(args.id, split="test", objectives=OBJECTIVES, scale=args.scale).unwrapped
    # reference point: each objective's worst value over the tournament (reward_space.low), so every policy counts
    settings = {"id": args.id, "objectives": list(OBJECTIVES), "scale": args.scale, "steps": args.steps,
                "steps_per_iter": args.steps_per_iter, "eval_episodes": args.eval_episodes, "weights": args.weights,
                "seed": args.seed, "ref_point": test.reward_space.low.tolist()}
    python, error = build_venv(CLIENT, args.venv_root, args.fresh)
    if python is None:
        raise SystemExit(error)
    tic = time.process_time()
    report = run_gpi_ls(python, settings, args.timeout)
    report["objective_labels"] = [label for o, label in zip(ALL_OBJECTIVES, UNITS[args.scale]) if o in OBJECTIVES]
    ref = np.array(settings["ref_point"])
    weights = mo_fronts.equally_spaced_weights(len(OBJECTIVES))
    report["routing_gym"] = {key: {"points": len(report[src]), "hypervolume": mo_fronts.hypervolume(report[src], ref),
                                   "expected_utility": mo_fronts.expected_utility(report[src], weights)}
                             for key, src in (("exact", "exact_front"), ("agent", "agent_points"),
                                              ("task_aware_hull", "task_aware_hull"), ("fixed_model_hull", "fixed_model_hull"))}
    report["settings"] = settings
    args.out.mkdir(parents=True, exist_ok=True)
    command = "OMP_NUM_THREADS=1 python experiments/morl_check.py " + " ".join(argv if argv is not None else sys.argv[1:])
    (args.out / "morl.json").write_text(json.dumps(report, indent=1) + "\n")
    (args.out / "table.md").write_text(markdown(report, settings, command.strip()))
    plot(report, f"GPI-LS vs the exact front, {args.id} (held-out split)", args.out / "front.png")
    (args.out / "README.md").write_text(
        "# MORL-Baselines on an MO id\n\n"
        f"Written by `{command.strip()}` (`experiments/morl_check.py`; its docstring describes the run).\n\n"
        "- `table.md`: hypervolume and expected utility of GPI-LS's front, the exact front and both hulls, from "
        "MORL-Baselines' indicators and from `routing_gym.fronts.mo_fronts`, with the reference point;\n"
        "- `front.png`: the fronts in the objective plane (held-out split);\n"
        "- `morl.json`: every point, the weights, the settings and the training time.\n")
    print(f"wrote {args.out}/table.md, front.png, morl.json, README.md (GPI-LS {report['seconds']:.0f} s; "
          f"driver CPU {time.process_time() - tic:.1f} s)")


if __name__ == "__main__":
    main()
