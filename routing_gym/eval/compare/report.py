"""``compare``'s outputs: results.json, the CSVs, table.md (the paper's Table 2 shape with
notes, hull, per-benchmark and Pareto sections) and the plots (``routing_gym.eval.core.plots``).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from routing_gym.eval.compare.cells import RunRecord
from routing_gym.eval.compare.statistics import CompareResult
from routing_gym.eval.core import familywise
from routing_gym.eval.core.jsonsafe import strict_json
from routing_gym.eval.core.reward_use import REWARD_FREE_MARK, reward_free_methods, reward_free_note
from routing_gym.eval.core.robustness import markdown_lines
from routing_gym.eval.core.yardstick import DEARER_THAN_CHAIN, MORE_ACCURATE_THAN_CHAIN, WITHIN
from routing_gym.eval.execution import audit
from routing_gym.fronts import hull as fixed_hull
from routing_gym.fronts import mo_fronts


_CURVE_POINTS = 200  # regret curves are stored in results.json downsampled to this many points


def write_outputs(result: CompareResult, out_dir: str | Path, plots: bool = True) -> dict[str, Path]:
    """Write results.json, summary.csv, per_seed.csv, per_benchmark.csv, dominance.csv,
    table.md and (with ``plots``) pareto.png, selection.png, regret.png; return the paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {name: out / name for name in ("results.json", "summary.csv", "per_seed.csv", "per_benchmark.csv", "dominance.csv", "table.md")}

    summary = pd.DataFrame([{k: v for k, v in r.items() if k != "selection"} for r in result.rows])
    summary.to_csv(paths["summary.csv"], index=False)
    per_seed = []
    for r in result.runs:
        entry = {"method": r.method, "seed": r.seed, "kind": r.kind, "status": r.status, "fit_s": r.fit_s,
                 "act_ms_per_query": r.act_ms_per_query, "audit_s": r.audit.get("seconds") if r.audit else None,
                 "error": r.error}
        if r.metrics is not None:
            entry.update(r.metrics.scalars())
            entry.update({f"share_{m}": v for m, v in r.metrics.selection.items()})
        entry.update(r.overhead)
        if r.collapse is not None:  # online agents: did training collapse onto one model, and when
            entry.update({f"collapse_{k}": r.collapse[k] for k in ("collapsed", "collapse_step", "collapsed_onto", "final_top1_share")})
        per_seed.append(entry)
    pd.DataFrame(per_seed).to_csv(paths["per_seed.csv"], index=False)
    pd.DataFrame(result.per_benchmark).to_csv(paths["per_benchmark.csv"], index=False)
    pd.DataFrame(result.dominance).to_csv(paths["dominance.csv"], index=False)

    payload = {
        "settings": result.settings(),
        "rows": result.rows,
        "per_benchmark": result.per_benchmark,
        "pareto": result.pareto,
        "significant_dominance": [d for d in result.dominance if d["dominates"]],
        "regret": {m: _downsample(c) for m, c in result.regret.items()},
        "runs": [r.to_dict() for r in result.runs],
        "failures": [r.to_dict() for r in result.failures],
    }
    paths["results.json"].write_text(json.dumps(strict_json(payload), indent=1, allow_nan=False))
    paths["table.md"].write_text(markdown_report(result))
    if plots:
        from routing_gym.eval.core.plots import plot_pareto, plot_regret, plot_selection

        paths["pareto.png"] = plot_pareto(result, out / "pareto.png")
        paths["selection.png"] = plot_selection(result, out / "selection.png")
        if result.regret:
            paths["regret.png"] = plot_regret(result, out / "regret.png")
    return paths


def _downsample(curve: dict[str, Any]) -> dict[str, Any]:
    length = len(curve["steps"])
    idx = np.unique(np.linspace(0, length - 1, min(length, _CURVE_POINTS)).round().astype(int)) if length else np.array([], int)
    return {k: (np.round(v[idx], 4).tolist() if isinstance(v, np.ndarray) else v) for k, v in curve.items()}


