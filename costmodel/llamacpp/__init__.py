"""llama.cpp as it runs: where its flags put each tensor, the memory it allocates, and
its prompt-processing and generation speed from the rates its kernels achieve.

>>> from hetsim.costmodel.llamacpp import LlamaCppRun
>>> LlamaCppRun(ngl=99).ubatch
512
"""

from __future__ import annotations

from hetsim.costmodel.llamacpp.machine import Machine
from hetsim.costmodel.llamacpp.placement import LlamaCppRun, Placement, place
from hetsim.costmodel.llamacpp.predict import Prediction, predict, rates_for
from hetsim.costmodel.llamacpp.rates import BACKENDS, MEMORY_CLASSES, AchievedRates, BackendRates

__all__ = ["BACKENDS", "MEMORY_CLASSES", "AchievedRates", "BackendRates", "LlamaCppRun", "Machine", "Placement",
           "Prediction", "place", "predict", "rates_for"]
