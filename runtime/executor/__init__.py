"""The plan executor: :func:`~runtime.executor.execute.execute` runs a plan on this
machine's devices, one worker per device stream.

:mod:`~runtime.executor.setup` checks the plan and builds an execution (kernels,
buffers, workers), :mod:`~runtime.executor.run` runs it,
:mod:`~runtime.executor.segments` cuts a static plan's GPU work into the segments
launched as CUDA graphs, :mod:`~runtime.executor.cuda` is its CUDA side (through the
interface of :mod:`~runtime.executor.device`), :mod:`~runtime.executor.check` its
correctness check and :mod:`~runtime.executor.view` the dynamic policy's view and its
helpers.
"""
