"""Tournament data model: queries x models outcome tables, dense arrays, Parquet/JSONL I/O."""

from routing_gym.tournament.card import DataCard
from routing_gym.tournament.tournament import (
    PAPER_SPLIT,
    Outcomes,
    Tournament,
    leave_one_benchmark_out,
    load_tournament,
    save_tournament,
)

__all__ = ["DataCard", "Outcomes", "PAPER_SPLIT", "Tournament", "leave_one_benchmark_out", "load_tournament", "save_tournament"]
