"""Event-time session windows kept per key in plain objects, with bucketed timers, instead of keyed state.

The general merging path (engine/windowing/window_operator.py with MergingWindowSet) loads each
key's window -> state-window mapping from list state, rebuilds it as TimeWindow dicts, asks the
assigner to merge, registers and deletes timers in the timer service, folds the element into
aggregating state and writes the mapping back, for every element.  For event-time sessions with
a fixed gap, exactly EventTimeTrigger, an incremental aggregate, no evictor, no window function
and no allowed lateness, :class:`SessionWindows` does the same steps on per-key session objects:

* the mapping is an ordered set of session objects per key, in the general mapping's order (a merge
  moves the result to the end, as ``MergingWindowSet.add_window`` does; a window that absorbs an
  element without growing keeps its place, because ``persist`` writes nothing then);
* the commonest element -- one open session that it touches or falls into -- is handled inline,
  growing the session in place; any other goes through :func:`merge_time_windows` and the very
  steps of ``add_window`` and the operator's merge function (merge result, state window kept,
  sources merged in order with the aggregate's ``merge``);
* each session has one live end-of-window timer, identified by its registration number ``seq``:
  a new session registers at its first element (trigger ``on_element``); a merge or growth
  registers the new window (``on_merge``) and deletes the old windows' timers.  Timer entries sit
  in buckets of ``gap // 8`` ms; there is one entry per live session, never later than its
  timer.  A session that changed keeps its old entry and is re-queued at its timer when that
  entry's bucket comes up (see :meth:`SessionWindows.fire`).  So sessions fire in the general
  path's (timestamp, registration) order, with one list append per pass of the watermark instead
  of one heap push per element;
* a built-in ``sum`` over a tuple position is folded as elements arrive, into a running sum next to
  the session's first element (the same additions in the same order as the fold; an element that
  does not fit, say a list, hands over to the general fold, in order).  Other aggregates collect a
  session's elements and fold them (the operator's batch fold, identical to folding one by one)
  when it is merged, fired or snapshotted.  Folding on arrival matters: by firing time the
  elements have left the CPU cache, and the late fold paid a miss per element.

Snapshots are written in the general layout (window contents by state window, the merging-window
set as list state, timers in registration order), so they restore into the general operator and
vice versa (:meth:`adopt`).
"""

from __future__ import annotations

import heapq
from typing import Any, Callable, Sequence

from engine.elements import StreamRecord
from engine.errors import IllegalStateError
from engine.state.key_groups import KeyGroupRange
from engine.state.snapshot import VOID_NAMESPACE, KeyedStateSnapshot, StateTableSnapshot
from engine.timers import TimerServiceSnapshot, _rows_in_registration_order
from engine.windowing.aggregations import set_field
from engine.windowing.assigners import merge_time_windows
from engine.windowing.windows import TimeWindow
from engine.state.key_identity import key_identity

_DEAD = -1


class _Session:
    """One in-flight session of one key: its window, its state window, accumulator and unfolded elements."""

    __slots__ = ("start", "end", "state_start", "state_end", "acc", "pending", "seq", "carrier", "running", "count")

    def __init__(self, start: int, end: int, state_start: int, state_end: int, acc: Any, seq: int) -> None:
        self.start, self.end = start, end
        self.state_start, self.state_end = state_start, state_end
        self.acc = acc
        self.pending: list = []
        self.seq = seq
        #: a built-in tuple-field sum folded as elements arrive (SessionWindows.add): the elements so far
        #: fold to ``carrier`` if ``count`` is 1, else ``carrier`` with the field set to ``running``;
        #: ``count`` 0 means not in use (``acc`` and ``pending`` hold everything)
        self.carrier: Any = None
        self.running: Any = None
        self.count = 0


