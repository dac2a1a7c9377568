"""GPU cost models: kernels priced from measured GPUs and from spec sheets.

:mod:`~costmodel.gpu.neusight` imports the NeuSight kernel data set into profile folders,
:mod:`~costmodel.gpu.features` maps an operator to its kernel family and dims,
:mod:`~costmodel.gpu.model` fits per-GPU and cross-GPU models (:class:`GPUBank`),
:mod:`~costmodel.gpu.roofline` is the datasheet roofline calibrated per family,
:mod:`~costmodel.gpu.aiconfigurator` prices LLM GEMMs and attention from NVIDIA's
AIConfigurator tables, and :mod:`~costmodel.gpu.evaluate` measures their accuracy.
"""
