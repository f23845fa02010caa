"""Exceptions raised by routing-gym; each message says what is wrong and where."""

from __future__ import annotations


class RoutingGymError(Exception):
    """Base class of every error routing-gym raises on bad input."""


class TournamentValidationError(RoutingGymError, ValueError):
    """A tournament file or table is inconsistent.

    ``problems`` lists every problem found as ``(file, row, column, message)`` so that a user
    can fix them all in one pass instead of one per run.
    """

    def __init__(self, problems: list[tuple[str, int | None, str | None, str]], limit: int = 20):
        self.problems = problems
        lines = [_format_problem(*p) for p in problems[:limit]]
        if len(problems) > limit:
            lines.append(f"... and {len(problems) - limit} more problems")
        super().__init__(f"{len(problems)} problem(s) in tournament data:\n  " + "\n  ".join(lines))


def _format_problem(file: str, row: int | None, column: str | None, message: str) -> str:
    where = file
    if row is not None:
        where += f", row {row}"
    if column is not None:
        where += f", column '{column}'"
    return f"{where}: {message}"


class UnknownNameError(RoutingGymError, KeyError):
    """A name (reward, agent, preset, grader, split) is not registered."""

    def __init__(self, kind: str, name: str, known: list[str]):
        self.kind, self.name, self.known = kind, name, sorted(known)
        super().__init__(f"unknown {kind} {name!r}; registered: {', '.join(self.known) or '(none)'}")

    def __str__(self) -> str:  # KeyError would quote the whole message
        return self.args[0]


class GateViolationError(RoutingGymError, ValueError):
    """Reward coefficients let some correct route score at or below a wrong one."""


class InvalidActionError(RoutingGymError, ValueError):
    """An action is not a model index in ``[0, K)``."""


class EmptySplitError(RoutingGymError, ValueError):
    """A split or subset selects no queries."""


class PrivilegedAccessError(RoutingGymError, PermissionError):
    """An agent reached for information a deployed router would not have (held-out outcomes,
    answer texts, the generator's latent difficulty) without declaring it."""
