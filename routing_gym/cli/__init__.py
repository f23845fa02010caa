"""The ``routing-gym`` command line.

Each module in ``COMMAND_MODULES`` defines ``add_commands(cli: CommandLine)`` and adds its
subcommands to a group (``cli.group("data")``) or at the top level (``cli.top``); a handler
is set with ``parser.set_defaults(func=handler)`` and receives the parsed ``args``. Modules
are imported when the CLI starts, so keep heavy imports inside handlers.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import sys
from typing import Any, NoReturn, Sequence

from routing_gym.errors import RoutingGymError
from routing_gym.tournament import PAPER_SPLIT

INTERRUPTED = 130  # the shell's status for a command stopped by Ctrl-C (128 + SIGINT)
BROKEN_PIPE = 141  # 128 + SIGPIPE: the reader of our output went away (`... | head`)
PAPER_SPLIT_SPEC = ",".join(f"{name}={count}" for name, count in PAPER_SPLIT.items())


class UsageError(RoutingGymError):
    """A command-line value that cannot work (an unknown id, a count below 1): exit status 2."""


class OneLineArgumentParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (the problem and where to read the usage)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def positive_int(text: str) -> int:
    """An argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def split_proportions(text: str) -> dict[str, float] | None:
    """``"train=2050,test=913"`` -> ``{"train": 2050.0, "test": 913.0}``; ``"none"`` -> None."""
    if text.strip().lower() == "none":
        return None
    proportions: dict[str, float] = {}
    for part in text.split(","):
        name, _, value = part.partition("=")
        try:
            weight = float(value)
        except ValueError:
            weight = float("nan")
        if not name.strip() or not weight >= 0 or weight == float("inf"):
            raise UsageError(f"--split {text!r}: expected NAME=WEIGHT pairs like {PAPER_SPLIT_SPEC} (or none)")
        proportions[name.strip()] = weight
    if sum(proportions.values()) <= 0:
        raise UsageError(f"--split {text!r}: the weights must sum above zero")
    return proportions


def add_split_arguments(parser: argparse.ArgumentParser, seed_flag: str = "--seed") -> None:
    """``--split`` (proportions, default the paper's 2,050 : 913) and a split seed flag."""
    parser.add_argument("--split", default=PAPER_SPLIT_SPEC, metavar="NAME=WEIGHT,...",
                        help=f"seeded split stratified by benchmark, in these proportions (default {PAPER_SPLIT_SPEC}, "
                             "the reference paper's ratio; 'none' writes no split)")
    parser.add_argument(seed_flag, type=int, default=0, dest="split_seed", help="split seed (default 0)")


def describe_splits(tournament: Any) -> str:
    counts = tournament.queries["split"].value_counts()
    if not tournament.splits:
        return "no splits"
    return "splits " + ", ".join(f"{name} {counts[name]}" for name in tournament.splits) + f" (seed {tournament.card.split.get('seed')})"

COMMAND_MODULES = (
    "routing_gym.cli.data",
    "routing_gym.cli.env",
    "routing_gym.cli.generate",
    "routing_gym.cli.build",
    "routing_gym.cli.compare",
    "routing_gym.cli.frontier",
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
        self.parser = OneLineArgumentParser(
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


def import_user_modules(argv: list[str]) -> list[str]:
    """Import every ``--import MODULE`` (or ``--import path/to/file.py``) wherever it stands in
    ``argv``, so the agents and rewards it registers can be named by any command; returns the
    remaining arguments. The working directory is importable, as with ``python -m``."""
    rest, modules = [], []
    items = iter(argv)
    for item in items:
        if item == "--import":
            value = next(items, None)
            if value is None:
                raise UsageError("--import needs a module name or a .py file")
            modules.append(value)
        elif item.startswith("--import="):
            modules.append(item.split("=", 1)[1])
        else:
            rest.append(item)
    if modules and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    for module in modules:
        try:
            if module.endswith(".py"):
                spec = importlib.util.spec_from_file_location(os.path.basename(module)[:-3], module)
                if spec is None or not os.path.exists(module):
                    raise FileNotFoundError(module)
                loaded = importlib.util.module_from_spec(spec)
                sys.modules[spec.name] = loaded
                spec.loader.exec_module(loaded)
            else:
                importlib.import_module(module)
        except Exception as exc:  # the user's module: say which one broke and how, in one line
            raise UsageError(f"--import {module}: {type(exc).__name__}: {exc}") from None
    return rest


def build_parser() -> argparse.ArgumentParser:
    cli = CommandLine()
    cli.parser.add_argument(
        "--import", dest="imports", action="append", default=[], metavar="MODULE",
        help="import MODULE (or a .py file) first, so the agents and rewards it registers can be named; "
             "repeatable, and may stand anywhere on the command line",
    )
    for module in COMMAND_MODULES:
        try:
            importlib.import_module(module).add_commands(cli)
        except ModuleNotFoundError as exc:
            if exc.name != module:  # a missing dependency inside a command module is a real error
                raise
    return cli.parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        argv = import_user_modules(list(sys.argv[1:] if argv is None else argv))
    except UsageError as exc:
        print(f"routing-gym: error: {exc}", file=sys.stderr)
        return 2
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        status = int(args.func(args) or 0)
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's exit-time flush
        return status
    except UsageError as exc:
        print(f"routing-gym: error: {exc}", file=sys.stderr)
        return 2
    except (RoutingGymError, FileNotFoundError) as exc:
        print(f"routing-gym: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("routing-gym: interrupted", file=sys.stderr)
        return INTERRUPTED
    except BrokenPipeError:
        # Python would report the closed pipe again when it flushes stdout at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return BROKEN_PIPE


if __name__ == "__main__":
    sys.exit(main())