# ---------------------------------------------------------------------- Markdown
def _ci(row: dict[str, Any], metric: str, fmt: str, scale: float = 1.0) -> str:
    if row.get(metric) is None:  # e.g. joules saved beyond the yardstick's most accurate policy
        return "—"
    if row.get(f"{metric}_ci_low") is None:
        shape = row.get(f"{metric}_shape", "")
        return format(row[metric] * scale, fmt) + f" (no interval{': ' + shape if shape else ''})"
    if metric == "routing_gain_pp" and row.get("on_yardstick") and row[f"{metric}_ci_low"] == row[f"{metric}_ci_high"]:
        return "on the yardstick"  # a vertex of the yardstick in every resample: 0 by construction
    value, low, high = (row[metric] * scale, row[f"{metric}_ci_low"] * scale, row[f"{metric}_ci_high"] * scale)
    return format(value, fmt) + f" [{format(low, fmt)}, {format(high, fmt)}]"


def markdown_report(result: CompareResult) -> str:
    """The paper's Table 2 shape plus notes, per-benchmark energy shares, Pareto and failures."""
    s = result.settings()
    reward = result.reward.describe()
    overhead_cols = sorted({k for r in result.rows for k in r if k.startswith(("overhead_", "fit_overhead_"))})
    header = ["Method", "Deployable", "Training feedback", "Accuracy % [95% CI]", "Mean J [95% CI]", "Routing gain pp [95% CI]",
              "Joules saved % [95% CI]", "Content gain pp [95% CI]", "Latency s", "Power W per request",
              "Top-1 share", f"Reward {reward} [95% CI]", "Invalid"] + [c.replace("overhead_", "overhead ").replace("fit_", "fit ") for c in overhead_cols]
    lines = [
        f"# Held-out comparison on {s['tournament']['name']}",
        "",
        f"{s['tournament']['n_test']} held-out queries ({s['tournament']['test_split']}), trained on "
        f"{s['tournament']['n_train']} ({s['tournament']['train_split']}); energy provenance: "
        f"{s['tournament']['provenance']}; {len(s['seeds'])} seed(s) per agent; {_duplicates_note(s)}.",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|",
    ]
    reward_free = reward_free_methods(r["method"] for r in result.rows)
    for r in result.rows:
        name = r["method"] + (REWARD_FREE_MARK if r["method"] in reward_free else "")
        name += ("" if r["kind"] == "fixed-model" or r["seeds_failed"] == 0 else f" ({r['seeds_ok']}/{r['seeds_ok'] + r['seeds_failed']} seeds)")
        deployable = r.get("deployable_label", "yes" if r["deployable"] else "no")
        feedback = r.get("training_feedback") or "—"
        if not r["seeds_ok"]:
            lines.append(f"| {name} | {deployable} | {feedback} | failed: {r.get('error', '')[:80]} |" + " |" * (len(header) - 4))
            continue
        cells = [
            name, deployable, feedback,
            _ci(r, "accuracy", ".1f", 100.0), _ci(r, "mean_energy_j", ",.1f"),
            _ci(r, "routing_gain_pp", "+.1f") + _outside_hull(r, "routing_gain_pp") + _shape(r, "routing_gain_pp")
            + _fw_mark(r, "routing_gain_pp"),
            _ci(r, "joules_saved_pct", "+.1f") + _outside_hull(r, "joules_saved_pct") + _shape(r, "joules_saved_pct"),
            _ci(r, "content_gain_pp", "+.1f") + _outside_hull(r, "content_gain_pp") + _shape(r, "content_gain_pp")
            + _fw_mark(r, "content_gain_pp"),
            f"{r['mean_latency_s']:.2f}", f"{r['mean_power_w']:.0f}",
            f"{r['top1_share']:.2f} ({r['top1_model']})", _ci(r, "mean_reward", ".3f"),
            f"{r['invalid_count']:g}",
        ] + [f"{r[c]:.4g}" if c in r and not math.isnan(r[c]) else "—" for c in overhead_cols]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", *notes_lines(result, s, reward), ""]
    free_note = reward_free_note(reward_free)
    lines += [free_note, ""] if free_note else []
    lines += [f"**Warning: {w}.**" for w in result.warnings] + ([""] if result.warnings else [])
    lines += _markdown_hull(result)
    lines += _markdown_task_hull(result)
    lines += _markdown_headroom(result)
    if "robustness" in result.pareto:
        lines += markdown_lines(result.pareto["robustness"])
    lines += _markdown_benchmarks(result)
    lines += _markdown_pareto(result)
    if result.failures:
        lines += ["## Failures", ""]
        grouped: dict[tuple[str, str], list[RunRecord]] = {}
        for f in result.failures:
            grouped.setdefault((f.method, f.error), []).append(f)
        for (method, error), records in grouped.items():
            lines.append(f"- **{method}** seed(s) {', '.join(str(r.seed) for r in records)}: `{error}`")
            lines += [f"  - `{frame}`" for frame in records[0].traceback[-2:]]
        lines.append("")
    return "\n".join(lines)


