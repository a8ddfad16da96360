"""Sluice's public API: ``from engine import ...`` (ARCHITECTURE section 2).

Names follow PyFlink's DataStream API; behaviour follows Flink's Java API and the
seed documents where PyFlink differs.
"""

from engine.api.connected_streams import BroadcastConnectedStream, BroadcastStream, ConnectedStreams
from engine.api.datastream import DataStream, KeyedStream, SingleOutputStreamOperator, TimeCharacteristic
from engine.api.environment import StreamExecutionEnvironment
from engine.api.configuration import Configuration
from engine.api.job_client import JobClient
from engine.api.restart import RestartStrategies
from engine.api.functions import (
    AggregateFunction,
    AllWindowFunction,
    BroadcastProcessFunction,
    CoFlatMapFunction,
    CoMapFunction,
    CoProcessFunction,
    FilterFunction,
    FlatMapFunction,
    KeyedBroadcastProcessFunction,
    KeyedCoProcessFunction,
    KeyedProcessFunction,
    KeySelector,
    MapFunction,
    OutputTag,
    Partitioner,
    ProcessAllWindowFunction,
    ProcessFunction,
    ProcessWindowFunction,
    ReduceFunction,
    RuntimeContext,
    TimeDomain,
    TimerService,
    WindowFunction,
)
from engine.api.connectors import Encoder, FileSink, FileSource, OutputFileConfig, RollingPolicy, StreamFormat
from engine.api.time import Duration, Time
from engine.api.typeinfo import TypeInformation, Types
from engine.api.windowed_stream import AllWindowedStream, WindowedStream
from engine.checkpointing.config import CheckpointConfig, CheckpointingMode, ExternalizedCheckpointRetention
from engine.clock import ManualClock, SystemClock
from engine.operators.async_io import AsyncFunction
from engine.runtime.handle import JobExecutionResult
from engine.api.async_data_stream import AsyncDataStream
from engine.elements import MAX_WATERMARK, MIN_WATERMARK
from engine.errors import (
    CorruptSnapshotError,
    JobDefinitionError,
    MissingTimestampError,
    SluiceError,
    StateSerializationError,
)
from engine.state.descriptors import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    ValueStateDescriptor,
)
from engine.state.ttl_config import StateTtlConfig
from engine.state.descriptors import AggregatingState, ListState, MapState, ReducingState, ValueState
from engine.api.state_backend import EmbeddedRocksDBStateBackend, HashMapStateBackend
from engine.windowing.assigners import DynamicEventTimeSessionWindows, DynamicProcessingTimeSessionWindows
from engine.api.execution_mode import RuntimeExecutionMode
from engine.watermarks.generators import WatermarkGenerator, WatermarkOutput
from engine.watermarks.strategy import TimestampAssigner, WatermarkStrategy
from engine.windowing.assigners import (
    EventTimeSessionWindows,
    GlobalWindows,
    MergingWindowAssigner,
    ProcessingTimeSessionWindows,
    SessionWindowTimeGapExtractor,
    SlidingEventTimeWindows,
    SlidingProcessingTimeWindows,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
    WindowAssigner,
)
from engine.windowing.evictors import CountEvictor, DeltaEvictor, Evictor, TimeEvictor, TimestampedValue
from engine.windowing.triggers import (
    ContinuousEventTimeTrigger,
    ContinuousProcessingTimeTrigger,
    CountTrigger,
    DeltaTrigger,
    EventTimeTrigger,
    ProcessingTimeTrigger,
    PurgingTrigger,
    Trigger,
    TriggerResult,
)
from engine.windowing.windows import CountWindow, GlobalWindow, TimeWindow
from engine.row import Row, RowKind

__all__ = [name for name in dir() if not name.startswith("_") and name[0].isupper()]
