"""``routing-gym env check``: gymnasium's checker and a determinism check on an env id."""

from __future__ import annotations

import argparse

from routing_gym.cli import json_object, positive_int


def add_commands(cli) -> None:
    env = cli.group("env")
    check = env.add_parser("check", help="run gymnasium's env checker and a same-seed determinism check")
    check.add_argument("--id", default="RoutingGym/Replay-v0", help="registered environment id")
    check.add_argument("--tournament", default="default", help="directory or preset name")
    check.add_argument("--kwargs", default="{}", help="extra env kwargs as JSON, e.g. '{\"coefficients\": {\"lambda_e\": 0.4}}'")
    check.add_argument("--steps", type=positive_int, default=200, help="steps compared in the determinism check (>= 1)")
    check.set_defaults(func=cmd_check)


def cmd_check(args: argparse.Namespace) -> int:
    import gymnasium as gym
    import numpy as np
    from gymnasium.utils.env_checker import check_env
    from tqdm import tqdm

    import routing_gym  # noqa: F401  (registers the ids)

    kwargs = json_object(args.kwargs, "--kwargs")
    try:
        spec = gym.spec(args.id)
    except gym.error.Error:
        from routing_gym.errors import UnknownNameError

        known = [i for i in gym.registry if i.startswith("RoutingGym/")]
        raise UnknownNameError("environment id (--id)", args.id, known) from None
    if "tournament" in spec.kwargs or args.id == routing_gym.REPLAY_ID:
        kwargs.setdefault("tournament", args.tournament)
    env = gym.make(args.id, **kwargs)
    check_env(env.unwrapped)
    print(f"gymnasium check_env: passed for {args.id}")

    def trajectory(seed: int) -> list[tuple]:
        env.reset(seed=seed)
        env.action_space.seed(seed)
        steps = []
        for _ in tqdm(range(args.steps), desc=f"seed {seed}", leave=False, disable=None):
            obs, _ = env.reset()
            action = env.action_space.sample()
            _, reward, terminated, truncated, info = env.step(action)
            shown = obs["text"] if isinstance(obs, dict) else np.asarray(obs).tolist()  # a -features id shows a Box
            steps.append((shown, int(action), reward, terminated, truncated))
        return steps

    same = trajectory(7) == trajectory(7)
    print(f"same seed, same trajectory over {args.steps} steps: {'yes' if same else 'NO'}")
    different = trajectory(7) != trajectory(8)
    print(f"different seeds, different trajectories: {'yes' if different else 'no'}")
    u = env.unwrapped
    print(f"observation space: {u.observation_space}\naction space: {u.action_space} ({', '.join(u.tournament.model_ids)})")
    if u.reward is not None:  # the multi-turn env's reward is its own (additive joules over turns), not a registered one
        print(f"reward: {u.reward.describe()}, mean oracle reward on split: {np.mean(u.reward_matrix.max(axis=1)):.3f}")
    else:
        print(f"reward: {type(u).__name__}'s own (see its docstring)")
    return 0 if same else 1
