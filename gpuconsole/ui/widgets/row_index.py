"""A snapshot's items sorted and filtered for a big table (:class:`RowIndex`): built once per
new reading, merged when most items are the same objects, narrowed as a filter is typed.

An index never changes a list or dict it has handed out: every change makes new ones and
rebinds. So :meth:`RowIndex.successor` can bring a copy up to a new reading in a worker thread
while the UI thread keeps reading (and filtering) the index it has.

Its long sequences are tuples of strings, never lists: the cyclic
garbage collector stops tracking such a tuple after its first look, where a list of 100,000
keys is walked again by every full collection (hundreds of ms at a big cluster's scale).
"""

from __future__ import annotations

import bisect
import copy
import itertools
import operator
from collections.abc import Callable, Iterable, Sequence
from typing import Any


INCREMENTAL_SHARE = 8  # a new reading is merged into the last order when under 1/8 of it changed


class RowIndex:
    """A snapshot's items sorted for a table, found by key, with their filter words.

    Rebuilt only when the snapshot hands over a new tuple of items, and then each item's filter
    words are reused while the item itself is the same object, so a filter keystroke over
    100,000 rows is one pass of substring tests over strings made once. When most items are the
    same objects as in the last tuple, they keep their order and only the others are placed
    (rows whose order keys are equal then keep the order they had).
    """

    def __init__(self, key: Callable[[Any], str], order: Callable[[Any], Any], words: Callable[[Any], Sequence[object]]) -> None:
        self._key, self._order, self._words_of = key, order, words
        self._items: tuple[Any, ...] | None = None
        self.by_key: dict[str, Any] = {}
        self._ordered: tuple[str, ...] = ()  # the keys in table order
        # the filter words of each key of ``_ordered``, in that order: one lower-case string a
        # row (no order key or {key: words} kept beside them: at 100,000 rows those held 25 MB)
        self._ordered_texts: tuple[str, ...] = ()
        # the last filter asked for, of which order, and the keys it found with their words
        self._last: tuple[str, object, tuple[str, ...], tuple[str, ...]] = ("", None, (), ())
        self._texts: tuple[object, bool, tuple[str, ...]] = (None, False, ())  # the shown keys' words, for which order
        self._descending = False
        self._widest: tuple[object, Callable[[Any], int] | None, int] = (None, None, 0)
        self._fresh: list[Any] | None = None  # the items readings brought since the widest was measured (None: all)

    def blank(self) -> RowIndex:
        """A new, empty index that keys, orders and words items as this one does."""
        fresh = RowIndex(self._key, self._order, self._words_of)
        fresh._descending = self._descending
        return fresh

    @property
    def empty(self) -> bool:
        """No reading was given yet."""
        return self._items is None

    @property
    def items(self) -> tuple[Any, ...] | None:
        """The tuple of items the index was last brought up to."""
        return self._items

    def successor(self, items: tuple[Any, ...] | None = None, filter_text: str = "") -> RowIndex:
        """A copy of this index brought up to ``items`` (None: as it is), with ``filter_text``'s
        rows already found, so the next keystroke that extends it narrows from them; this index
        is left as it was. Safe to call from a worker thread."""
        fresh = copy.copy(self)
        if items is not None:
            fresh.update(items)
        if filter_text:
            fresh.keys(filter_text)
        return fresh

    def set_order(self, order: Callable[[Any], Any], descending: bool = False) -> None:
        """Order the items by ``order`` from now on (a sort column chosen): a key of ``(1, …)``
        marks an unknown value, which sorts last in either direction."""
        self._order, self._descending = order, descending
        self._last = ("", None, (), ())
        if self.by_key:
            self._sort(self.by_key, self.by_key)

    def widest(self, width_of: Callable[[Any], int]) -> int:
        """The largest ``width_of(item)`` (a name column's width): counted over every item once,
        then over the items each merged reading brought (a name that went keeps its room)."""
        items, fn, width = self._widest
        if items is self._items and fn is width_of:
            return width
        fresh = self._fresh
        if fn is width_of and fresh is not None:
            width = max(width, max(map(width_of, fresh), default=0))
        else:
            width = max(map(width_of, self.by_key.values()), default=0)
        self._widest, self._fresh = (self._items, width_of, width), []
        return width

    @property
    def rows_token(self) -> object:
        """A token that stays the same object while the rows and their order stay as they are
        (a new reading of the very same items keeps it), for a caller that caches what it
        made from :meth:`keys`."""
        return self._ordered

    @property
    def ordered(self) -> list[Any]:
        """The items in table order."""
        by_key = self.by_key
        return [by_key[k] for k in self._ordered]

    def update(self, items: tuple[Any, ...]) -> None:
        if items is self._items:
            return
        last_items, self._items = self._items, items
        key = self._key
        previous = self.by_key
        lo, old_hi, new_hi = _changed_span(last_items, items) if previous else (0, 0, len(items))
        # Only the items between the unchanged head and tail of the tuple are looked at (a big
        # cluster's reading is its live jobs, then a long history of the very same objects).
        fresh = {key(item): item for item in items[lo:new_hi]}
        changed = [k for k, item in fresh.items() if previous.get(k) is not item]
        gone = [k for k in map(key, last_items[lo:old_hi]) if k not in fresh] if last_items else []
        if previous and not changed and not gone:  # the same objects in a new tuple: nothing moves
            return
        size = len(previous) + sum(1 for k in changed if k not in previous) - len(gone)
        if previous and (len(changed) + len(gone)) * INCREMENTAL_SHARE < size:
            by_key = previous.copy()
            for k in gone:
                del by_key[k]
            by_key.update(fresh)
            self._merge(by_key, previous, changed, gone)
            if self._fresh is not None:  # a new list: a successor made in a worker shares the last one
                self._fresh = self._fresh + [by_key[k] for k in changed]
        else:
            by_key = {key(item): item for item in items}
            self._sort(by_key, previous)
            self._fresh = None
        self.by_key = by_key

    def _words_for(self, item: Any) -> str:
        return " ".join(str(w) for w in self._words_of(item) if w is not None).lower()

    def _sort(self, by_key: dict[str, Any], previous: dict[str, Any]) -> None:
        """Sort every item; a row's words are kept while ``previous`` holds the same object."""
        order = self._order
        ordered = sorted(by_key, key=lambda k: order(by_key[k]))
        old = dict(zip(self._ordered, self._ordered_texts, strict=True)) if previous else {}
        words_for = self._words_for
        texts = []
        for k in ordered:
            item = by_key[k]
            cached = old.get(k) if previous.get(k) is item else None
            texts.append(cached if cached is not None else words_for(item))
        self._ordered, self._ordered_texts = tuple(ordered), tuple(texts)

    def _merge(self, by_key: dict[str, Any], previous: dict[str, Any], changed: list[str], gone: list[str]) -> None:
        """Most rows are the very objects of the last reading (a big cluster's finished jobs):
        they keep their places; the rows that went or changed are taken out and the new or
        changed ones placed, instead of sorting every row again. A place is found by bisecting
        on the order of the items themselves (a few calls of ``order`` a row that moved)."""
        moved = [k for k in changed if k in previous]
        order = self._order
        ordered, texts = list(self._ordered), list(self._ordered_texts)
        old_order = lambda k: order(previous[k])  # noqa: E731 - every key placed so far is in previous
        for k in (*gone, *moved):
            at = bisect.bisect_left(ordered, old_order(k), key=old_order)
            while at < len(ordered) and ordered[at] != k:  # past rows of an equal order key
                at += 1
            if at == len(ordered):  # an order that reads the clock (a running job's duration) moved on
                at = ordered.index(k)
            del ordered[at]
            del texts[at]
        new_order = lambda k: order(by_key[k])  # noqa: E731 - the rows that stayed are the same objects
        for k in changed:
            item = by_key[k]
            at = bisect.bisect_right(ordered, order(item), key=new_order)
            ordered.insert(at, k)
            texts.insert(at, self._words_for(item))
        self._ordered, self._ordered_texts = tuple(ordered), tuple(texts)

    def keys(self, filter_text: str = "") -> list[str]:
        """The keys in table order whose words hold every term of ``filter_text``.

        Typing narrows: a text that extends the last one asked for (``train-00`` after
        ``train-0``) can only match rows the last one matched, so only those are tested; the
        same text asked again of the same reading (every frame) is not tested at all. The
        words are tested from a tuple kept in table order, not looked up key by key.
        """
        shown = self._shown()
        if not filter_text:
            return list(shown)
        text = filter_text.lower()
        made_for = self._ordered  # the reading and order the last answer was found in
        last_text, last_made_for, last_keys, last_texts = self._last
        if last_made_for is made_for and text == last_text:
            return list(last_keys)
        if last_made_for is made_for and last_text and text.startswith(last_text):
            keys, texts = last_keys, last_texts
        else:
            keys, texts = shown, self._shown_texts()
        terms = text.split()
        if len(terms) == 1:
            term = terms[0]
            hits = [term in text_ for text_ in texts]
        else:
            hits = [all(term in text_ for term in terms) for text_ in texts]
        found = tuple(itertools.compress(keys, hits))
        self._last = (text, made_for, found, tuple(itertools.compress(texts, hits)))
        return list(found)

    def _shown_texts(self) -> tuple[str, ...]:
        """The filter words of the keys in the order shown, made once per reading and order."""
        if not self._descending:
            return self._ordered_texts
        made_for, descending, texts = self._texts
        if made_for is not self._ordered or descending != self._descending:
            cut = self._unknown_from()
            texts = self._ordered_texts[:cut][::-1] + self._ordered_texts[cut:]
            self._texts = (self._ordered, self._descending, texts)
        return texts

    def _shown(self) -> tuple[str, ...]:
        """The keys in the order shown: reversed for a descending sort, the unknown still last."""
        if not self._descending:
            return self._ordered
        cut = self._unknown_from()
        return self._ordered[:cut][::-1] + self._ordered[cut:]

    def _unknown_from(self) -> int:
        """Where the rows whose order key marks an unknown value, ``(1, …)``, begin."""
        order, by_key = self._order, self.by_key
        return bisect.bisect_left(self._ordered, (1,), key=lambda k: order(by_key[k]))


def _changed_span(old: tuple[Any, ...] | None, new: tuple[Any, ...]) -> tuple[int, int, int]:
    """Where ``new`` differs from ``old``: ``(lo, old_hi, new_hi)`` such that ``old[:lo]`` and
    ``new[:lo]`` are the same objects, and so are ``old[old_hi:]`` and ``new[new_hi:]``. Two
    passes in C (``map(is_not, …)``), a few milliseconds over 100,000 items."""
    if old is None:
        return 0, 0, len(new)
    shortest = min(len(old), len(new))
    lo = next(itertools.compress(itertools.count(), map(operator.is_not, old, new)), shortest)
    tail = next(itertools.compress(itertools.count(), map(operator.is_not, reversed(old), reversed(new))), shortest)
    tail = min(tail, shortest - lo)
    return lo, len(old) - tail, len(new) - tail
