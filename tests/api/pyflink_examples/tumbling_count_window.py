# Sluice port of PyFlink's windowing example tumbling_count_window.py
# (apache/flink: flink-python/pyflink/examples/datastream/windowing/tumbling_count_window.py, as shipped in
# apache-flink 2.3.0). Only the import lines differ from the original: every other statement is
# PyFlink's program as written, so `diff` against the original shows the import block alone
# (plus this header and reworded comments). tests/api/test_pyflink_port.py runs it and compares
# its stdout with what PyFlink printed.
import sys

import argparse
from typing import Iterable

from engine import FileSink, OutputFileConfig, RollingPolicy

from engine import Types, Encoder
from engine import StreamExecutionEnvironment, WindowFunction
from engine import CountWindow


class SumWindowFunction(WindowFunction[tuple, tuple, str, CountWindow]):
    def apply(self, key: str, window: CountWindow, inputs: Iterable[tuple]):
        result = 0
        for i in inputs:
            result += i[0]
        return [(key, result)]


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

    # a bounded source of (number, word) tuples
    data_stream = env.from_collection([
        (1, 'hi'), (2, 'hello'), (3, 'hi'), (4, 'hello'), (5, 'hi'), (6, 'hello'), (6, 'hello')],
        type_info=Types.TUPLE([Types.INT(), Types.STRING()]))

    ds = data_stream.key_by(lambda x: x[1], key_type=Types.STRING()) \
        .count_window(2) \
        .apply(SumWindowFunction(), Types.TUPLE([Types.STRING(), Types.INT()]))

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