DOCS_PAGE = "docs/evaluation.md"  # what the notes link to: the rules in full
LABEL_ROUTER = "per-benchmark"


def family_note(rows: list[dict[str, Any]]) -> str:
    """The sentence every verdict-bearing table states: verdicts are family-wise over this table's
    deployable verified rows, so they depend on which agents were run."""
    n = sum(1 for r in rows if r["seeds_ok"] and r["kind"] != "fixed-model" and r["deployable"]
            and not audit.withheld(r["deployable_label"]))
    return (f"Verdict lines (and ▲ / ▼) are family-wise over the {n} deployable verified rows of this table "
            "(balanced Romano-Wolf step-down, both gains): adding or removing agents can change them; a marginal interval "
            "reads one row alone.")


def notes_lines(result: CompareResult, s: dict[str, Any], reward: str) -> list[str]:
    """The table's notes as a short bulleted list; the rules in full are in ``DOCS_PAGE``."""
    listed = {r["method"] for r in result.rows}
    label_router = ([f"- {LABEL_ROUTER} (the label router) sends each benchmark to the model with the best mean "
                     f"training reward ({reward}), not the best accuracy − λ·J that the task-aware yardstick's routes "
                     "maximise, so it can sit below that yardstick: 'worse than routing by the label' then means below "
                     "the best label routes of the chain, not below itself."] if LABEL_ROUTER in listed else [])
    return [
        "Notes (the rules in full: " + f"[{DOCS_PAGE}]({DOCS_PAGE})):",
        "",
        f"- Reward: mean {reward} per held-out query, the same coefficients for every row. Intervals: {s['intervals']}.",
        "- Agent rows: means over seeds (spread in summary.csv, `*_seed_sd`); 'always <model>' rows: the fixed models, "
        "computed from the table.",
        "- Routing gain and joules saved: against the fixed-model yardstick, a chain chosen on train, read on test as the "
        "best mix of its policies ('on the yardstick': a vertex of it in every resample); content gain: against the "
        f"task-aware yardstick; {_OUTSIDE_MARKS}.",
        "- '(atom)' / '(two modes)': the gain's resamples have an atom or two modes; its percentile interval is a rough summary.",
        f"- {family_note(result.rows)}",
        *label_router,
        f"- Invalid: invalid actions per evaluation pass ({s['invalid_actions']}). Top-1 share: share of queries sent to "
        "the most used model (a collapse indicator).",
        "- Power W per request: energy / latency per answer, the power attributed to one request (a batched server's "
        "per-request share is a few watts).",
        *_audit_notes(result),
        "- Training feedback: 'bandit' (only the chosen route's outcome, through the training env) or 'full "
        "information' (every model's outcome on the training queries: legitimate training data).",
    ]


_OUTSIDE_MARK = {DEARER_THAN_CHAIN: " (flat)", MORE_ACCURATE_THAN_CHAIN: " (beyond)"}
_OUTSIDE_MARKS = ("'(flat)': the method spends more than the yardstick's dearest policy, whose accuracy it is compared "
                  "with; '— (beyond)': more accurate than every policy of the chain, so no joules saved")


def _outside_hull(row: dict[str, Any], metric: str) -> str:
    return _OUTSIDE_MARK.get(row.get(f"{metric}_vs", WITHIN), "")


def _shape(row: dict[str, Any], metric: str) -> str:
    """' (atom)' / ' (two modes)' where the gain's resamples make its percentile interval a rough summary."""
    shape = row.get(f"{metric}_shape", "")
    return f" ({shape})" if shape and row.get(f"{metric}_ci_low") is not None else ""


_FW_MARK = {familywise.ABOVE: " ▲", familywise.BELOW: " ▼"}


def _fw_mark(row: dict[str, Any], metric: str) -> str:
    """▲ / ▼ where the family-wise rule (not only the marginal interval) puts the gain above / below 0."""
    return _FW_MARK.get(row.get(f"{metric}_fw", familywise.NONE), "")


def _tag(row: dict[str, Any]) -> str:
    """A row outside the family-wise family (declared not deployable), tagged wherever it is named."""
    return row["method"] if row["deployable"] else f"{row['method']} (not deployable: marginal CI)"


