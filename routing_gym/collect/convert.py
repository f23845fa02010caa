"""Turn a collection run folder into a Tournament.

Energy provenance follows the meter that read it: NVML meters give ``measured``, the replay
meter gives ``synthetic`` (a replayed trace is not a measurement of the call). A run without a
meter (no GPU) has no energy and cannot become a tournament: the error says so rather than
writing zeros.
"""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path
from typing import Any

from routing_gym.collect.errors import CollectError
from routing_gym.collect.questions import Grader, read_queries, resolve_graders, score_of
from routing_gym.collect.records import read_records
from routing_gym.collect.runner import CONFIG_FILE, QUERIES_FILE, RECORDS_FILE, load_run_config

MEASURED_METERS = ("nvml-counter", "nvml-poll")


def records_to_tournament(
    out_dir: str | Path,
    *,
    allow_partial: bool = False,
    regrade: bool = False,
    graders: dict[str, Grader] | None = None,
) -> Any:
    """Build the Tournament of a run folder.

    Every (question, model) pair needs an ``ok`` record; with ``allow_partial`` questions that
    lack any model's answer are dropped instead. Answers whose grading failed during the run
    (``correct: null``) are graded again now; ``regrade`` grades every answer again.
    """
    from routing_gym.tournament import DataCard, Tournament

    out_dir = Path(out_dir)
    config = load_run_config(out_dir)
    questions = read_queries(out_dir / QUERIES_FILE)
    contents = read_records(out_dir / RECORDS_FILE)
    where = str(out_dir / RECORDS_FILE)

    calls: dict[tuple[str, str], dict[str, Any]] = {}
    lines: dict[tuple[str, str], list[int]] = {}
    sessions = []
    idle: dict[str, list[float]] = {}
    for number, r in enumerate(contents.records, start=1):
        kind = r.get("type")
        if kind == "session":
            sessions.append(r)
        elif kind == "idle" and r.get("idle_w") is not None:
            idle.setdefault(r["model_id"], []).append(float(r["idle_w"]))
        elif kind == "call" and r.get("status") == "ok":
            key = (r["query_id"], r["model_id"])
            lines.setdefault(key, []).append(number)
            calls.setdefault(key, r)
    dups = {k: v for k, v in lines.items() if len(v) > 1}
    if dups:
        (q, m), rows = next(iter(dups.items()))
        raise CollectError(f"{where}: {len(dups)} pair(s) have more than one ok record, e.g. ({q!r}, {m!r}) at lines {rows}")

    model_ids = [m.id for m in config.models]
    missing = [(q["query_id"], m) for q in questions for m in model_ids if (q["query_id"], m) not in calls]
    if missing and not allow_partial:
        per_model = Counter(m for _, m in missing)
        raise CollectError(
            f"{out_dir}: {len(missing)} of {len(questions) * len(model_ids)} pairs have no answer yet "
            f"({', '.join(f'{m}: {n}' for m, n in per_model.items())}); resume with `routing-gym collect run`, "
            "or pass allow_partial (--allow-partial) to drop incomplete questions"
        )
    incomplete = {q for q, _ in missing}
    questions = [q for q in questions if q["query_id"] not in incomplete]
    if not questions:
        raise CollectError(f"{out_dir}: no question has answers from every model yet")

    # grading: fill in failed gradings (or all of them)
    need = [calls[(q["query_id"], m)] for q in questions for m in model_ids if regrade or calls[(q["query_id"], m)].get("correct") is None]
    if need:
        grader_for = resolve_graders(config, graders)
        by_id = {q["query_id"]: q for q in questions}
        still = []
        for r in need:
            q = by_id[r["query_id"]]
            if r.get("output_text") is None:
                still.append(f"({r['query_id']!r}, {r['model_id']!r}): no output text stored")
                continue
            try:
                r["correct"], _ = score_of(grader_for[q["benchmark"]](r["output_text"], q["reference"], q.get("metadata") or {}))
            except Exception as exc:
                still.append(f"({r['query_id']!r}, {r['model_id']!r}): {type(exc).__name__}: {exc}")
        if still:
            raise CollectError(f"{where}: {len(still)} answer(s) cannot be graded: " + "; ".join(still[:5]))

    # energy provenance per model
    provenance: dict[str, str] = {}
    for m in model_ids:
        kinds = {calls[(q["query_id"], m)]["energy"]["meter"] for q in questions}
        unmeasured = sum(1 for q in questions if not calls[(q["query_id"], m)]["energy"]["measured"])
        if unmeasured:
            note = next(calls[(q["query_id"], m)]["energy"].get("note") for q in questions if not calls[(q["query_id"], m)]["energy"]["measured"])
            raise CollectError(
                f"{where}: energy of {unmeasured} answer(s) of model {m!r} was not measured ({note}). A tournament "
                "needs energy: collect on a machine with an NVIDIA GPU, or use energy.meter: replay for a synthetic dry run"
            )
        if len(kinds) > 1:
            raise CollectError(f"{where}: model {m!r} was measured with different meters {sorted(kinds)}; collect it with one meter")
        (kind,) = kinds
        provenance[m] = "measured" if kind in MEASURED_METERS else "synthetic"

    report = config.energy.report
    outcomes = []
    for q in questions:
        for m in model_ids:
            r = calls[(q["query_id"], m)]
            e = r["energy"]
            energy = e["net_j"] if report == "net" else e["gross_j"]
            latency = float(r["latency_s"])
            outcomes.append({
                "query_id": q["query_id"], "model_id": m, "correct": float(r["correct"]),
                "energy_j": float(energy), "latency_s": latency,
                "mean_power_w": float(energy) / latency if latency > 0 else 0.0,
                "input_tokens": _num(r.get("input_tokens")), "output_tokens": _num(r.get("output_tokens")),
                "output_text": r.get("output_text"),
            })

    hardware = _hardware(sessions)
    serving_by_model: dict[str, dict[str, Any]] = {}
    for s in sessions:
        serving_by_model.update(s.get("serving") or {})
    models = []
    for spec in config.models:
        serving = dict(serving_by_model.get(spec.id, {"backend": spec.backend, "name": spec.served_name}))
        serving["hardware"] = hardware["text"]
        serving["meter"] = next(iter({calls[(q["query_id"], spec.id)]["energy"]["meter"] for q in questions}))
        serving["idle_w_median"] = _median(idle.get(spec.id, []))
        serving["energy_report"] = report
        models.append({
            "model_id": spec.id, "family": spec.family, "params_b": spec.params_b if spec.params_b is not None else math.nan,
            "reasoning": spec.reasoning, "serving": serving, "energy_provenance": provenance[spec.id],
            "energy_source": f"routing-gym collect, {serving['meter']} on {hardware['text']}, "
                             f"{'idle-subtracted' if report == 'net' else 'gross'} GPU energy per answer",
        })
    query_rows = [
        {"query_id": q["query_id"], "benchmark": q["benchmark"], "prompt": q["prompt"], "reference": q["reference"],
         "difficulty": q.get("difficulty") if q.get("difficulty") is not None else math.nan, "metadata": q.get("metadata") or {}}
        for q in questions
    ]
    kinds = set(provenance.values())
    card = DataCard(
        name=config.name,
        provenance=kinds.pop() if len(kinds) == 1 else "mixed",
        description=config.description or f"Collected with routing-gym collect from {len(model_ids)} served models.",
        licence=config.licence,
        sources=[f"routing-gym collect run {out_dir.resolve()}"],
        hardware=hardware["text"],
        notes=_notes(config, report, len(incomplete), provenance),
        extra={
            "collector": {"config": config.to_dict(), "files": [CONFIG_FILE, QUERIES_FILE, RECORDS_FILE]},
            "sessions": [{k: s.get(k) for k in ("session", "time", "host", "meter", "hardware")} for s in sessions],
            "dropped_incomplete_queries": len(incomplete),
        },
    )
    return Tournament.from_records(query_rows, models, outcomes, card, source=str(out_dir))


