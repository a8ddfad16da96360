"""The job graph, between the semantic core and the runtimes (issue 15).

``transformations`` is the logical graph the DataStream API records (Flink's ``Transformation``s),
``plan`` chains it into the physical plan both runtimes run, and ``operator_factory`` builds the
operator each node becomes.  The API (``engine.api``) builds graphs; the runtimes (``engine.runtime``)
plan and run them; neither is imported from here.
"""
