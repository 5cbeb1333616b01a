"""Progress of long work inside one call: texts embedded, LLM requests made, index stages. The
library reports it here and the CLI draws it; without a listener a report costs nothing.

A listener is set for a block (`listening`) and is called with the step's name, how much of it
is done and its total, so a bar can move while one large document is embedded rather than
only between documents.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

Listener = Callable[[str, int, int], None]

_LISTENER: ContextVar[Listener | None] = ContextVar("tortus_progress", default=None)


@contextmanager
def listening(listener: Listener) -> Iterator[None]:
    """Send the progress reported inside the block to `listener(step, done, total)`."""
    token = _LISTENER.set(listener)
    try:
        yield
    finally:
        _LISTENER.reset(token)


def report(step: str, done: int, total: int) -> None:
    """Tell the listener, if any, that `done` of `total` of `step` are finished."""
    listener = _LISTENER.get()
    if listener is not None:
        listener(step, done, total)
