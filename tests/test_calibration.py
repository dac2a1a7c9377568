"""Calibration: the micro-benchmarks' arithmetic on a fake clock, the GPU parts behind a
fake CUDA device (events, streams, graphs), the calibrated platform's keys, its file
round trip and the check made when it is read."""

from __future__ import annotations

import json
import tomllib
import warnings

import pytest
from fake_cuda import COPY, GRAPH, HANDOVER, LAUNCH, RECORD, US, WAIT, FakeClock, FakeCuda

from hetsim.costmodel.platform import Platform, PlatformError
from hetsim.experiments.cli.main import main
from hetsim.runtime.calibration import (
    FORMAT,
    CalibrationWarning,
    apply_calibration,
    calibrate,
    check_calibration,
    load_calibrated,
    machine_name,
)
from hetsim.runtime.calibration.cuda_bench import GRAPH_OPS, measure_cuda
from hetsim.runtime.calibration.host_bench import FAMILIES, interpreter_slowdown, per_call_s
from hetsim.runtime.calibration.toml_text import toml_text


def test_per_call_s_is_the_median_block_per_call():
    times = iter([0.0, 10.0, 10.0, 40.0, 40.0, 52.0])  # blocks of 10, 30 and 12 s over 2 calls
    assert per_call_s(lambda: None, calls=2, repeats=3, clock=lambda: next(times)) == 6.0
    with pytest.raises(ValueError, match="calls and repeats"):
        per_call_s(lambda: None, calls=0)


def test_interpreter_slowdown_is_the_ratio_of_mean_call_times():
    import threading
    import time

    clock = FakeClock()
    main_thread, alone = threading.current_thread(), threading.active_count()

    def work() -> None:  # the timed thread: 1 ms alone, 3 ms while the other thread runs
        if threading.current_thread() is main_thread:
            clock.t += 3e-3 if threading.active_count() > alone else 1e-3
        else:
            time.sleep(1e-4)

    res = interpreter_slowdown(work, rounds=4, clock=clock)
    assert res == pytest.approx({"alone_s": 1e-3, "both_s": 3e-3, "slowdown": 3.0})


def test_measure_cuda_on_a_fake_device():
    dev = FakeCuda()
    got = measure_cuda(dev, calls=10, repeats=3, samples=5, clock=dev.clock)
    assert got["name"] == "Fake H100"
    assert got["launch_s"] == pytest.approx(LAUNCH, rel=1e-9)
    assert got["graph_launch_s"] == pytest.approx(GRAPH, rel=1e-9)
    assert got["graph_ops"] == GRAPH_OPS * len(FAMILIES) and dev.captured == 1
    assert got["event_record_s"] == pytest.approx(RECORD, rel=1e-9)
    assert got["event_wait_s"] == pytest.approx(WAIT, rel=1e-9)
    assert got["copy_issue_s"] == pytest.approx(COPY, rel=1e-9)
    # kernel end (anchor + elapsed) to the waiting thread running again: the hand-over alone
    assert got["handoff_gpu_to_cpu_s"] == pytest.approx(HANDOVER, rel=1e-6)


def _measured(gpu: bool) -> dict:
    return {"format": FORMAT, "machine": "box | CPU X | " + ("Fake H100" if gpu else "no GPU"),
            "date": "2026-11-28T07:00:00+00:00", "hetsim_version": "0.1.0",
            "cpu": {"op_call_s": {"elementwise": 2 * US, "matmul": 3 * US, "conv": 8 * US, "reduction": 4 * US},
                    "thread_wake_s": 15 * US},
            "interpreter": {"alone_s": 1e-4, "both_s": 1.1e-4, "slowdown": 1.1},
            "gpu": {"name": "Fake H100", "launch_s": LAUNCH, "graph_launch_s": GRAPH, "graph_ops": 16,
                    "event_record_s": RECORD, "event_wait_s": WAIT, "copy_issue_s": COPY,
                    "handoff_gpu_to_cpu_s": HANDOVER} if gpu else None}


