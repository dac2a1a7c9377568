"""The plan executor: :func:`~runtime.executor.execute.execute` runs a plan on this
machine's devices, one worker per device stream.

:mod:`~runtime.executor.setup` builds an execution (kernels, buffers, workers),
:mod:`~runtime.executor.run` runs it, :mod:`~runtime.executor.cuda` is its CUDA side,
:mod:`~runtime.executor.check` its correctness check and :mod:`~runtime.executor.view`
the dynamic policy's view and its helpers.
"""
