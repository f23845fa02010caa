"""Where tournaments come from: shipped and procedural presets, files, real-data builders.

``resolve_tournament(spec)`` accepts a ``Tournament``, a tournament directory, or the name of
a registered preset (``list_tournaments()``); ``"default"`` is the offline default that ships
in ``envs_data/``. The real-data names (``zeroeval-math``, ``llmrouter``, ``mmlu-pro``, and
their batch-1 energy variants ``zeroeval-math-batch1``, ``llmrouter-batch1``,
``mmlu-pro-batch1``) are built once from the data
directory (``ROUTING_GYM_DATA_DIR``) and cached under ``routing_gym.paths.cache_dir()``, one
cache directory per name; ``-law`` / ``-params`` name the same builds under the other batched energy
models (re-priced from a cached base build). ``stand_in`` is the audit's process's override
(``routing_gym.eval.execution.audit_process``).
"""

from __future__ import annotations

import json
import os
from collections import OrderedDict
from pathlib import Path
from typing import Callable, Iterable

from routing_gym.errors import UnknownNameError
from routing_gym.paths import cache_dir, shipped_data_dir
from routing_gym.tournament import Tournament

DEFAULT_TOURNAMENT = "paper-pool"

# name -> zero-argument builder; procedural presets register themselves here.
TOURNAMENT_PRESETS: dict[str, Callable[[], Tournament]] = {}
# Loaded directories, most recent last; bounded so a sweep over many folders does not keep
# them all. Tournaments are frozen, so sharing one object is safe.
_loaded: OrderedDict[tuple[str, float], Tournament] = OrderedDict()
_LOADED_SIZE = 8

# Real-data tournaments: name -> "module:function(data_dir) -> (tournament, report)".
REAL_DATA_BUILDS = {
    "zeroeval-math": "routing_gym.sources.zeroeval:build_zeroeval_tournament",
    "llmrouter": "routing_gym.sources.llmrouter:build_llmrouter_tournament",
    "mmlu-pro": "routing_gym.sources.mmlu_pro:build_mmlu_pro_tournament",
}
# Bumped when a builder's output changes, so a cached build from an older version is rebuilt
# (stored in the card's ``extra.build_version``; absent means 1). llmrouter 3: a group split
# keeping LLMRouter's test questions per task (2: a group split stratified over all tasks);
# mmlu-pro 2: ``Tournament.with_splits`` instead of its own group split (another draw).
BUILD_VERSIONS = {"llmrouter": 3, "mmlu-pro": 2}
# The same builds under another energy model (routing_gym.sources.energy_model): name -> (build, energy model).
ENERGY_MODEL_VARIANTS = {f"{base}-{kind}": (base, kind) for base in REAL_DATA_BUILDS for kind in ("batch1", "law", "params")}
# Each build's model specs: a variant of a cached build (or a cache of an older energy law) is re-priced from
# its token counts instead of rebuilt (no regrading).
REAL_DATA_SPECS = {
    "zeroeval-math": "routing_gym.sources.zeroeval:OPEN_MODELS",
    "llmrouter": "routing_gym.sources.llmrouter:LLMROUTER_MODELS",
    "mmlu-pro": "routing_gym.sources.mmlu_pro:MMLU_PRO_MODELS",
}


def register_tournament(name: str) -> Callable[[Callable[[], Tournament]], Callable[[], Tournament]]:
    """Register a zero-argument function that builds a tournament under ``name``."""

    def decorator(builder: Callable[[], Tournament]) -> Callable[[], Tournament]:
        TOURNAMENT_PRESETS[name] = builder
        return builder

    return decorator


def list_tournaments() -> list[str]:
    return sorted(_registered_names())


def resolve_tournament(spec: Tournament | str | os.PathLike) -> Tournament:
    """A tournament from an object, a registered name or a directory (loads cached per path).

    A bare registered name (``paper-pool``) wins over a directory of the same name in the
    working directory, so that a stray folder never changes what a preset means; write
    ``./paper-pool`` to load the folder.
    """
    resolved = _resolve(spec)
    if not isinstance(spec, Tournament):
        _resolved_as[str(spec)] = resolved.fingerprint
        while len(_resolved_as) > _RESOLVED_AS_SIZE:
            del _resolved_as[next(iter(_resolved_as))]
    return _stand_ins.get(resolved.fingerprint, resolved) if _stand_ins else resolved


# A name or directory -> the fingerprint of what it resolved to in this process (``aliases_of``).
_resolved_as: dict[str, str] = {}
_RESOLVED_AS_SIZE = 64


def aliases_of(fingerprint: str) -> tuple[list[str], list[str]]:
    """The names, and the directories (resolved paths), that resolved to the tournament with
    ``fingerprint`` in this process: what the audit's process must read as the copy."""
    names, directories, registered = [], [], _registered_names()
    for spec, value in _resolved_as.items():
        if value != fingerprint:
            continue
        if os.sep not in spec and not spec.startswith(".") and spec in registered:
            names.append(spec)
        else:
            directories.append(str(Path(spec).resolve()))
    return list(dict.fromkeys(names)), list(dict.fromkeys(directories))


