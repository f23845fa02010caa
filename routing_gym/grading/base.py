"""Grader interface, result type, registry and the process-pool batch grader."""

from __future__ import annotations

import ast
import multiprocessing
import os
import sys
import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any

from routing_gym.errors import RoutingGymError, UnknownNameError

# Longer outputs are graded False rather than scanned: a 4,096-token generation is ~20k
# characters, so anything this large is runaway or not a model answer.
MAX_OUTPUT_CHARS = 400_000


@dataclass(frozen=True)
class GradeResult:
    """The verdict on one output.

    ``correct`` is the verdict, ``extracted`` the answer the grader read from the output
    (``None`` when it found none) and ``reason`` a short human-readable explanation.
    """

    correct: bool
    extracted: str | None
    reason: str

    @property
    def score(self) -> float:
        return 1.0 if self.correct else 0.0


class GraderInputError(RoutingGymError, ValueError):
    """A reference (gold answer, test program) is unusable; model outputs never raise this."""


class Grader(ABC):
    """Grades a model output against a reference. Subclasses implement :meth:`_grade`.

    :meth:`grade` never raises on a malformed *output* (not text, empty, enormous, unparsable):
    it returns ``correct=False`` with the reason. A malformed *reference* raises
    :class:`GraderInputError`, because that is a data bug, not a model failure.
    """

    name: str = ""

    def __init__(self, name: str | None = None):
        if name:
            self.name = name

    def grade(self, output: object, reference: Any, metadata: Mapping[str, Any] | None = None) -> GradeResult:
        metadata = metadata or {}
        self.check_reference(reference, metadata)
        if not isinstance(output, str):
            return GradeResult(False, None, f"output is not text ({type(output).__name__})")
        if not output.strip():
            return GradeResult(False, None, "empty output")
        if len(output) > MAX_OUTPUT_CHARS:
            return GradeResult(False, None, f"output too long ({len(output):,} chars > {MAX_OUTPUT_CHARS:,})")
        try:
            return self._grade(output, reference, metadata)
        except GraderInputError:
            raise
        except Exception as exc:  # a parser bug on odd output must not abort a whole build
            return GradeResult(False, None, f"grader error on this output: {type(exc).__name__}: {exc}")

    def check_reference(self, reference: Any, metadata: Mapping[str, Any]) -> None:
        if reference is None or (isinstance(reference, str) and not reference.strip()):
            raise GraderInputError(f"{self.name} grader: empty reference")

    @abstractmethod
    def _grade(self, output: str, reference: Any, metadata: Mapping[str, Any]) -> GradeResult: ...


_REGISTRY: dict[str, Callable[[], Grader]] = {}
_INSTANCES: dict[str, Grader] = {}


def register_grader(name: str, factory: Callable[[], Grader], *, overwrite: bool = False) -> None:
    """Register a grader factory (a class or zero-argument callable) under ``name``."""
    if name in _REGISTRY and not overwrite:
        raise RoutingGymError(f"grader {name!r} is already registered")
    _REGISTRY[name] = factory
    _INSTANCES.pop(name, None)


def get_grader(name: str) -> Grader:
    """The grader registered as ``name`` (one shared instance per name)."""
    if name not in _REGISTRY:
        raise UnknownNameError("grader", name, list(_REGISTRY))
    if name not in _INSTANCES:
        _INSTANCES[name] = _REGISTRY[name]()
    return _INSTANCES[name]


def grader_names() -> list[str]:
    return sorted(_REGISTRY)


def grade(name: str, output: object, reference: Any, metadata: Mapping[str, Any] | None = None) -> GradeResult:
    """Grade one output with the grader registered as ``name``."""
    return get_grader(name).grade(output, reference, metadata)


def _grade_chunk(args: tuple[str, list[tuple[object, Any, Mapping[str, Any] | None]]]) -> list[GradeResult]:
    name, items = args
    import routing_gym.grading  # noqa: F401  (registers the built-in graders in a spawned worker)

    grader = get_grader(name)
    return [grader.grade(o, r, m) for o, r, m in items]