def test_apply_calibration_fills_the_host_keys():
    p = apply_calibration(Platform.preset("h100-server"), _measured(gpu=True))
    cpu, gpu = p.device("cpu"), p.device("gpu")
    assert cpu.dispatch_s == pytest.approx(3.5 * US)  # median of 2, 3, 4, 8 us
    assert cpu.handoff_s == HANDOVER
    assert gpu.dispatch_s == pytest.approx(5.5 * US)  # median of 4, 5, 6, 9 us
    assert (gpu.launch, gpu.graph_launch_s, gpu.copy_issue_s, gpu.handoff_s) == ("graph", GRAPH, COPY, 15 * US)
    assert gpu.event_s == pytest.approx(2.5 * US)
    assert p.interpreter_lock is False  # 1.1x < LOCK_SLOWDOWN
    assert p.calibration == {"machine": "box | CPU X | Fake H100", "date": "2026-11-28T07:00:00+00:00",
                             "format": FORMAT, "hetsim_version": "0.1.0"}
    assert apply_calibration(Platform.preset("h100-server"), _measured(True), launch="eager").device("gpu").launch \
        == "eager"


def test_apply_calibration_without_a_gpu_keeps_the_gpu_devices():
    base = Platform.preset("h100-server")
    p = apply_calibration(base, _measured(gpu=False))
    assert p.device("gpu") == base.device("gpu")
    assert p.device("cpu").handoff_s == 15 * US  # a worker's wake-up


def test_toml_text_round_trips_a_platform_with_memory_domains():
    from hetsim.costmodel.memory_domain import MemoryDomain

    dom = MemoryDomain.from_slowdown("host", ["cpu0", "cpu1"], slowdown=1.5, bandwidth_bytes_per_s=1e10)
    p = Platform.preset("cpu2").replace(memory_domains=(dom,), calibration={"machine": 'a "quoted" | b'})
    again = Platform.from_dict(tomllib.loads(toml_text(p.to_dict())))
    assert again == p and again.calibration == p.calibration


def test_calibrate_with_a_fake_gpu_writes_the_platform_and_measurements(tmp_path):
    dev = FakeCuda()
    cal = calibrate("h100-server", out=tmp_path, gpu=dev, calls=5, repeats=1, progress=False, clock=dev.clock)
    assert cal.notes == []
    assert cal.measured["gpu"]["graph_launch_s"] == pytest.approx(GRAPH, rel=1e-9)
    assert cal.measured["machine"].endswith(" | Fake H100")
    read = Platform.from_toml(tmp_path / "platform.toml")
    assert read == cal.platform and read.calibration == cal.platform.calibration
    assert read.calibration["format"] == FORMAT
    assert json.loads((tmp_path / "measurements.json").read_text()) == cal.measured