def _decided(row: dict[str, Any], metric: str, direction: str, marginal: bool = False) -> bool:
    """The verdict rule: the family-wise decision for the family's rows; the marginal interval,
    tagged, for rows outside it (not deployable, or ``marginal``)."""
    if row["deployable"] and not marginal:
        return row.get(f"{metric}_fw") == direction
    low, high = row[f"{metric}_ci_low"], row[f"{metric}_ci_high"]
    return (low > 0) if direction == familywise.ABOVE else (high < 0)


def row_verdict(row: dict[str, Any]) -> str:
    """A row's words in the content-gain section (``hull.content_verdict``), decided family-wise
    for the family's rows and by the marginal interval for declared non-deployable ones; a row that
    cannot read the question (``reads_question`` False) is never beyond the task label, and its
    content gain below 0 is read from its marginal interval (it is no hypothesis of the family)."""
    blind = not row.get("reads_question", True)  # outside the content family: its marginal interval, tagged
    return fixed_hull.content_verdict(_decided(row, "routing_gain_pp", familywise.ABOVE),
                                      not blind and _decided(row, "content_gain_pp", familywise.ABOVE),
                                      _decided(row, "content_gain_pp", familywise.BELOW, marginal=blind))


def _markdown_hull(result: CompareResult) -> list[str]:
    """The fixed-model yardstick's chain and which methods sit above or below it, family-wise."""
    hull = result.pareto.get("hull")
    if not hull:
        return []
    conf = f"{result.config.confidence:.0%}"
    vertices = _chain(hull["models"], hull["energy_j"], hull["accuracy"])
    agents = [r for r in result.rows if r["seeds_ok"] and r["kind"] != "fixed-model"]
    withheld = [r for r in agents if audit.withheld(r["deployable_label"])]
    judged = [r for r in agents if r not in withheld]
    above = [r for r in judged if _decided(r, "routing_gain_pp", familywise.ABOVE)]
    below = [r for r in judged if _decided(r, "routing_gain_pp", familywise.BELOW)]
    return [
        "## Routing gain over the fixed-model yardstick", "",
        f"Chain chosen on {result.config.train_split} (null policy, then fixed models; test values): "
        f"{_chain(hull['chain'], hull['chain_energy_j'], hull['chain_accuracy'])}. On test the yardstick is their best "
        f"random mix (flat beyond the last): {vertices}.", "",
        f"- routes (gain above 0, family-wise {conf} over the deployable verified rows): "
        f"{', '.join(r['method'] for r in above if r['deployable']) or 'none'}",
        *([f"- above the yardstick, not deployable (marginal {conf} CI): "
           f"{', '.join(_tag(r) for r in above if not r['deployable'])}"] if any(not r["deployable"] for r in above) else []),
        *([f"- no verdict: {', '.join(_labelled(r) for r in withheld)}"] if withheld else []),
        f"- below the yardstick: {', '.join(_tag(r) for r in below) or 'none'}",
        f"- not distinguishable from mixing fixed models: "
        f"{', '.join(_tag(r) for r in judged if r not in above and r not in below) or 'none'}",
        "",
    ]


BLIND_TAG = "(cannot read the question)"


def _blind_tag(row: dict[str, Any]) -> str:
    """``_tag``, and the mark of a row that cannot read the question (outside the content-gain family)."""
    return _tag(row) if row.get("reads_question", True) else f"{_tag(row)} {BLIND_TAG}"


def _labelled(row: dict[str, Any]) -> str:
    return f"{row['method']} ({row['deployable_label']})"


def _chain(names: list[str], joules: list[float], accuracy: list[float]) -> str:
    return " → ".join(f"{m} ({j:,.1f} J, {100 * a:.1f} %)" for m, j, a in zip(names, joules, accuracy))


