"""``StateTtlConfig``: how long keyed state lives after its last access (PyFlink's ``StateTtlConfig``).

What a TTL state does with it is engine/state/ttl.py's docstring.
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from engine.durations import positive_millis
from engine.errors import JobDefinitionError

__all__ = ["StateTtlConfig"]


def _ttl_ms(ttl: Any) -> int:
    return positive_millis(ttl, "ttl", "StateTtlConfig.new_builder(Time.seconds(10))")


class StateTtlConfig:
    """How long keyed state lives after its last access (PyFlink's ``pyflink.datastream.state.StateTtlConfig``)."""

    class UpdateType(Enum):
        Disabled = 0
        OnCreateAndWrite = 1
        OnReadAndWrite = 2

    class StateVisibility(Enum):
        ReturnExpiredIfNotCleanedUp = 0
        NeverReturnExpired = 1

    class TtlTimeCharacteristic(Enum):
        ProcessingTime = 0

    class CleanupStrategies:
        """The cleanup strategies asked for (recorded; see the module docstring for what runs)."""

        def __init__(self, strategies: dict[str, Any], is_cleanup_in_background: bool) -> None:
            self._strategies = dict(strategies)
            self._is_cleanup_in_background = is_cleanup_in_background

        def is_cleanup_in_background(self) -> bool:
            return self._is_cleanup_in_background

        def in_full_snapshot(self) -> bool:
            return "full_snapshot" in self._strategies

        def get_incremental_cleanup_strategy(self) -> Any:
            return self._strategies.get("incremental")

        def get_rocksdb_compact_filter_cleanup_strategy(self) -> Any:
            return self._strategies.get("rocksdb_compaction_filter")

    def __init__(self, update_type: StateTtlConfig.UpdateType, state_visibility: StateTtlConfig.StateVisibility,
                 ttl_time_characteristic: StateTtlConfig.TtlTimeCharacteristic, ttl: Any,
                 cleanup_strategies: StateTtlConfig.CleanupStrategies) -> None:
        if not isinstance(update_type, StateTtlConfig.UpdateType):
            raise JobDefinitionError("update_type", update_type, "must be a StateTtlConfig.UpdateType")
        if not isinstance(state_visibility, StateTtlConfig.StateVisibility):
            raise JobDefinitionError("state_visibility", state_visibility, "must be a StateTtlConfig.StateVisibility")
        if not isinstance(ttl_time_characteristic, StateTtlConfig.TtlTimeCharacteristic):
            raise JobDefinitionError("ttl_time_characteristic", ttl_time_characteristic,
                                     "must be StateTtlConfig.TtlTimeCharacteristic.ProcessingTime")
        self._update_type = update_type
        self._state_visibility = state_visibility
        self._ttl_time_characteristic = ttl_time_characteristic
        self._ttl = ttl
        self.ttl_ms = _ttl_ms(ttl)
        self._cleanup_strategies = cleanup_strategies

    @staticmethod
    def new_builder(ttl: Any) -> StateTtlConfig.Builder:
        return StateTtlConfig.Builder(ttl)

    def get_update_type(self) -> StateTtlConfig.UpdateType:
        return self._update_type

    def get_state_visibility(self) -> StateTtlConfig.StateVisibility:
        return self._state_visibility

    def get_ttl(self) -> Any:
        return self._ttl

    def get_ttl_time_characteristic(self) -> StateTtlConfig.TtlTimeCharacteristic:
        return self._ttl_time_characteristic

    def is_enabled(self) -> bool:
        return self._update_type is not StateTtlConfig.UpdateType.Disabled

    def get_cleanup_strategies(self) -> StateTtlConfig.CleanupStrategies:
        return self._cleanup_strategies

    def __repr__(self) -> str:
        return (f"StateTtlConfig(update_type={self._update_type.name}, state_visibility={self._state_visibility.name}, "
                f"ttl_ms={self.ttl_ms})")

    class Builder:
        """``StateTtlConfig.new_builder(ttl)...build()``; defaults as Flink's: OnCreateAndWrite, NeverReturnExpired."""

        def __init__(self, ttl: Any) -> None:
            self._ttl = ttl
            _ttl_ms(ttl)  # fail at the builder, naming the parameter
            self._update_type = StateTtlConfig.UpdateType.OnCreateAndWrite
            self._state_visibility = StateTtlConfig.StateVisibility.NeverReturnExpired
            self._ttl_time_characteristic = StateTtlConfig.TtlTimeCharacteristic.ProcessingTime
            self._is_cleanup_in_background = True
            self._strategies: dict[str, Any] = {}

        def set_update_type(self, update_type: StateTtlConfig.UpdateType) -> StateTtlConfig.Builder:
            self._update_type = update_type
            return self

        def update_ttl_on_create_and_write(self) -> StateTtlConfig.Builder:
            return self.set_update_type(StateTtlConfig.UpdateType.OnCreateAndWrite)

        def update_ttl_on_read_and_write(self) -> StateTtlConfig.Builder:
            return self.set_update_type(StateTtlConfig.UpdateType.OnReadAndWrite)

        def set_state_visibility(self, state_visibility: StateTtlConfig.StateVisibility) -> StateTtlConfig.Builder:
            self._state_visibility = state_visibility
            return self

        def return_expired_if_not_cleaned_up(self) -> StateTtlConfig.Builder:
            return self.set_state_visibility(StateTtlConfig.StateVisibility.ReturnExpiredIfNotCleanedUp)

        def never_return_expired(self) -> StateTtlConfig.Builder:
            return self.set_state_visibility(StateTtlConfig.StateVisibility.NeverReturnExpired)

        def set_ttl_time_characteristic(self, characteristic: StateTtlConfig.TtlTimeCharacteristic
                                        ) -> StateTtlConfig.Builder:
            self._ttl_time_characteristic = characteristic
            return self

        def use_processing_time(self) -> StateTtlConfig.Builder:
            return self.set_ttl_time_characteristic(StateTtlConfig.TtlTimeCharacteristic.ProcessingTime)

        def cleanup_full_snapshot(self) -> StateTtlConfig.Builder:
            self._strategies["full_snapshot"] = True
            return self

        def cleanup_incrementally(self, cleanup_size: int, run_cleanup_for_every_record: bool) -> StateTtlConfig.Builder:
            if not isinstance(cleanup_size, int) or cleanup_size < 0:
                raise JobDefinitionError("cleanup_size", cleanup_size, "must be a non-negative int")
            self._strategies["incremental"] = (cleanup_size, bool(run_cleanup_for_every_record))
            return self

        def cleanup_in_rocksdb_compact_filter(self, query_time_after_num_entries: int,
                                              periodic_compaction_time: Any = None) -> StateTtlConfig.Builder:
            self._strategies["rocksdb_compaction_filter"] = (query_time_after_num_entries, periodic_compaction_time)
            return self

        def disable_cleanup_in_background(self) -> StateTtlConfig.Builder:
            self._is_cleanup_in_background = False
            return self

        def set_ttl(self, ttl: Any) -> StateTtlConfig.Builder:
            _ttl_ms(ttl)
            self._ttl = ttl
            return self

        def build(self) -> StateTtlConfig:
            return StateTtlConfig(self._update_type, self._state_visibility, self._ttl_time_characteristic, self._ttl,
                                  StateTtlConfig.CleanupStrategies(self._strategies, self._is_cleanup_in_background))
