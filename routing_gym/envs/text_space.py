"""``QuestionText``: the ``Text`` space of a question, safe in gymnasium's async vector envs.

``gym.make_vec(id, vectorization_mode="async")`` passes observations through shared memory by
default. Gymnasium's ``AsyncVectorEnv`` reads its shared block *once*, at construction, into
the observations it returns: an array is a view that later writes show through, but a ``Text``
part is decoded then into immutable strings, so every question arrives blank (the characters
of an all-zero block). ``QuestionText`` registers its own reader: a ``SharedTexts`` sequence
that decodes the block when it is read, and turns into a tuple of strings when copied (the
async env deep-copies its observations before returning them, unless ``copy=False``).

The charset is kept as a sorted string: gymnasium before 1.4 orders a set charset by
iteration, which hash randomisation makes differ between the worker writing a question and
the parent reading it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from gymnasium import spaces
from gymnasium.vector.utils import read_from_shared_memory


class QuestionText(spaces.Text):
    """``spaces.Text`` over the sorted characters of ``charset`` (see the module docstring)."""

    def __init__(self, max_length: int, *, min_length: int = 0, charset: Iterable[str], seed: Any = None):
        super().__init__(max_length, min_length=min_length, charset="".join(sorted(set(charset))), seed=seed)


class SharedTexts(Sequence):
    """The ``n`` strings of a ``QuestionText`` shared-memory block, decoded when read."""

    def __init__(self, space: QuestionText, memory: Any, n: int):
        self._space, self._memory, self._n = space, memory, n

    def decode(self) -> tuple[str, ...]:
        return _read_text(self._space, self._memory, self._n)

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, index: Any) -> Any:
        return self.decode()[index]

    def __deepcopy__(self, memo: dict) -> tuple[str, ...]:
        return self.decode()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and tuple(self) == tuple(other)

    def __repr__(self) -> str:
        return f"SharedTexts({self.decode()!r})"


_read_text = read_from_shared_memory.dispatch(spaces.Text)  # gymnasium's own decoder


@read_from_shared_memory.register(QuestionText)
def _read_question_texts(space: QuestionText, shared_memory: Any, n: int = 1) -> SharedTexts:
    return SharedTexts(space, shared_memory, n)
