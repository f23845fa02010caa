"""The data card stored with every tournament: provenance, licence, units, hardware."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from routing_gym.tournament.schema import ENERGY_PROVENANCES, UNITS


@dataclass
class DataCard:
    """What a tournament is and where its numbers come from.

    ``provenance`` is ``measured`` (GPU energy read per call), ``derived`` (computed from
    published joules-per-token figures) or ``synthetic`` (generated); ``mixed`` when models
    differ (each model row keeps its own ``energy_provenance``).
    """

    name: str
    provenance: str
    description: str = ""
    licence: str = "unknown"
    sources: list[str] = field(default_factory=list)
    hardware: str = ""
    units: dict[str, str] = field(default_factory=lambda: dict(UNITS))
    notes: list[str] = field(default_factory=list)
    split: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.provenance not in ENERGY_PROVENANCES + ("mixed",):
            raise ValueError(
                f"data card {self.name!r}: provenance {self.provenance!r} is not one of "
                f"{', '.join(ENERGY_PROVENANCES + ('mixed',))}"
            )

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "card") -> DataCard:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"{source}: unknown data card field(s) {sorted(unknown)}; known: {sorted(known)}")
        for name in ("name", "provenance"):
            if name not in data:
                raise ValueError(f"{source}: data card field {name!r} is missing")
        return cls(**data)

    def to_markdown(self) -> str:
        lines = [f"# Data card: {self.name}", "", self.description, ""]
        lines += [f"- **Energy provenance:** {self.provenance}", f"- **Licence:** {self.licence}"]
        if self.hardware:
            lines.append(f"- **Hardware:** {self.hardware}")
        if self.split:
            lines.append(f"- **Split:** {self.split}")
        if self.sources:
            lines += ["", "## Sources", *[f"- {s}" for s in self.sources]]
        if self.notes:
            lines += ["", "## Notes", *[f"- {n}" for n in self.notes]]
        lines += ["", "## Units", *[f"- `{k}`: {v}" for k, v in sorted(self.units.items())]]
        return "\n".join(lines) + "\n"
