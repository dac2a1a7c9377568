"""Calibration: this machine's host costs, measured with micro-benchmarks in about a
minute, written into a platform (:func:`~runtime.calibration.calibrate.calibrate`).

:mod:`~runtime.calibration.host_bench` measures the CPU side (an op call per family,
a worker's wake-up, the interpreter lock), :mod:`~runtime.calibration.cuda_bench` a
CUDA GPU's (launches, graph replay, events, copy issue, hand-over),
:mod:`~runtime.calibration.calibrated` puts them into a platform's keys and checks a
calibrated platform when it is read, :mod:`~runtime.calibration.toml_text` writes it.
"""

from hetsim.runtime.calibration.calibrate import (
    DEFAULT_OUT,
    Calibration,
    calibrate,
    write_calibration,
)
from hetsim.runtime.calibration.calibrated import (
    FORMAT,
    CalibrationWarning,
    apply_calibration,
    check_calibration,
    load_calibrated,
    machine_name,
)

__all__ = ["DEFAULT_OUT", "FORMAT", "Calibration", "CalibrationWarning", "apply_calibration", "calibrate",
           "check_calibration", "load_calibrated", "machine_name", "write_calibration"]
