"""``routing-gym rewards``: every registered reward with its coefficients, gate and meaning."""

from __future__ import annotations

import argparse
import json


def add_commands(cli) -> None:
    p = cli.top.add_parser(
        "rewards",
        help="list the registered rewards: coefficients (defaults), gate status, one line of meaning",
        description="List every registered reward (built-in, research variants, and those of modules given with "
        "--import): its coefficients with their defaults, how its gate (every correct route above every wrong one) "
        "is checked, and the first line of its docstring. Use a name with compare --reward NAME --coefficients '{...}'.",
    )
    p.add_argument("--json", action="store_true", help="print machine-readable JSON")
    p.set_defaults(func=cmd_rewards)


def cmd_rewards(args: argparse.Namespace) -> int:
    from routing_gym.envs.rewards import DEFAULT_COEFFICIENTS, reward_catalog, resolve_coefficients

    catalog = reward_catalog()
    if args.json:
        print(json.dumps(catalog, indent=2))
        return 0
    for entry in catalog:
        # the values the commands use when no --coefficients is given, not only the registry's neutral ones
        used = resolve_coefficients(entry["name"], None)
        coefficients = ", ".join(f"{k}={used.get(k, v):g}" for k, v in entry["coefficients"].items()) or "(none)"
        print(f"{entry['name']}\n  {entry['meaning']}\n  coefficients (default): {coefficients}\n  gate: {entry['gate']}")
    defaults = ", ".join(f"{k}={v:g}" for k, v in DEFAULT_COEFFICIENTS.items())
    print(f"\n{len(catalog)} rewards. compare, frontier and the envs default to gated_rank with {defaults}; "
          "a coefficient a reward does not take is an error.")
    return 0