def _markdown_task_hull(result: CompareResult) -> list[str]:
    """The task-aware yardstick, its per-benchmark routes, and in words which methods read the
    question beyond its benchmark label and whose gain the label explains (family-wise)."""
    task = result.pareto.get("task_hull")
    if not task:
        return []
    conf = f"{result.config.confidence:.0%}"
    routes = [r for r in task["routes"] if r["route"] in task["chain"]]
    agents = [r for r in result.rows if r["seeds_ok"] and r["kind"] != "fixed-model"]
    withheld = [r["method"] for r in agents if audit.withheld(r["deployable_label"])]
    agents = [r for r in agents if r["method"] not in withheld]
    verdicts = {r["method"]: row_verdict(r) for r in agents}
    by_name = {r["method"]: r for r in agents}
    named = lambda verdict: ", ".join(_blind_tag(by_name[m]) for m, v in verdicts.items() if v == verdict) or "none"  # noqa: E731
    lines = [
        "## Content gain over the task-aware yardstick: does a method read the question, or only its benchmark?", "",
        f"Chain chosen on {result.config.train_split} (null policy, fixed models and per-benchmark routes; test values): "
        f"{_chain(task['chain'], task['chain_energy_j'], task['chain_accuracy'])}. On test the yardstick is their best "
        f"random mix: {_chain(task['vertices'], task['energy_j'], task['accuracy'])}.", "",
        *[f"- {r['route']}: " + ", ".join(f"{b} → {m}" for b, m in r["models"].items()) for r in routes],
        *([""] if routes else []),
        *([f"{100 * task['unseen_share']:.1f} % of the {result.config.test_split} queries come from benchmarks with no "
           f"{result.config.train_split} rows ({', '.join(task['unseen_benchmarks'])}): the label carries nothing there, "
           "so every route sends them where the fixed-model choice at the same price (its lambda) would, and the chain is "
           "chosen on the training points the routes would have on that mix (with only unseen benchmarks in test it is "
           "the fixed-model chain: content gain = routing gain).", ""] if task.get("unseen_share") else []),
        f"Verdicts: family-wise {conf} (Romano-Wolf step-down over the deployable verified rows' routing and content "
        f"gains, ▲ / ▼ in the table); rows outside that family are tagged and judged by their marginal {conf} CI. A row "
        f"tagged {BLIND_TAG} (a fixed-model, label-only or random policy: `Agent.reads_question` False) has a content "
        "gain of at most 0 by construction: it is no hypothesis of the family, never beyond the label, and below it only "
        f"by its marginal {conf} CI.", "",
        f"- {fixed_hull.BEYOND_TASK_LABEL} (content gain above 0): {named(fixed_hull.BEYOND_TASK_LABEL)}",
        f"- {fixed_hull.BELOW_TASK_HULL} (content gain below 0, whatever the routing gain): {named(fixed_hull.BELOW_TASK_HULL)}",
        f"- {fixed_hull.TASK_ROUTING_ONLY} (routing gain above 0, content gain not distinguishable from 0): "
        f"{named(fixed_hull.TASK_ROUTING_ONLY)}",
        f"- {fixed_hull.ON_TASK_HULL}: {named(fixed_hull.ON_TASK_HULL)}",
        *([f"- no verdict (audit failed or not verified): {', '.join(withheld)}"] if withheld else []),
        "",
    ]
    explained = [r for r in agents if verdicts[r["method"]] == fixed_hull.TASK_ROUTING_ONLY]
    lines += [f"{_tag(r)}'s routing gain ({_ci(r, 'routing_gain_pp', '+.1f')} pp) is explained by the benchmark label: "
              f"its content gain is {_ci(r, 'content_gain_pp', '+.1f')} pp." for r in explained]
    same = [r for r in result.rows if r.get("same_routes_as")]
    lines += ([""] if explained else []) + [f"{r['method']} routes exactly as {r['same_routes_as']} (the same model for "
                                            f"every held-out query, every seed): one router, not two." for r in same]
    return lines + ([""] if same else [])


def _markdown_headroom(result: CompareResult) -> list[str]:
    """How far above the task-aware yardstick knowing difficulty, or every outcome, would reach
    (``eval/headroom/__init__.py``'s privileged rungs; no router is fitted): the room a content router has."""
    from routing_gym.errors import RoutingGymError
    from routing_gym.eval.headroom import HeadroomConfig, privileged_ladder

    c = result.config
    config = HeadroomConfig(tournament=result.tournament, train_split=c.train_split, test_split=c.test_split,
                            n_bootstrap=c.n_bootstrap, confidence=c.confidence, bootstrap_seed=c.bootstrap_seed)
    try:
        ladder = privileged_ladder(result.tournament, config)
    except RoutingGymError as exc:  # e.g. train and test are one split
        return ["## Headroom", "", f"Not computed: {exc}.", ""]

    def gain(name: str) -> str:
        r = ladder["rungs"][name]
        return f"{r['content_gain_pp']:+.1f} [{r['ci'][0]:+.1f}, {r['ci'][1]:+.1f}]"

    lead = ladder["oracle_lead"]
    rare = "—" if not math.isfinite(lead["rare_share"]) else f"{100 * lead['rare_share']:.0f} %"
    return ["## Headroom: what reading the question could add", "",
            f"At matched joules ({ladder['budget_j']:,.1f} J, where knowing difficulty is worth most on train; "
            f"knobs on train), content gain over the task-aware yardstick (pp, {c.confidence:.0%} CI): knowing each "
            f"question's share of models right (privileged; its map's form, {ladder['form']}, chosen on train) "
            f"{gain('shared_difficulty')}; the oracle {gain('oracle')}. "
            f"Questions only one or two models answer carry {rare} of the oracle's lead. The full ladder with content "
            f"routers and their pairwise AUCs: `routing-gym headroom {result.tournament.card.name}`.", ""]


