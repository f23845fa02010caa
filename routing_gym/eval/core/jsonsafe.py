"""Plain-JSON values for result files: numpy scalars and arrays as Python, NaN / inf as null."""

from __future__ import annotations

import math
from typing import Any

import numpy as np


def strict_json(value: Any) -> Any:
    """Plain Python values with NaN/inf as null: strict JSON that every reader accepts."""
    if isinstance(value, dict):
        return {str(k): strict_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, np.ndarray)):
        return [strict_json(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