# Set only in the audit's process (routing_gym.eval.execution.audit_process, ``stand_in``): the audited
# tournament's replaced copy, by fingerprint and by name, and the directories read as the copy's.
_stand_ins: dict[str, Tournament] = {}
_named_stand_ins: dict[str, Tournament] = {}
_redirects: dict[str, Path] = {}


def stand_in(fingerprint: str, copy: Tournament, copy_dir: Path, names: Iterable[str],
             directories: Iterable[str]) -> None:
    """For the rest of this process, ``resolve_tournament`` of one of ``names`` returns ``copy``
    without building anything, each of ``directories`` is read as ``copy_dir`` (the original's
    files are never loaded), and anything else it would return with ``fingerprint`` (a preset
    registered under another name: matched by content) is ``copy`` too. Called once, by the
    audit's process."""
    _stand_ins[fingerprint] = copy
    _named_stand_ins.update({name: copy for name in names})
    _redirects.update({str(Path(d).resolve()): copy_dir for d in directories})


def _registered_names() -> set[str]:
    _import_builtin_presets()
    shipped = {p.name for p in shipped_data_dir().iterdir() if (p / "card.json").exists()}
    return shipped | set(TOURNAMENT_PRESETS) | set(REAL_DATA_BUILDS) | set(ENERGY_MODEL_VARIANTS) | {"default"}


def _resolve(spec: Tournament | str | os.PathLike) -> Tournament:
    if isinstance(spec, Tournament):
        return spec
    if isinstance(spec, str) and spec in _named_stand_ins:  # the audit's process: a name of the audited tournament
        return _named_stand_ins[spec]
    name = DEFAULT_TOURNAMENT if str(spec) == "default" else str(spec)
    path = Path(name)
    if isinstance(spec, str) and os.sep not in name and not name.startswith("."):
        if (shipped_data_dir() / name / "card.json").exists():
            path = shipped_data_dir() / name
        elif name in REAL_DATA_BUILDS or name in ENERGY_MODEL_VARIANTS:
            path = build_real_tournament(name)
        else:
            _import_builtin_presets()
            if name in TOURNAMENT_PRESETS:
                return TOURNAMENT_PRESETS[name]()
    if _redirects:
        path = _redirects.get(str(path.resolve()), path)
    if path.is_dir():
        key = (str(path.resolve()), (path / "card.json").stat().st_mtime if (path / "card.json").exists() else 0.0)
        if key in _loaded:
            _loaded.move_to_end(key)
        else:
            _loaded[key] = Tournament.load(path)
            while len(_loaded) > _LOADED_SIZE:
                _loaded.popitem(last=False)
        return _loaded[key]
    raise UnknownNameError("tournament (neither a registered name nor a directory)", name, list_tournaments())


def build_real_tournament(name: str, data_dir: str | os.PathLike | None = None, rebuild: bool = False) -> Path:
    """Build a real-data tournament from the data directory once; later calls reuse the cache.

    A variant under another energy model (``llmrouter-law``) whose base build is cached, and a
    cache written under an older energy law, are re-priced from their token counts (seconds).
    """
    import importlib
    import sys

    from routing_gym.paths import data_dir as resolve_data_dir
    from routing_gym.sources.energy_model import reprice_tournament

    def load(spec: str):
        module, attribute = spec.split(":")
        return getattr(importlib.import_module(module), attribute)

    out = cache_dir() / "tournaments" / name
    base, energy_model = ENERGY_MODEL_VARIANTS.get(name, (name, "batched"))
    if (out / "card.json").exists() and not rebuild and _current_energy_law(out) and _current_build(out, base):
        return out
    root = resolve_data_dir(data_dir)
    base_out = cache_dir() / "tournaments" / base
    if (not rebuild and base in REAL_DATA_SPECS and (base_out / "card.json").exists()
            and _current_build(base_out, base)):  # an older build (e.g. its split) is rebuilt, not re-priced
        print(f"re-pricing the cached {base} build as {name} (energy model {energy_model})", file=sys.stderr)
        reprice_tournament(Tournament.load(base_out), base, energy_model, load(REAL_DATA_SPECS[base]), root).save(out)
        return out
    print(f"building the {name} tournament from {root} into {out} (once; several minutes)", file=sys.stderr)
    tournament, report = load(REAL_DATA_BUILDS[base])(root, energy_model=energy_model)
    tournament.save(out)
    report.save(out)
    return out


def _current_energy_law(path: Path) -> bool:
    """Whether a cached build was priced by this version of the energy models."""
    from routing_gym.sources.energy_model import ENERGY_LAW_VERSION

    extra = json.loads((path / "card.json").read_text(encoding="utf-8")).get("extra", {})
    return extra.get("energy_fit", {}).get("energy_law_version") == ENERGY_LAW_VERSION


def _current_build(path: Path, base: str) -> bool:
    """Whether a cached build was made by this version of its builder (``BUILD_VERSIONS``; a card
    that does not say is version 1)."""
    extra = json.loads((path / "card.json").read_text(encoding="utf-8")).get("extra", {})
    return extra.get("build_version", 1) == BUILD_VERSIONS.get(base, 1)


def _import_builtin_presets() -> None:
    """Procedural presets register on import (done lazily: sources must not import envs)."""
    import routing_gym.sources.synthetic  # noqa: F401