def grade_batch(
    name: str,
    outputs: Sequence[object],
    references: Sequence[Any],
    metadata: Sequence[Mapping[str, Any] | None] | None = None,
    *,
    processes: int | None = None,
    chunksize: int = 64,
    disable_progress: bool | None = None,
) -> list[GradeResult]:
    """Grade many outputs, in worker processes when ``processes`` > 1.

    math-verify times out with ``signal.alarm``, which only works in a main thread, so the
    parallel path uses processes (spawned, so no lock or thread state is inherited), never
    threads. ``processes=None`` uses every CPU; ``processes`` <= 1 grades in this process.
    Spawned workers re-import the main module, so a script must call it (or anything that
    builds a real-data tournament) from under ``if __name__ == "__main__":``. When it is
    called from a script's top-level code outside that guard, it grades in this process
    instead and warns (``RuntimeWarning``) how to get the workers back; if the worker pool
    breaks anyway, the remaining outputs are graded here too. Results come back in input order.
    """
    if len(outputs) != len(references):
        raise GraderInputError(f"grade_batch: {len(outputs)} outputs but {len(references)} references")
    metas: Sequence[Mapping[str, Any] | None] = metadata if metadata is not None else [None] * len(outputs)
    if len(metas) != len(outputs):
        raise GraderInputError(f"grade_batch: {len(outputs)} outputs but {len(metas)} metadata rows")
    get_grader(name)  # fail fast on an unknown name, before any worker starts
    items = list(zip(outputs, references, metas))
    chunks = [items[i : i + chunksize] for i in range(0, len(items), chunksize)]
    n_proc = processes if processes is not None else (os.cpu_count() or 1)
    n_proc = min(n_proc, len(chunks))
    if n_proc > 1:
        script = unguarded_main_script()
        if script is not None:
            warnings.warn(
                f"grading {len(items)} {name} outputs in this process, not in {n_proc} workers: {script} calls "
                f"this from top-level code outside 'if __name__ == \"__main__\":', and every worker process would "
                f"run that script again. Move the script's code under that guard to grade in parallel.",
                RuntimeWarning,
                stacklevel=2,
            )
            n_proc = 1
    from tqdm.auto import tqdm

    bar = tqdm(total=len(items), desc=f"grading {name}", unit="output", disable=disable_progress)
    results: list[GradeResult] = []
    try:
        if n_proc <= 1:
            for chunk in chunks:
                results.extend(_grade_chunk((name, chunk)))
                bar.update(len(chunk))
        else:
            ctx = multiprocessing.get_context("spawn")
            try:
                with ProcessPoolExecutor(max_workers=n_proc, mp_context=ctx) as pool:
                    for part in pool.map(_grade_chunk, [(name, c) for c in chunks]):
                        results.extend(part)
                        bar.update(len(part))
            except BrokenProcessPool as exc:  # a worker died (killed, out of memory, failed to start)
                warnings.warn(
                    f"a {name} grading worker process died ({exc}); grading the remaining "
                    f"{len(items) - len(results)} outputs in this process",
                    RuntimeWarning,
                    stacklevel=2,
                )
                for chunk in chunks[len(results) // chunksize :]:
                    results.extend(_grade_chunk((name, chunk)))
                    bar.update(len(chunk))
    finally:
        bar.close()
    return results


def unguarded_main_script() -> str | None:
    """The main script's path when the current call comes from its top-level code outside an
    ``if __name__ == "__main__":`` block (spawned workers would run that code again), else None.

    Reads the script with ``ast`` and checks whether the line executing in the script's
    module frame lies inside such a block.
    """
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if main is None or not path or not path.endswith(".py") or getattr(main, "__name__", "") != "__main__":
        return None
    spec_name = getattr(getattr(main, "__spec__", None), "name", None) or ""
    if spec_name.endswith(".__main__"):  # `python -m package`: spawned workers do not run it again
        return None
    frame = sys._getframe(1)
    while frame is not None and not (frame.f_globals is main.__dict__ and frame.f_code.co_name == "<module>"):
        frame = frame.f_back
    if frame is None:  # not running under the script's top-level code (a thread, an atexit hook)
        return None
    try:
        tree = ast.parse(open(path, encoding="utf-8").read(), filename=path)
    except (OSError, SyntaxError, ValueError):
        return None
    line = frame.f_lineno
    for node in tree.body:
        if isinstance(node, ast.If) and _is_main_guard(node.test) and node.lineno <= line <= (node.end_lineno or line):
            return None
    return path


def _is_main_guard(test: ast.expr) -> bool:
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = [test.left, test.comparators[0]]
    names = [s for s in sides if isinstance(s, ast.Name) and s.id == "__name__"]
    consts = [s for s in sides if isinstance(s, ast.Constant) and s.value == "__main__"]
    return len(names) == 1 and len(consts) == 1
