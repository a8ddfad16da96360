"""Which in-flight (session) window keeps its contents under which *state window* (Flink's MergingWindowSet).

When session windows merge, moving their contents every time would be wasteful, so
Flink keeps one mapping per key: *window -> state window*.  The state window is the
namespace the contents really live under; after a merge the result window inherits the
state window of one of the merged windows and the others' contents are merged into it.
Triggers and timers, however, always use the actual (merged) window.

The mapping is persisted in keyed state (a list state under the void namespace,
``merging-window-set``) so it is part of every snapshot and rescales by key group, as in
Flink.  Windows are stored as ``(start, end, state_start, state_end)`` tuples.

Supported: :class:`TimeWindow` (every built-in merging assigner).  Not supported: merging
assigners producing other window types (refused with JobDefinitionError when persisted).
"""

from __future__ import annotations

from typing import Any, Callable, Collection

from engine.errors import IllegalStateError, JobDefinitionError
from engine.state.descriptors import ListStateDescriptor
from engine.state.snapshot import VOID_NAMESPACE
from engine.windowing.assigners import MergingWindowAssigner
from engine.windowing.windows import TimeWindow

MERGING_WINDOW_SET_STATE = ListStateDescriptor("merging-window-set")

#: merge_function(merge_result, merged_windows, state_window_result, merged_state_windows)
MergeFunction = Callable[[Any, list, Any, list], None]


class MergingWindowSet:
    """The current key's window -> state-window mapping; load per key, :meth:`persist` after changing it."""

    __slots__ = ("_assigner", "_state", "mapping", "_initial")

    def __init__(self, assigner: MergingWindowAssigner, state: Any) -> None:
        """``state`` is the list state for MERGING_WINDOW_SET_STATE, already scoped to the current key."""
        self._assigner = assigner
        self._state = state
        state.set_current_namespace(VOID_NAMESPACE)
        self.mapping: dict[Any, Any] = {}
        stored = state.get()
        if stored:
            for start, end, state_start, state_end in stored:
                self.mapping[TimeWindow(start, end)] = TimeWindow(state_start, state_end)
        self._initial = dict(self.mapping)

    def persist(self) -> None:
        """Write the mapping back to keyed state if it changed (an empty mapping clears the entry)."""
        if self.mapping == self._initial:
            return
        rows = []
        for window, state_window in self.mapping.items():
            if type(window) is not TimeWindow or type(state_window) is not TimeWindow:
                raise JobDefinitionError(
                    "window_assigner",
                    self._assigner,
                    f"produced a merging window of type {type(window).__name__}; only TimeWindow can be persisted",
                    "Use EventTimeSessionWindows/ProcessingTimeSessionWindows or a MergingWindowAssigner of TimeWindows",
                )
            rows.append((window.start, window.end, state_window.start, state_window.end))
        self._state.set_current_namespace(VOID_NAMESPACE)
        self._state.update(rows)
        self._initial = dict(self.mapping)

    def get_state_window(self, window: Any) -> Any:
        """The namespace ``window``'s contents live under, or None if the window is not in flight."""
        return self.mapping.get(window)

    def retire_window(self, window: Any) -> None:
        """Forget a window that was purged/cleaned up or is late."""
        if self.mapping.pop(window, None) is None:
            raise IllegalStateError(f"Window {window!r} is not in the in-flight window set")

    def add_window(self, new_window: Any, merge_function: MergeFunction) -> Any:
        """Add ``new_window``, merging it (and others) as the assigner says; returns the window it ended up in.

        ``merge_function`` is called for every merge with the result window, the windows
        merged away (without ``new_window``, which never had state), the state window the
        result keeps, and the state windows whose contents must be merged into it.
        Follows Flink's ``MergingWindowSet.addWindow`` step by step.
        """
        windows = list(self.mapping.keys())
        windows.append(new_window)
        merge_results: list[tuple[Any, list]] = []

        def callback(to_be_merged: Collection[Any], merge_result: Any) -> None:
            merge_results.append((merge_result, list(to_be_merged)))

        self._assigner.merge_windows(windows, callback)

        result_window = new_window
        merged_new_window = False
        for merge_result, merged_windows in merge_results:
            # if our new window is among the merged ones, the merge result is where it went
            if new_window in merged_windows:
                merged_windows.remove(new_window)
                merged_new_window = True
                result_window = merge_result
            # keep the state window of any one merged window for the result
            merged_state_window = self.mapping[merged_windows[0]]
            merged_state_windows = []
            for merged_window in merged_windows:
                res = self.mapping.pop(merged_window, None)
                if res is not None:
                    merged_state_windows.append(res)
            self.mapping[merge_result] = merged_state_window
            # the target state window is not merged into itself
            merged_state_windows = [w for w in merged_state_windows if w != merged_state_window]
            # a pre-existing window absorbing only the new window (not growing) needs no merge
            if not (merge_result in merged_windows and len(merged_windows) == 1):
                merge_function(merge_result, merged_windows, self.mapping[merge_result], merged_state_windows)

        # the new window is self-contained: it is its own state window
        if not merge_results or (result_window == new_window and not merged_new_window):
            self.mapping[result_window] = result_window
        return result_window

    def __repr__(self) -> str:
        return f"MergingWindowSet({self.mapping})"
