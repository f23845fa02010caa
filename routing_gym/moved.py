"""Import aliases for the public modules that moved when ``eval/`` was split into subpackages
(core, execution, compare, frontier, headroom, collapse, offline, generalisation), ``hull`` and
``mo_fronts`` went below the envs as ``routing_gym.fronts`` and the text controller became
``routing_gym_agents.controller``. Kept for one release (removed in ``REMOVED_IN``): importing an
old name warns (``DeprecationWarning``, naming the new one) and gives the module at its new
place, the same object, so code written against the earlier docs keeps working meanwhile.

One table and one import hook (``sys.meta_path``, installed by ``import routing_gym``) instead
of a stub file per old name: the aliases add no module to the package's import graph.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
import warnings

REMOVED_IN = "0.2"
MOVED = {
    **{f"routing_gym.eval.{name}": f"routing_gym.eval.core.{name}"
       for name in ("familywise", "jsonsafe", "metrics", "pareto", "plots", "reward_use", "robustness", "stats",
                    "yardstick")},
    **{f"routing_gym.eval.{name}": f"routing_gym.eval.execution.{name}"
       for name in ("audit", "audit_process", "executors", "fitting", "rollout")},
    **{f"routing_gym.eval.{name}": f"routing_gym.eval.generalisation.{name}"
       for name in ("pool_change", "unseen_benchmarks", "unseen_model_gains", "unseen_models")},
    "routing_gym.eval.hull": "routing_gym.fronts.hull",
    "routing_gym.eval.mo_fronts": "routing_gym.fronts.mo_fronts",
    "routing_gym.eval.collapse_study": "routing_gym.eval.collapse.study",
    "routing_gym.eval.sweep": "routing_gym.eval.compare.sweep",
    "routing_gym.eval.headroom_report": "routing_gym.eval.headroom.report",
    "routing_gym.eval.routability": "routing_gym.eval.headroom.routability",
    "routing_gym.eval.offline_dataset": "routing_gym.eval.offline.dataset",
    "routing_gym.eval.ope": "routing_gym.eval.offline.ope",
    "routing_gym.tournament.summary": "routing_gym.eval.core.summary",
    "routing_gym_agents.text_controller": "routing_gym_agents.controller.agent",
    **{f"routing_gym_agents.controller_{name}": f"routing_gym_agents.controller.{name}"
       for name in ("config", "inference", "model", "policy", "prompt", "report", "sft_memo", "teacher", "trainer")},
}


class MovedModuleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds the old names of ``MOVED`` only; loading one imports the new module and returns it."""

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> importlib.machinery.ModuleSpec | None:
        return importlib.util.spec_from_loader(fullname, self) if fullname in MOVED else None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        new = MOVED[spec.name]
        warnings.warn(f"{spec.name} moved to {new}; the old name works until routing-gym {REMOVED_IN}: "
                      f"import {new}", DeprecationWarning, stacklevel=_caller_level())
        return importlib.import_module(new)

    def exec_module(self, module: types.ModuleType) -> None:
        """The new module ran when it was imported."""


def _caller_level() -> int:
    """``stacklevel`` of the first frame outside the import machinery and this file, so that the
    warning names the line that imported the old name."""
    frame, level = sys._getframe(1), 1
    while frame is not None and (frame.f_code.co_filename.startswith("<frozen importlib")
                                 or frame.f_code.co_filename == __file__):
        frame, level = frame.f_back, level + 1
    return level


def install() -> None:
    """Put the finder on ``sys.meta_path`` once (first: no other finder knows these names)."""
    if not any(isinstance(finder, MovedModuleFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, MovedModuleFinder())