def _num(value: Any) -> float:
    return math.nan if value is None else float(value)


def _median(values: list[float]) -> float | None:
    if not values:
        return None
    s = sorted(values)
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else 0.5 * (s[mid - 1] + s[mid])


def _hardware(sessions: list[dict[str, Any]]) -> dict[str, Any]:
    texts = []
    for s in sessions:
        hw = s.get("hardware") or {}
        gpus = hw.get("gpus") or []
        if gpus:
            names = Counter(gpus)
            text = ", ".join(f"{n}x {name}" for name, n in names.items())
            if hw.get("driver"):
                text += f" (driver {hw['driver']})"
        else:
            text = f"no GPU ({hw.get('meter', 'none')} meter)" if hw.get("meter") != "replay" else f"replayed trace {hw.get('trace')}"
        text += f" on {s.get('host', '?')}"
        if text not in texts:
            texts.append(text)
    return {"text": "; ".join(texts) or "unknown"}


def _notes(config, report: str, dropped: int, provenance: dict[str, str]) -> list[str]:
    g = config.generation
    notes = [
        f"Decoding: temperature {g.temperature}, seed {g.seed}, up to {g.num_predict} new tokens, context {g.num_ctx}.",
        "energy_j is GPU energy per answer "
        + ("above the idle baseline (median idle power with the model resident x latency), clipped at 0."
           if report == "net" else "including idle power (gross)."),
        "latency_s is the client-side wall time of the call; mean_power_w = energy_j / latency_s.",
    ]
    if "synthetic" in provenance.values():
        notes.append("Models marked synthetic were timed for real but their joules come from a replayed power trace.")
    if dropped:
        notes.append(f"{dropped} question(s) without an answer from every model were dropped.")
    return notes
