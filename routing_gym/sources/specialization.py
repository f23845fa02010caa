"""Specialization for procedural tournaments: per-query topics that favour some models, shown in the text.

In the base generator (``routing_gym.sources.synthetic``) the text reveals only the *shared*
difficulty of a question; which model wins within a benchmark is per-model noise that never
shows, so no router can beat a random mix of fixed models by more than about a point.
``ProceduralConfig.specialization_signal`` (``s`` in [0, 1]) adds structure a router can see:

1. **Topic latents.** Every question gets one of six skill domains (``TOPICS``: money, nature,
   machines, health, society, leisure), uniformly at random.
2. **Per-model loadings.** Model ``m`` has a skill ``L[m, b, t]`` on topic ``t`` in benchmark
   ``b``: mostly the same in every benchmark (``1 - BENCHMARK_SHARE`` of the variance), and
   half shared with its model family (``FAMILY_SHARE``: Qwen2.5 sizes are good at the same
   things), standardised over the topics of each benchmark to mean 0 and sd 1. The
   2PL ability of model ``m`` on a question of topic ``t`` becomes
   ``ability[m, b] + c[m, b] + s * SPREAD * L[m, b, t]``, where the offset ``c`` keeps each
   model's expected accuracy per benchmark at its calibrated target (topics only move *where*
   a model is right, not how often).
3. **Text.** Each question starts with one sentence that names its domain (``DOMAIN_WORDS``,
   the same word in every benchmark) and two different words of the topic's vocabulary in its
   template family (``TOPIC_BANKS``), so a text featurizer can recover the topic, and with it
   which models are strong on the question.

At ``s = 0`` nothing here runs: outcomes, texts and the data card are today's, bit for bit.
Topics, loadings and topic words come from their own random stream (``SeedSequence(seed)``'s
seventh child; the base generator uses the first six), so for a fixed seed the shared
difficulty, the per-model noise and the question bodies are the same at every ``s``.

``calibration_statistics`` measures, on any tournament, the three numbers the generator is
calibrated against real tournaments with: mean pairwise correlation of correctness across
models, the AUC of predicting the largest model's correctness from the small models'
correctness, and the AUC of question length for a wrong answer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

if TYPE_CHECKING:  # synthetic imports this module, never the other way round
    from routing_gym.sources.synthetic import ProceduralConfig
    from routing_gym.tournament import Tournament

# Six skill domains shared by every benchmark: a model strong on "money" questions is strong on
# them in word problems, multiple choice and code alike (mostly: see BENCHMARK_SHARE).
TOPICS = ("money", "nature", "machines", "health", "society", "leisure")
# The word each topic sentence uses for its domain, the same in every template family.
DOMAIN_WORDS = ("finance", "nature", "engineering", "health", "society", "leisure")
# Per-model sd of topic skill at s = 1, in ability (= difficulty sd) units: 1.0 moves a model
# by one standard deviation of question difficulty from its average topic to a typical good one.
SPREAD = 1.0
FAMILY_SHARE = 0.5  # share of a model's topic-skill variance common to its model family
BENCHMARK_SHARE = 0.25  # share that is specific to one benchmark (the rest holds across benchmarks)
SPECIALIZATION_STREAM = 6  # index of the SeedSequence child this module draws from

# Per template family: the sentence that opens each question, and the vocabulary of each topic
# (in TOPICS order) in that family's world. Words name one topic only, so a bag of words tells
# topics apart within a family, and an embedding can also link them across families.
TOPIC_BANKS: dict[str, tuple[str, tuple[tuple[str, ...], ...]]] = {
    "word_problem": ("This {domain} problem is about {w1} and {w2}.", (
        ("a grocery store", "discount coupons", "a checkout line", "price tags", "a savings account", "receipts"),
        ("a wheat field", "a vegetable garden", "a harvest", "chicken coops", "apple orchards", "beehives"),
        ("a factory line", "a brick wall", "a construction crew", "steel beams", "a delivery truck", "wooden planks"),
        ("a hospital ward", "vitamin tablets", "a recipe", "cups of flour", "a doctor's appointment", "daily exercise"),
        ("a school library", "a town council", "a class trip", "community volunteers", "a museum visit", "election ballots"),
        ("a basketball league", "a chess club", "a music concert", "a soccer season", "a video game", "a theme park"),
    )),
    "multiple_choice": ("Topic ({domain}): {w1}; related to {w2}.", (
        ("market prices", "inflation rates", "fiscal policy", "interest rates", "labour markets", "trade deficits"),
        ("food webs", "plant cells", "ecosystems", "animal habitats", "photosynthesis", "climate patterns"),
        ("electric circuits", "kinetic energy", "computer networks", "algorithms", "operating systems", "engines"),
        ("clinical symptoms", "a patient diagnosis", "blood pressure", "antibiotics", "the immune system", "nutrition"),
        ("contract law", "a court ruling", "the Roman Empire", "legal precedent", "colonial trade", "treaties"),
        ("art history", "musical scales", "Olympic sports", "film genres", "poetry", "theatre"),
    )),
    "sentence_completion": ("Scene ({domain}): {w1}, {w2}.", (
        ("a market stall", "a cash register", "a bank counter", "shopping bags", "a price board", "a wallet"),
        ("a hiking trail", "a mountain ridge", "a river bank", "pine trees", "a campfire", "wild birds"),
        ("a car engine", "a power drill", "a toolbox", "a leaking pipe", "a bicycle chain", "a workbench"),
        ("a gym treadmill", "a bathroom mirror", "a first-aid kit", "a kitchen counter", "a yoga mat", "a frying pan"),
        ("a classroom", "a city hall", "a wedding party", "a press conference", "a courtroom", "an office meeting"),
        ("a concert hall", "a drum kit", "a tennis court", "a bowling alley", "a dance floor", "a swimming pool"),
    )),
    "competition_math": ("Theme ({domain}): {w1} and {w2}.", (
        ("compound interest", "profit margins", "sales tax", "loan payments", "exchange rates", "price increases"),
        ("population growth", "tree heights", "river currents", "bacteria colonies", "rainfall totals", "animal counts"),
        ("gear ratios", "machine rates", "circuit resistors", "pipe flows", "robot paths", "lever arms"),
        ("medicine doses", "heart rates", "calorie counts", "pill schedules", "blood samples", "body temperatures"),
        ("election votes", "committee choices", "census data", "seating charts", "survey results", "voting districts"),
        ("dice games", "card decks", "chess boards", "race times", "dartboards", "tournament scores"),
    )),
    "code": ("# Domain ({domain}): {w1}, {w2}\n", (
        ("bank balances", "currency amounts", "invoices", "transactions", "tax rates", "stock prices"),
        ("weather readings", "species counts", "sensor data", "rainfall logs", "soil samples", "tide tables"),
        ("network packets", "graph traversal", "shortest paths", "file systems", "matrix rows", "CPU schedules"),
        ("patient records", "dosage tables", "step counts", "lab results", "heart-rate logs", "meal plans"),
        ("user accounts", "census records", "email addresses", "voter lists", "library loans", "court dates"),
        ("game scores", "board states", "playlists", "high-score tables", "card hands", "match fixtures"),
    )),
    "logic_puzzle": ("Puzzle setting ({domain}): {w1} with {w2}.", (
        ("an auction", "market prices", "shop owners", "coin purses", "bank tellers", "price labels"),
        ("a zoo", "farm animals", "garden plots", "bird nests", "forest trails", "fish tanks"),
        ("logic gates", "switches", "relays", "light bulbs", "conveyor belts", "train signals"),
        ("hospital shifts", "patients in beds", "nurses", "doctors' rounds", "pharmacy shelves", "clinic rooms"),
        ("a family tree", "grandparents", "siblings", "a town meeting", "neighbours", "a dinner party"),
        ("a tournament bracket", "race finishing places", "team rankings", "medals", "relay runners", "board games"),
    )),
}


@dataclass(frozen=True)
class Specialization:
    """What ``draw`` adds to one tournament: each question's topic and every model's ability shift."""

    topic: np.ndarray  # [n] index into TOPICS
    topic_name: np.ndarray  # [n] object: the topic's name
    ability_shift: np.ndarray  # [n, K] added to the 2PL ability (offset c included)
    lead: list[str]  # [n] the topic sentence that opens each question

    def annotate(self, prompts: list[str]) -> list[str]:
        """Each prompt with its topic sentence in front."""
        return [lead + ("" if lead.endswith("\n") else " ") + prompt for lead, prompt in zip(self.lead, prompts)]


def draw(
    config: ProceduralConfig,
    bench: np.ndarray,
    streams: list[np.random.SeedSequence],
    accuracy_preserving_offset: Callable[[np.ndarray], np.ndarray],
) -> Specialization:
    """Topics, loadings and topic sentences of one tournament (``config.specialization_signal > 0``).

    ``accuracy_preserving_offset(delta)`` maps the ``[K, B, T]`` topic skills to the ``[K, B]``
    ability offsets that keep each model's expected accuracy per benchmark (the generator's
    2PL calibration owns it)."""
    rng = np.random.default_rng(streams[SPECIALIZATION_STREAM])
    n, k, n_bench, n_topics = len(bench), len(config.models), len(config.benchmarks), len(TOPICS)
    families = [b.family for b in config.benchmarks]
    topic = rng.integers(0, n_topics, n)

    # Loadings: (family part + own part) across benchmarks, plus a per-benchmark part;
    # standardised over the topics of each (model, benchmark).
    model_families = sorted({m.family for m in config.models})
    family_of = np.array([model_families.index(m.family) for m in config.models])
    family_part = rng.standard_normal((len(model_families), 1, n_topics))[family_of]
    general = math.sqrt(FAMILY_SHARE) * family_part + math.sqrt(1 - FAMILY_SHARE) * rng.standard_normal((k, 1, n_topics))
    specific = rng.standard_normal((k, n_bench, n_topics))
    loadings = math.sqrt(1 - BENCHMARK_SHARE) * general + math.sqrt(BENCHMARK_SHARE) * specific
    loadings = (loadings - loadings.mean(axis=2, keepdims=True)) / loadings.std(axis=2, keepdims=True)
    delta = config.specialization_signal * SPREAD * loadings  # [K, B, T]
    offset = accuracy_preserving_offset(delta)  # [K, B]
    shift = (offset[:, :, None] + delta)[:, bench, topic].T  # [n, K]

    words = rng.integers(0, 1 << 30, (n, 2))
    lead = []
    for i in range(n):
        frame, banks = TOPIC_BANKS[families[bench[i]]]
        vocabulary = banks[topic[i]]
        first = words[i, 0] % len(vocabulary)
        second = (first + 1 + words[i, 1] % (len(vocabulary) - 1)) % len(vocabulary)  # a different word
        lead.append(frame.format(domain=DOMAIN_WORDS[topic[i]], w1=vocabulary[first], w2=vocabulary[second]))
    names = np.array(TOPICS, dtype=object)[topic]
    return Specialization(topic=topic, topic_name=names, ability_shift=shift, lead=lead)


# ---------------------------------------------------------------------- calibration statistics
def calibration_statistics(t: Tournament, folds: int = 5, seed: int = 0) -> dict[str, Any]:
    """Three numbers that say how shared correctness is across models *within a benchmark*,
    and how much question length tells (the benchmark mix itself is no routing signal here):

    - ``correlation``: Pearson correlation of correctness over every pair of models within each
      benchmark (pairs with a constant column skipped), averaged over benchmarks by size;
    - ``big_from_small_auc``: AUC, within each benchmark and averaged by size, of a logistic
      regression (``folds``-fold cross-validated predictions, benchmark one-hot included) that
      predicts the largest model's correctness (by parameters, else by mean joules) from the
      correctness of the smaller half of the pool;
    - ``length_auc``: AUC of prompt length (characters) for a *wrong* answer within each
      benchmark, averaged over models and benchmarks by size.

    Fractional correctness counts as correct at >= 0.5. All queries are used (no split).
    """
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold, cross_val_predict

    correct = (np.asarray(t.correct, dtype=np.float64) >= 0.5).astype(np.float64)
    k = correct.shape[1]
    codes = t.benchmark_codes
    length = t.queries["prompt"].astype(str).str.len().to_numpy(dtype=np.float64)
    order = models_by_size(t)
    big = int(order[-1])
    small = [int(j) for j in order[: max(2, k // 2)] if j != big]

    y = correct[:, big]
    predicted = None
    if 0 < y.sum() < len(y) and small:
        onehot = np.eye(len(t.benchmarks))[codes]
        splitter = StratifiedKFold(folds, shuffle=True, random_state=seed)
        predicted = cross_val_predict(LogisticRegression(max_iter=1000), np.hstack([correct[:, small], onehot]), y,
                                      cv=splitter, method="predict_proba")[:, 1]

    corr, big_auc, length_auc = _Weighted(), _Weighted(), _Weighted()
    for code in range(len(t.benchmarks)):
        rows = np.flatnonzero(codes == code)
        block = correct[rows]
        varying = [j for j in range(k) if 0 < block[:, j].sum() < len(rows)]
        if len(varying) > 1:
            matrix = np.corrcoef(block[:, varying].T)
            corr.add(float(matrix[np.triu_indices(len(varying), 1)].mean()), len(rows))
        if predicted is not None:
            big_auc.add(_auc(y[rows], predicted[rows]), len(rows))
        for j in varying:
            length_auc.add(_auc(1 - block[:, j], length[rows]), len(rows) / len(varying))
    return {
        "n_queries": int(t.n_queries),
        "n_models": int(k),
        "correlation": corr.mean(),
        "big_from_small_auc": big_auc.mean(),
        "big_model": t.model_ids[big],
        "small_models": [t.model_ids[j] for j in small],
        "length_auc": length_auc.mean(),
        "mean_accuracy": float(correct.mean()),
    }


class _Weighted:
    """A weighted mean that skips NaN values."""

    def __init__(self) -> None:
        self.total = self.weight = 0.0

    def add(self, value: float, weight: float) -> None:
        if math.isfinite(value):
            self.total += value * weight
            self.weight += weight

    def mean(self) -> float:
        return self.total / self.weight if self.weight else math.nan


def _auc(labels: np.ndarray, scores: np.ndarray) -> float:
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(labels, scores)) if 0 < labels.sum() < len(labels) else math.nan


def models_by_size(t: Tournament) -> np.ndarray:
    """Model indices from smallest to largest: by parameters where every model has them, else by mean joules."""
    params = t.models["params_b"].to_numpy(dtype=np.float64)
    key = params if np.isfinite(params).all() else np.asarray(t.energy_j, dtype=np.float64).mean(axis=0)
    return np.argsort(key, kind="stable")
