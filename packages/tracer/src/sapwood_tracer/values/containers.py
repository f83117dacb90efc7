"""Python containers, in one place for their users: sequences (:mod:`.sequences`) and dicts
(:mod:`.dicts`); sets live in :mod:`.sets`."""

from __future__ import annotations

from .dicts import DictValue, filled_dict
from .sequences import (
    ListValue,
    ListValueIterator,
    NamedTupleValue,
    SliceValue,
    TupleValue,
    list_iterator_at,
)
from .views import DictIteratorValue, DictViewValue

__all__ = [
    "DictIteratorValue",
    "DictValue",
    "DictViewValue",
    "ListValue",
    "ListValueIterator",
    "NamedTupleValue",
    "SliceValue",
    "TupleValue",
    "filled_dict",
    "list_iterator_at",
]
