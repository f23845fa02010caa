"""The ``routing-gym`` command line.

Each module in ``COMMAND_MODULES`` defines ``add_commands(cli: CommandLine)`` and adds its
subcommands to a group (``cli.group("data")``) or at the top level (``cli.top``); a handler
is set with ``parser.set_defaults(func=handler)`` and receives the parsed ``args``. Modules
are imported when the CLI starts, so keep heavy imports inside handlers.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Sequence

from routing_gym.errors import RoutingGymError

COMMAND_MODULES = (
    "routing_gym.cli.data",
    "routing_gym.cli.env",
    "routing_gym.cli.generate",
    "routing_gym.cli.build",
    "routing_gym.cli.compare",
    "routing_gym.cli.collect",
    "routing_gym.cli.experiments",
)

GROUP_HELP = {
    "data": "inspect, validate, generate and build tournaments",
    "env": "check the gymnasium environments",
    "collect": "collect a measured tournament from served models",
}


class CommandLine:
    def __init__(self) -> None:
        self.parser = argparse.ArgumentParser(
            prog="routing-gym", description="Energy-aware LLM routing: tournaments, environments, agents."
        )
        self.top = self.parser.add_subparsers(dest="command", metavar="COMMAND")
        self._groups: dict[str, argparse._SubParsersAction] = {}

    def group(self, name: str) -> argparse._SubParsersAction:
        """The subcommand group ``routing-gym NAME ...`` (created on first use)."""
        if name not in self._groups:
            parser = self.top.add_parser(name, help=GROUP_HELP.get(name, name))
            parser.set_defaults(func=lambda args, p=parser: p.print_help() or 2)
            self._groups[name] = parser.add_subparsers(dest=f"{name}_command", metavar="SUBCOMMAND")
        return self._groups[name]


def build_parser() -> argparse.ArgumentParser:
    cli = CommandLine()
    for module in COMMAND_MODULES:
        try:
            importlib.import_module(module).add_commands(cli)
        except ModuleNotFoundError as exc:
            if exc.name != module:  # a missing dependency inside a command module is a real error
                raise
    return cli.parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except (RoutingGymError, FileNotFoundError) as exc:
        print(f"routing-gym: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