def _duplicates_note(settings: dict[str, Any]) -> str:
    d = settings["tournament"]["duplicates"]
    return (f"cross-split duplicate questions: {d['cross_split_texts']} (normalised texts in more than one split; "
            f"{sum(d['within'].values())} extra copies within splits)")


def _audit_notes(result: CompareResult) -> list[str]:
    """What the audit did and cannot see; its cost per cell (seconds, machine-dependent) is
    ``audit_s`` in per_seed.csv, so that table.md stays the same on every executor and machine."""
    declared = "- Deployable: 'no' for methods that declare held-out information (oracle, output-informed diagnostics); "
    if not result.config.audit:
        return [declared + "the audit was off (--no-audit): no row is verified, so none says 'yes'."]
    return [declared + "'yes' only after the audit: each agent fit and run again, in a process where the original "
            "held-out outcomes were never loaded, on a copy whose held-out outcomes are replaced (permuted across "
            f"held-out queries, shifted one model along); any changed action gives '{audit.FAILED_LABEL}'. Its cost per "
            "cell (the second fit + act) is `audit_s` in per_seed.csv, next to `fit_s`.",
            f"- The audit cannot see {audit.AUDIT_BLIND_SPOTS}."]


def _markdown_benchmarks(result: CompareResult) -> list[str]:
    if not result.per_benchmark:
        return []
    frame = pd.DataFrame(result.per_benchmark)
    benchmarks = sorted(frame["benchmark"].unique())
    counts = frame.groupby("benchmark")["n"].first()
    n_total = counts.sum()
    lines = ["## Per benchmark: accuracy % / share of the method's total joules %", "",
             "| Method | " + " | ".join(f"{b} (n={counts[b]}, {counts[b] / n_total:.0%} of queries)" for b in benchmarks) + " |",
             "|---|" + "---:|" * len(benchmarks)]
    for method, group in frame.groupby("method", sort=False):
        by = group.set_index("benchmark")
        cells = [f"{100 * by.loc[b, 'accuracy']:.1f} / {100 * by.loc[b, 'energy_share']:.1f}" if b in by.index else "—" for b in benchmarks]
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    return lines + [""]


def _markdown_pareto(result: CompareResult) -> list[str]:
    p = result.pareto
    ref = p["reference"]
    lines = ["## Pareto analysis (accuracy up, mean joules down)", "",
             f"Hypervolume reference point: {ref['rule']} = ({ref['accuracy']:g}, {ref['energy_j']:,.1f} J); "
             "hypervolumes are normalised by the box [0, reference J] x [reference accuracy, 1].", ""]
    for label, title in (("fixed_models", "fixed models only"), ("deployable", "deployable methods (incl. fixed models)"), ("all", "all methods")):
        if f"front_{label}" in p:
            lines.append(f"- {title}: hypervolume {p[f'hypervolume_{label}']:.4f}; front: {', '.join(p[f'front_{label}'])}")
    lines += ["", *mo_fronts.markdown_lines(p["mo_indicators"])]
    conf = f"{result.config.confidence:.0%}"
    lines += ["", f"Paired bootstrap Pareto dominance: A dominates B when, in >= {conf} of query resamples, A is "
              "better on one axis and not worse on the other; 'tied on' names the other axis when A is not also "
              f"better on it at {conf} (every pair with its deltas and probabilities in dominance.csv):", ""]
    beaten: dict[tuple[str, str], list[str]] = {}
    for d in result.dominance:
        if d["dominates"]:
            beaten.setdefault((d["a"], d["tied_axis"]), []).append(d["b"])
    tie_text = {"": "dominates on both axes", "accuracy": "dominates, tied on accuracy",
                "energy_j": "dominates, tied on joules"}
    for (method, tied), losers in beaten.items():
        lines.append(f"- {method} {tie_text[tied]}: {', '.join(losers)}")
    if not beaten:
        lines.append("- no method significantly dominates another")
    return lines + [""]
