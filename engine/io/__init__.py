"""Sources and sinks: replayable split sources and committing sinks (seed 002; ARCHITECTURE sections 2, 3).

Sources: :class:`CollectionSource` (``env.from_collection``), :class:`GeneratorSource`
(deterministic purchase events for the demo, tests and benchmarks), :class:`FileSource`
(``env.read_files``).  Sinks: :class:`FileSink` (``write_files``, two-phase commit, driven by :class:`TwoPhaseCommitDriver`),
:class:`PrintSink`, :class:`CollectSink`, and :class:`DeadLetterSink` for input
the job could not process.  A Kafka source is not included (no broker here).
"""

from engine.io.collection_source import CollectionSource
from engine.io.dead_letters import DeadLetterEntry, DeadLetterSink
from engine.io.file_sink import FileSink, committed_files, read_committed
from engine.io.file_source import FileSource
from engine.io.generator_source import GeneratorSource
from engine.io.sink import CollectSink, CommitHandle, PrintSink, Sink, Transaction, TwoPhaseCommitSink, is_transactional
from engine.io.source import ArrowReadBatch, MalformedInput, ReadBatch, Source, SourceSplit, SplitReader
from engine.io.two_phase_commit import TwoPhaseCommitDriver

__all__ = [
    "ArrowReadBatch", "CollectSink", "CollectionSource", "CommitHandle", "MalformedInput", "DeadLetterEntry",
    "DeadLetterSink", "FileSink", "FileSource", "GeneratorSource", "PrintSink", "ReadBatch", "Sink", "Source",
    "SourceSplit", "SplitReader", "Transaction", "TwoPhaseCommitDriver", "TwoPhaseCommitSink", "committed_files", "is_transactional",
    "read_committed",
]
