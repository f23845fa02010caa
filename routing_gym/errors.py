"""Exceptions raised by routing-gym; each message says what is wrong and where.

The class of an error decides the ``routing-gym`` exit status (``routing_gym.cli.exit_status``,
the one rule for every command, written in the README): a ``UsageError`` (something asked for
on the command line or in a config file cannot work: an unknown name, a value out of range,
refused reward coefficients) exits 2; every other ``RoutingGymError`` (bad data: a tournament
or record file that fails validation, a data directory without the files a builder needs)
exits 1.
"""

from __future__ import annotations

import difflib


class RoutingGymError(Exception):
    """Base class of every error routing-gym raises on bad input (exit status 1: bad data)."""


class UsageError(RoutingGymError):
    """A setting that cannot work (an unknown id, a count below 1, refused coefficients): exit status 2."""


class DataError(RoutingGymError):
    """Input data (tournament tables, records, a data directory) is wrong or missing: exit status 1."""


class TournamentValidationError(DataError, ValueError):
    """A tournament file or table is inconsistent.

    ``problems`` lists every problem found as ``(file, row, column, message)`` so that a user
    can fix them all in one pass instead of one per run. ``row`` counts data rows from 1 (a
    JSONL line, a Parquet or in-memory table row; no header), i.e. the 0-based pandas index plus
    one; the message's first line says so.
    """

    def __init__(self, problems: list[tuple[str, int | None, str | None, str]], limit: int = 20):
        self.problems = problems
        lines = [_format_problem(*p) for p in problems[:limit]]
        if len(problems) > limit:
            lines.append(f"... and {len(problems) - limit} more problems")
        super().__init__(f"{len(problems)} problem(s) in tournament data (row N = the N-th data row, counted from 1; "
                         f"pandas index N-1):\n  " + "\n  ".join(lines))


def _format_problem(file: str, row: int | None, column: str | None, message: str) -> str:
    where = file
    if row is not None:
        where += f", row {row}"
    if column is not None:
        where += f", column '{column}'"
    return f"{where}: {message}"


def closest_names(name: str, known: list[str], limit: int = 3) -> list[str]:
    """The registered names most like ``name`` (difflib ratio >= 0.6), keeping only those within
    0.05 of the best, so a shared prefix ("RoutingGym/...") does not pull in every name."""
    scored = sorted(((difflib.SequenceMatcher(None, name, k).ratio(), k) for k in known), reverse=True)
    if not scored or scored[0][0] < 0.6:
        return []
    return [k for ratio, k in scored[:limit] if ratio >= scored[0][0] - 0.05]


class UnknownNameError(UsageError, KeyError):
    """A name (reward, agent, preset, grader) is not registered, or (``known_as``, e.g. "in this
    tournament" for its benchmarks, models and splits) not among the names it could be.

    The message names the closest known names (``difflib``) before listing them all, and
    ends with ``hint`` when given (e.g. that a plugin's agent needs ``--import``)."""

    def __init__(self, kind: str, name: str | list[str], known: list[str], hint: str = "", known_as: str = "registered"):
        # several names: every unknown one is named, so that one run finds all the typos
        names = [name] if isinstance(name, str) else list(name)
        self.kind, self.name, self.names, self.known = kind, names[0], names, sorted(known)
        listed = ", ".join(self.known) or "(none)"
        if len(names) > 1:
            parts = []
            for n in names:
                close = closest_names(str(n), self.known)
                parts.append(f"{n!r}" + (f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""))
            message = f"unknown {kind}s {', '.join(parts)}; {known_as}: {listed}"
        elif close := closest_names(str(name), self.known):
            message = (f"unknown {kind} {names[0]!r}; did you mean {' or '.join(repr(c) for c in close)}? "
                       f"{known_as[0].upper()}{known_as[1:]}: {listed}")
        else:
            message = f"unknown {kind} {names[0]!r}; {known_as}: {listed}"
        super().__init__(message + (f". {hint}" if hint else ""))

    def __str__(self) -> str:  # KeyError would quote the whole message
        return self.args[0]


class UnknownKeywordError(UsageError, TypeError):
    """A keyword an agent's constructor does not take. The message names the agent by its
    registered name (never a private base class) and every keyword it accepts."""

    def __init__(self, agent: str, unknown: list[str], accepted: list[str]):
        self.agent, self.unknown, self.accepted = agent, unknown, accepted
        parts = []
        for key in unknown:
            close = closest_names(key, accepted)
            parts.append(f"{key!r}" + (f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""))
        super().__init__(f"unknown keyword{'s' if len(unknown) > 1 else ''} {', '.join(parts)} for agent {agent!r}; "
                         f"{agent} accepts: {', '.join(accepted) or '(no keywords)'}")


class GateViolationError(UsageError, ValueError):
    """Reward coefficients let some correct route score at or below a wrong one."""


class InvalidActionError(RoutingGymError, ValueError):
    """An action is not a model index in ``[0, K)``."""


class EmptySplitError(UsageError, ValueError):
    """A split or subset selects no queries."""


class PrivilegedAccessError(RoutingGymError, PermissionError):
    """An agent reached for information a deployed router would not have (held-out outcomes,
    answer texts, the generator's latent difficulty) without declaring it."""


class UnseenModelsError(RoutingGymError, NotImplementedError):
    """An agent was asked to route to models it did not train on and has no way to use their
    description (``Agent.describes_new_models`` is False)."""