class _Key:
    """A key's key group and sessions (mapping order); ``only`` is the session when there is exactly one."""

    __slots__ = ("key_group", "sessions", "only")

    def __init__(self, key_group: int) -> None:
        self.key_group = key_group
        #: the in-flight sessions in the general mapping's order (an ordered set: values are None), so a
        #: session that grows in place keeps its place without a dict update
        self.sessions: dict[_Session, None] = {}
        self.only: _Session | None = None

    def refresh(self) -> None:
        sessions = self.sessions
        self.only = next(iter(sessions)) if len(sessions) == 1 else None


class SessionWindows:
    """Sessions of one WindowOperator subtask (module docstring)."""

    def __init__(self, *, gap: int, fold: Callable[[Any, list], Any], merge: Callable[[Any, Any], Any],
                 get_result: Callable[[Any], Any], contents_state: tuple[str, str], merging_state: tuple[str, str],
                 max_parallelism: int, key_group_range: KeyGroupRange, key_group_of: Callable[[Any], int],
                 sum_position: int | None = None) -> None:
        self.gap = gap
        #: the tuple position a built-in ``sum`` adds up, when that is the aggregate: such elements are folded
        #: as they arrive, while they are in cache (a lazy fold at firing time paid a cache miss per element)
        self.sum_position = sum_position
        self._fold = fold
        self._merge = merge
        self._get_result = get_result
        self.contents_state = contents_state
        self.merging_state = merging_state
        self.max_parallelism = max_parallelism
        self.key_group_range = key_group_range
        self._key_group_of = key_group_of
        self.keys: dict[Any, _Key] = {}
        #: timer entries ``(max_timestamp, seq, key, session)`` in buckets of ``bucket_width`` ms by timestamp,
        #: with a heap of the bucket numbers (see fire): a list append per entry instead of a heap push
        self.bucket_width = max(1, gap // 8)
        self.buckets: dict[int, list[tuple[int, int, Any, _Session]]] = {}
        self.bucket_ids: list[int] = []
        self.next_seq = 0

    # ---- elements ---------------------------------------------------------------------------------------
    def add_batch(self, records: Sequence[StreamRecord], key_selector: Callable[[Any], Any],
                  dead_letter: Callable[[StreamRecord, BaseException | None], None],
                  watermark: int) -> list[StreamRecord]:
        """Add records (arrival order) with the watermark fixed; returns the late ones no session took.

        ``key_selector`` is the user's, called once per record with a timestamp; a record without one
        (``dead_letter(record, None)``) or whose selector raises (``dead_letter(record, error)``) goes
        to the operator's dead-letter output, as its key extraction does.
        """
        gap = self.gap
        entries = self.keys
        get = entries.get
        # only sessions with count > 0 read it, and only _add sets a count, when sum_position is set
        position = 0 if self.sum_position is None else self.sum_position
        skipped: list[StreamRecord] = []
        seq = self.next_seq
        for record in records:
            ts = record.timestamp
            if ts is None:
                dead_letter(record, None)  # an event-time window cannot place it
                continue
            value = record.value
            try:
                key = key_identity(key_selector(value))  # 1, 1.0 and True are three sessions' keys (key_identity.py)
            except Exception as exc:  # noqa: BLE001 - a failing key selector is a data problem: dead letter
                dead_letter(record, exc)
                continue
            try:
                entry = get(key)
            except TypeError:  # unhashable: the backend raises the general path's JobDefinitionError
                self._key_group_of(key)
                raise
            if entry is None:
                entry = entries[key] = _Key(self._key_group_of(key))
            end = ts + gap
            only = entry.only
            if only is not None:
                start0, end0 = only.start, only.end
                if ts <= end0 and end >= start0:
                    if end > end0:
                        # merged into a bigger window: on_merge registers its timer, the old window's is
                        # deleted (its timer entry stays behind; see fire)
                        only.end = end
                        if ts < start0:
                            only.start = ts
                        only.seq = seq
                        seq += 1
                    elif ts < start0:
                        only.start = ts
                        only.seq = seq
                        seq += 1
                    if only.count and not only.pending and type(value) is tuple:
                        try:
                            x = value[position]  # type: ignore[index]
                        except (IndexError, TypeError):
                            x = None
                        if type(x) is int or type(x) is float:
                            only.running += x
                            only.count += 1
                            continue
                    self._add(only, value)
                    continue
            if not entry.sessions:
                # no session yet: nothing to merge, the element's window is the new session (its own
                # state window), unless it is already late
                if end - 1 <= watermark:
                    skipped.append(record)
                    del entries[key]
                    continue
                session = _Session(ts, end, ts, end, None, seq)
                self._add(session, value)
                entry.sessions[session] = None
                entry.only = session
                self._queue((end - 1, seq, key, session))  # EventTimeTrigger.on_element registers its timer
                seq += 1
                continue
            self.next_seq = seq
            if not self._add_general(key, entry, value, ts, end, watermark):
                skipped.append(record)
            seq = self.next_seq
            if not entry.sessions:
                del entries[key]
        self.next_seq = seq
        return skipped

    def _add_general(self, key: Any, entry: _Key, value: Any, ts: int, end: int, watermark: int) -> bool:
        """MergingWindowSet.add_window and the operator's merge function, step by step; False if late."""
        sessions = entry.sessions
        new = TimeWindow(ts, end)
        by_window = {(s.start, s.end): s for s in sessions}
        windows = [TimeWindow(s.start, s.end) for s in sessions]
        windows.append(new)
        merge_results: list[tuple[TimeWindow, list]] = []
        merge_time_windows(windows, lambda members, result: merge_results.append((result, list(members))))
        result_window = new
        merged_new = False
        for merge_result, merged_windows in merge_results:
            if new in merged_windows:
                merged_windows.remove(new)
                merged_new = True
                result_window = merge_result
            if merge_result in merged_windows and len(merged_windows) == 1:
                # a window absorbing the new one without growing: add_window pops and re-adds it, which
                # changes only the mapping's order, and persist() writes nothing (the dicts are equal)
                continue
            target = by_window[merged_windows[0]]
            popped = [s for s in (by_window.pop(w, None) for w in merged_windows) if s is not None]
            for s in popped:
                del sessions[s]
            by_window[merge_result] = target
            sessions[target] = None  # the merge result goes to the end of the mapping
            sources = [s for s in popped if (s.state_start, s.state_end) != (target.state_start, target.state_end)]
            # the merge function: on_merge, clear the merged windows, merge their contents
            max_ts = merge_result.end - 1
            if max_ts <= watermark:
                raise IllegalStateError(
                    "The end timestamp of an event-time window cannot become earlier than the current watermark "
                    f"by merging. Current watermark: {watermark} window: {merge_result!r}"
                )
            for s in popped:  # the merged windows' timers are deleted (trigger clear, cleanup timer)
                s.seq = _DEAD
            target.seq = self.next_seq  # on_merge registers the merge result's timer (target keeps its timer entry)
            self.next_seq += 1
            # merge_namespaces(state window, sources): sources merged in order, then into the target
            merged = None
            for s in sources:
                acc = self._folded(s)
                if acc is not None:
                    merged = acc if merged is None else self._merge(merged, acc)
            if merged is not None:
                existing = self._folded(target)
                target.acc = merged if existing is None else self._merge(existing, merged)
            target.start, target.end = merge_result
        if not merge_results or (result_window == new and not merged_new):
            seq = self.next_seq
            session = _Session(ts, end, ts, end, None, seq)
            if end - 1 <= watermark:  # late: retired at once, its element skipped (no timer, no state)
                entry.refresh()
                return False
            sessions[session] = None
            self.next_seq = seq + 1  # EventTimeTrigger.on_element registers the new window's timer
            self._queue((end - 1, seq, key, session))
            self._add(session, value)
        else:
            self._add(by_window[result_window], value)
        entry.refresh()
        return True

    def _add(self, session: _Session, value: Any) -> None:
        """Add one element: into the running sum when the session keeps one and the element fits it
        (a tuple whose summed field is an int or float, nothing unfolded before it), else to the
        elements folded later."""
        position = self.sum_position
        if position is not None and not session.pending and type(value) is tuple and len(value) > position:
            x = value[position]
            if type(x) is int or type(x) is float:
                if session.count:
                    session.running += x
                    session.count += 1
                    return
                acc = session.acc
                if acc is None:
                    session.carrier, session.running, session.count = value, x, 1
                    return
                if type(acc) is tuple and len(acc) > position and type(acc[position]) in (int, float):
                    # what the fold does from an accumulator: its field plus the element's, the rest of it kept
                    session.carrier, session.running, session.count = acc, acc[position] + x, 2
                    session.acc = None
                    return
        if session.count:
            self._materialize(session)
        session.pending.append(value)

    def _materialize(self, session: _Session) -> None:
        """Turn the running sum back into the accumulator the fold would have built."""
        carrier = session.carrier
        session.acc = carrier if session.count == 1 else set_field(carrier, self.sum_position, session.running)  # type: ignore[arg-type]
        session.carrier = session.running = None
        session.count = 0

    def _folded(self, session: _Session) -> Any:
        if session.count:
            self._materialize(session)
        pending = session.pending
        if pending:
            session.acc = self._fold(session.acc, pending)
            session.pending = []
        return session.acc

    # ---- firing -----------------------------------------------------------------------------------------
    def _new_bucket(self, entry: tuple[int, int, Any, _Session]) -> None:
        number = entry[0] // self.bucket_width
        self.buckets[number] = [entry]
        heapq.heappush(self.bucket_ids, number)

    def _queue(self, entry: tuple[int, int, Any, _Session]) -> None:
        bucket = self.buckets.get(entry[0] // self.bucket_width)
        if bucket is None:
            self._new_bucket(entry)
        else:
            bucket.append(entry)

    def fire(self, watermark: int) -> list[StreamRecord]:
        """Results of every session whose end the watermark passed, in (timestamp, registration) order.

        Each live session has exactly one timer entry, never later than its timer (timestamp,
        registration): a session that grew or merged since keeps its old entry, and is re-queued at
        its timer when that entry's bucket comes up; entries of sessions merged away or fired are
        dropped.  Every bucket that can hold a due timer is emptied (re-queued entries may land in
        such a bucket again and are taken in the same call), so the due sessions are exactly those
        the timer service would fire; firing one changes no other, so they fire sorted by
        (timestamp, registration), the timer service's order.
        """
        limit = watermark // self.bucket_width
        ids, buckets = self.bucket_ids, self.buckets
        due: list[tuple[int, int, Any, _Session]] = []
        later: list[tuple[int, int, Any, _Session]] = []
        while ids and ids[0] <= limit:
            for entry in buckets.pop(heapq.heappop(ids)):
                ts, seq, key, session = entry
                current = session.seq
                if current != seq:
                    if current != _DEAD:
                        self._queue((session.end - 1, current, key, session))
                elif ts <= watermark:
                    due.append(entry)
                else:
                    later.append(entry)  # in the watermark's own bucket, not due yet
        for entry in later:
            self._queue(entry)
        out: list[StreamRecord] = []
        if not due:
            return out
        due.sort()  # (timestamp, seq): seq is unique, so keys and sessions are never compared
        entries = self.keys
        get_result = self._get_result
        for max_ts, _seq, key, session in due:
            acc = self._folded(session)
            if acc is not None:
                out.append(StreamRecord(get_result(acc), max_ts))
            session.seq = _DEAD
            entry = entries[key]
            del entry.sessions[session]
            if entry.sessions:
                entry.refresh()
            else:
                del entries[key]
        return out

    def num_sessions(self) -> int:
        return sum(len(e.sessions) for e in self.keys.values())

    # ---- the general layout -----------------------------------------------------------------------------
    def general_layout(self) -> tuple[dict, dict, list]:
        """``(contents, mapping, timers)`` as the general operator holds them: contents by key group
        ``{(key, state window): accumulator}``, mapping by key group ``{(key, VOID): [(start, end,
        state_start, state_end), ...]}``, timers ``[(seq, key, key_group, window)]`` in registration order."""
        contents: dict[int, dict] = {}
        mapping: dict[int, dict] = {}
        timers = []
        for key, entry in self.keys.items():
            kg = entry.key_group
            rows = []
            per_group = contents.setdefault(kg, {})
            for session in entry.sessions:
                acc = self._folded(session)
                state_window = TimeWindow(session.state_start, session.state_end)
                if acc is not None:
                    per_group[(key, state_window)] = acc
                rows.append((session.start, session.end, session.state_start, session.state_end))
                timers.append((session.seq, key, kg, TimeWindow(session.start, session.end)))
            if rows:
                mapping.setdefault(kg, {})[(key, VOID_NAMESPACE)] = rows
        timers.sort(key=lambda t: t[0])
        return contents, mapping, timers

    def snapshot_parts(self) -> tuple[KeyedStateSnapshot, TimerServiceSnapshot]:
        contents, mapping, timers = self.general_layout()
        first = self.key_group_range.start_key_group
        count = len(self.key_group_range)
        tables = {}
        for (name, kind), by_group in ((self.contents_state, contents), (self.merging_state, mapping)):
            tables[name] = StateTableSnapshot(name, kind, tuple(by_group.get(first + i, {}) for i in range(count)))
        timer_groups: dict[int, dict] = {}
        for seq, key, kg, window in timers:
            timer_groups.setdefault(kg, {})[(key, window, window.end - 1)] = seq
        return (KeyedStateSnapshot(self.max_parallelism, self.key_group_range, tables),
                TimerServiceSnapshot(self.max_parallelism, timer_groups, {}))

    def adopt(self, contents: dict, mapping: dict, event_timers: dict, watermark: int) -> bool:
        """Take over restored general-layout state if every in-flight window has exactly its end-of-window
        timer ahead of the watermark; False leaves it where it is.  ``contents``: (key, state window) ->
        accumulator; ``mapping``: key -> persisted rows; ``event_timers``: frozen timer groups."""
        if self.keys:
            return False
        rows = _rows_in_registration_order(event_timers)
        if len(rows) != sum(len(r) for r in mapping.values()):
            return False
        seq_of: dict[tuple, int] = {}
        group_of: dict[Any, int] = {}
        for seq, kg, key, window, ts in rows:
            if type(window) is not TimeWindow or ts != window.end - 1 or ts <= watermark:
                return False
            seq_of[(key, window.start, window.end)] = seq
            group_of[key] = kg
        if len(contents) != len(rows):
            return False
        sessions_of: dict[Any, list[_Session]] = {}
        for key, persisted in mapping.items():
            built = []
            for start, end, state_start, state_end in persisted:
                seq = seq_of.get((key, start, end))
                acc = contents.get((key, TimeWindow(state_start, state_end)))
                if seq is None or acc is None:
                    return False
                built.append(_Session(start, end, state_start, state_end, acc, seq))
            sessions_of[key] = built
        order = sorted(((s.seq, key, s) for key, built in sessions_of.items() for s in built), key=lambda t: t[0])
        renumber = {id(s): i for i, (_seq, _key, s) in enumerate(order)}
        for key, built in sessions_of.items():
            # the restore placed the key in its key group (keyed state checks it against the key's hash)
            entry = self.keys[key] = _Key(group_of[key])
            for s in built:
                s.seq = renumber[id(s)]
                entry.sessions[s] = None
                self._queue((s.end - 1, s.seq, key, s))
            entry.refresh()
        self.next_seq = len(order)
        return True
