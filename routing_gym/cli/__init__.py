"""The ``routing-gym`` command line.

Each module in ``COMMAND_MODULES`` defines ``add_commands(cli: CommandLine)`` and adds its
subcommands to a group (``cli.group("data")``) or at the top level (``cli.top``); a handler
is set with ``parser.set_defaults(func=handler)`` and receives the parsed ``args``. Modules
are imported when the CLI starts, so keep heavy imports inside handlers.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Any, NoReturn, Sequence

from routing_gym.errors import RoutingGymError, UsageError
from routing_gym.tournament import PAPER_SPLIT

# The exit status of every command (README "Exit status"): one rule, applied in `main`.
OK = 0
BAD_DATA = 1  # bad input data (validation, missing files), or some run failed (outputs still written)
USAGE = 2  # the command line or a config file asks for something that cannot work; nothing ran
INCOMPLETE = 3  # `collect run` / `collect sweep` stopped with pairs / requests left to retry
INTERRUPTED = 130  # the shell's status for a command stopped by Ctrl-C (128 + SIGINT)
BROKEN_PIPE = 141  # 128 + SIGPIPE: the reader of our output went away (`... | head`)
PAPER_SPLIT_SPEC = ",".join(f"{name}={count}" for name, count in PAPER_SPLIT.items())

def exit_status(exc: BaseException) -> int:
    """The exit status for an error that ended a command: ``USAGE`` for a ``UsageError``
    (unknown names, values out of range, refused coefficients, a malformed config file),
    ``BAD_DATA`` for any other ``RoutingGymError`` or a missing file."""
    return USAGE if isinstance(exc, UsageError) else BAD_DATA


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


def json_object(text: str, option: str) -> dict:
    """An option's JSON object (``--agent-kwargs '{"knn": {"k": 20}}'``); anything else is a usage error."""
    import json

    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{option}: not valid JSON ({exc}): {text!r}") from None
    if not isinstance(value, dict):
        raise UsageError(f"{option}: expected a JSON object, got {text!r}")
    return value


def check_output_path(path: str | os.PathLike, option: str = "--out", directory: bool = True) -> None:
    """Refuse, before any work, an output path that cannot be written (a usage error, exit 2):
    an existing file where a directory goes (``directory``) or a directory where a file goes, a
    path below a file, or a first existing ancestor that is not writable."""
    from pathlib import Path

    target = Path(path)
    if directory and target.exists() and not target.is_dir():
        raise UsageError(f"{option} {path}: is a file, not a directory; name a directory (created if missing)")
    if not directory and target.is_dir():
        raise UsageError(f"{option} {path}: is a directory; name the file to write")
    # the nearest existing folder is where the first directory or file would be created
    ancestor = next(p for p in ([target, *target.parents] if directory else target.parents) if p.exists())
    if not ancestor.is_dir():
        raise UsageError(f"{option} {path}: {ancestor} is a file, so nothing can be created below it")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise UsageError(f"{option} {path}: {ancestor} is not writable")


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
    text = "splits " + ", ".join(f"{name} {counts[name]}" for name in tournament.splits) + f" (seed {tournament.card.split.get('seed')})"
    held_out = tournament.card.split.get("held_out_benchmarks")
    if held_out:
        text += (f"; held out in {tournament.card.split['held_out_split']}: {', '.join(held_out)} "
                 f"(+{tournament.card.split['held_out_copies']} copies from other benchmarks)")
    return text

COMMAND_MODULES = (
    "routing_gym.cli.data",
    "routing_gym.cli.env",
    "routing_gym.cli.generate",
    "routing_gym.cli.build",
    "routing_gym.cli.compare",
    "routing_gym.cli.frontier",
    "routing_gym.cli.headroom",
    "routing_gym.cli.sweep",
    "routing_gym.cli.rewards",
    "routing_gym.cli.collapse",
    "routing_gym.cli.serve",
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


# Modules given with --import on this command line (compare passes them to its workers).
USER_IMPORTS: list[str] = []


def import_user_modules(argv: list[str]) -> list[str]:
    """Import every ``--import MODULE`` (or ``--import path/to/file.py``) wherever it stands in
    ``argv``, so the agents and rewards it registers can be named by any command; returns the
    remaining arguments."""
    from routing_gym.plugins import import_user_module

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
    for module in modules:
        try:
            import_user_module(module)
        except RoutingGymError as exc:
            raise UsageError(str(exc)) from None
        USER_IMPORTS.append(module)
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
        return USAGE
    parser = build_parser()
    args = parser.parse_args(argv)  # argparse exits with USAGE itself
    if not getattr(args, "func", None):
        parser.print_help()
        return USAGE
    command = " ".join(filter(None, ["routing-gym", args.command, getattr(args, f"{args.command}_command", None)]))
    try:
        status = int(args.func(args) or 0)
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's exit-time flush
        return status
    except (RoutingGymError, FileNotFoundError) as exc:
        print(f"{command}: error: {exc}", file=sys.stderr)
        return exit_status(exc)
    except KeyboardInterrupt:
        print("routing-gym: interrupted", file=sys.stderr)
        return INTERRUPTED
    except BrokenPipeError:
        # Python would report the closed pipe again when it flushes stdout at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return BROKEN_PIPE


if __name__ == "__main__":
    sys.exit(main())
