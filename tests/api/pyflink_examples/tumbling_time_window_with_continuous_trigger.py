# Sluice port of PyFlink's windowing example tumbling_time_window_with_continuous_trigger.py
# (apache/flink: flink-python/pyflink/examples/datastream/windowing/tumbling_time_window_with_continuous_trigger.py, commit fcd7dc81;
# not shipped in the apache-flink 2.3.0 wheel, run under it for the expected output). Only the import
# lines differ from the original: every other statement is PyFlink's program as written, so `diff`
# against the original shows the import block alone (plus this header and reworded comments).
# tests/api/test_pyflink_port.py runs it and compares its stdout with what PyFlink printed.
import sys

import argparse
from typing import Iterable

from engine import FileSink, OutputFileConfig, RollingPolicy

from engine import Types, WatermarkStrategy, Time, Encoder
from engine import TimestampAssigner
from engine import StreamExecutionEnvironment, ProcessWindowFunction
from engine import TumblingEventTimeWindows, TimeWindow, \
    ContinuousEventTimeTrigger


class MyTimestampAssigner(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp) -> int:
        return int(value[1])


class CountWindowProcessFunction(ProcessWindowFunction[tuple, tuple, str, TimeWindow]):
    def process(self,
                key: str,
                context: ProcessWindowFunction.Context[TimeWindow],
                elements: Iterable[tuple]) -> Iterable[tuple]:
        return [(key, context.window().start, context.window().end, len([e for e in elements]))]

    def clear(self, context: ProcessWindowFunction.Context) -> None:
        pass


if __name__ == '__main__':
    parser = argparse.ArgumentParser()
    parser.add_argument(
        '--output',
        dest='output',
        required=False,
        help='Output file to write results to.')

    argv = sys.argv[1:]
    known_args, _ = parser.parse_known_args(argv)
    output_path = known_args.output

    env = StreamExecutionEnvironment.get_execution_environment()
    # one subtask, so every result lands in one place
    env.set_parallelism(1)

    # a bounded source of (value, timestamp) tuples
    data_stream = env.from_collection([
        ('hi', 1), ('hi', 2), ('hi', 3), ('hi', 4), ('hi', 5), ('hi', 8), ('hi', 9), ('hi', 15)],
        type_info=Types.TUPLE([Types.STRING(), Types.INT()]))

    # event time comes from the tuple's second field
    watermark_strategy = WatermarkStrategy.for_monotonous_timestamps() \
        .with_timestamp_assigner(MyTimestampAssigner())

    ds = data_stream.assign_timestamps_and_watermarks(watermark_strategy) \
        .key_by(lambda x: x[0], key_type=Types.STRING()) \
        .window(TumblingEventTimeWindows.of(Time.milliseconds(10))) \
        .trigger(ContinuousEventTimeTrigger.of(Time.milliseconds(5))) \
        .process(CountWindowProcessFunction(),
                 Types.TUPLE([Types.STRING(), Types.INT(), Types.INT(), Types.INT()]))

    # files with --output, stdout otherwise
    if output_path is not None:
        ds.sink_to(
            sink=FileSink.for_row_format(
                base_path=output_path,
                encoder=Encoder.simple_string_encoder())
            .with_output_file_config(
                OutputFileConfig.builder()
                .with_part_prefix("prefix")
                .with_part_suffix(".ext")
                .build())
            .with_rolling_policy(RollingPolicy.default_rolling_policy())
            .build()
        )
    else:
        print("Printing result to stdout. Use --output to specify output path.")
        ds.print()

    # run the bounded job to its end
    env.execute()