def test_calibrate_without_cuda_skips_the_gpu_parts_with_a_note(tmp_path, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    steps = []
    cal = calibrate("cpu2", out=None, calls=5, repeats=1, progress=steps.append)
    assert cal.files == {} and cal.measured["gpu"] is None
    assert cal.notes == ["GPU parts skipped: no CUDA GPU on this machine (torch.cuda.is_available() is False)"]
    assert steps == ["CPU op call per family", "worker wake-up", "interpreter lock"]
    assert set(cal.measured["cpu"]["op_call_s"]) == set(FAMILIES)
    assert cal.platform.device("cpu0").dispatch_s > 0


def test_calibrating_a_gpu_platform_without_its_gpu_is_refused(tmp_path, monkeypatch, capsys):
    """This machine's CPU costs never land in a GPU machine's file unasked."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(PlatformError, match=r"platform 'h100-server' has GPU device\(s\) \['gpu'\], but this "
                                            r"machine cannot measure a GPU \(no CUDA GPU on this machine"):
        calibrate("h100-server", out=tmp_path / "c", calls=5, repeats=1, progress=False)
    assert not (tmp_path / "c").exists()
    assert main(["calibrate", "--platform", "h100-server", "--out", str(tmp_path / "c")]) == 2
    assert "platform 'h100-server' has GPU device(s) ['gpu']" in capsys.readouterr().err
    # asked for no GPU: the CPU parts only, the GPU devices as they were, and a note
    cal = calibrate("h100-server", out=None, gpu=None, calls=5, repeats=1, progress=False)
    assert cal.notes == ["GPU parts skipped: no GPU asked for"]
    assert cal.platform.device("gpu") == Platform.preset("h100-server").device("gpu")


def test_check_calibration_names_machine_and_date():
    base = Platform.preset("cpu2")
    here = machine_name()
    same = base.replace(calibration={"machine": here, "date": "2026-11-28", "format": FORMAT})
    assert check_calibration(same, machine=here) is None
    assert check_calibration(base) is None
    other = base.replace(calibration={"machine": "far | CPU Z | no GPU", "date": "2026-01-02", "format": FORMAT})
    text = check_calibration(other, machine=here)
    assert "another machine, 'far | CPU Z | no GPU' on 2026-01-02" in text
    old = base.replace(calibration={"machine": here, "date": "2025-05-05", "format": "0"})
    assert "format 0 (this hetsim writes 1)" in check_calibration(old, machine=here)
    for bad in ("2", "x"):
        with pytest.raises(PlatformError, match=r"\[calibration\] 'format'"):
            check_calibration(base.replace(calibration={"machine": here, "format": bad}), machine=here)


def test_load_calibrated_warns_for_another_machine(tmp_path):
    p = Platform.preset("cpu2").replace(calibration={"machine": "far | CPU Z | no GPU", "date": "2026-01-02",
                                                     "format": FORMAT})
    path = tmp_path / "p.toml"
    path.write_text(toml_text(p.to_dict()))
    with pytest.warns(CalibrationWarning, match="'far | CPU Z | no GPU' on 2026-01-02"):
        assert load_calibrated(path) == p
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_calibrated("cpu2")


def test_cli_calibrate_writes_files_and_refuses_bad_input(tmp_path, capsys):
    assert main(["calibrate", "--platform", "cpu2", "--out", str(tmp_path / "c"), "--gpu", "none",
                 "--calls", "5", "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    assert "note: GPU parts skipped: no GPU asked for" in out
    assert Platform.from_toml(tmp_path / "c" / "platform.toml").calibration["format"] == FORMAT
    assert main(["calibrate", "--platform", "cpu2", "--gpu", "first"]) == 2
    assert "hetsim calibrate: error: --gpu must be a GPU index or 'none', got 'first'" in capsys.readouterr().err
    (tmp_path / "file").write_text("x")
    assert main(["calibrate", "--platform", "cpu2", "--gpu", "none", "--out", str(tmp_path / "file" / "sub"),
                 "--calls", "5", "--repeats", "1"]) == 2
    assert "hetsim calibrate: error: --out" in capsys.readouterr().err


def test_apply_calibration_takes_the_gpu_dispatch_from_a_models_ops_where_measured():
    m = {"cpu": {"op_call_s": {"elementwise": 4e-6}, "thread_wake_s": 3e-5}, "interpreter": {"slowdown": 1.0},
         "gpu": {"launch_s": {"elementwise": 5e-6, "conv": 7e-6}, "graph_launch_s": 9e-6, "event_record_s": 2e-6,
                 "event_wait_s": 2e-6, "copy_issue_s": 8e-6, "handoff_gpu_to_cpu_s": 4e-5},
         "machine": "box | cpu | GPU", "date": "2026-12-07T00:00:00+00:00", "format": FORMAT, "hetsim_version": "0"}
    assert apply_calibration(Platform.preset("h100-server"), m).device("gpu").dispatch_s == 6e-6
    m["gpu"]["model_host"] = {"resnet18": {"per_op_s": {"conv2d": 3e-5}, "median_s": 2.9e-5, "ops": 60},
                              "median_s": 2.9e-5}
    assert apply_calibration(Platform.preset("h100-server"), m).device("gpu").dispatch_s == 2.9e-5


def test_calibrating_with_models_needs_the_gpu(monkeypatch):
    with pytest.raises(PlatformError, match=r"models=\['resnet18'\] measure their ops' host cost on a GPU"):
        calibrate("h100-server", out=None, gpu=None, models=["resnet18"], progress=False)
