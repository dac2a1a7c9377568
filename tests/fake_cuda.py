"""A CUDA device on a fake clock, for the tests of the GPU paths on a machine without
one (:class:`runtime.calibration.cuda_bench.CudaDevice`): a launch costs the host
``LAUNCH[family]`` and queues a ``KERNEL`` on the one stream; an event is stamped
when the stream reaches it; waiting on it returns ``HANDOVER`` after that."""

from __future__ import annotations

from hetsim.runtime.calibration.host_bench import FAMILIES

US = 1e-6
LAUNCH = {"elementwise": 4 * US, "matmul": 6 * US, "conv": 9 * US, "reduction": 5 * US}
KERNEL = 20 * US
RECORD, WAIT, GRAPH, COPY, HANDOVER = 2 * US, 3 * US, 11 * US, 7 * US, 40 * US


class FakeClock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


class FakeEvent:
    def __init__(self, dev: FakeCuda) -> None:
        self.dev, self.at = dev, None

    def record(self) -> None:
        self.dev.clock.t += RECORD
        self.at = max(self.dev.clock.t, self.dev.gpu_free)  # when the stream reaches it

    def synchronize(self) -> None:
        self.dev.clock.t = max(self.dev.clock.t, self.at) + HANDOVER

    def elapsed_time(self, other: FakeEvent) -> float:
        return (other.at - self.at) * 1e3


class FakeStream:
    def __init__(self, dev: FakeCuda) -> None:
        self.dev = dev

    def wait_event(self, event: FakeEvent) -> None:
        self.dev.clock.t += WAIT


class FakeGraph:
    def __init__(self, dev: FakeCuda) -> None:
        self.dev = dev

    def replay(self) -> None:
        self.dev.clock.t += GRAPH
        self.dev.gpu_free = max(self.dev.gpu_free, self.dev.clock.t) + KERNEL


class FakeCuda:
    """A CUDA device on a fake clock: a launch costs the host LAUNCH[family] and queues
    a KERNEL on the one stream; an event is stamped when the stream reaches it."""

    name = "Fake H100"

    def __init__(self) -> None:
        self.clock = FakeClock()
        self.gpu_free = 0.0
        self.captured = 0

    def _launch(self, family: str) -> None:
        self.clock.t += LAUNCH[family]
        self.gpu_free = max(self.gpu_free, self.clock.t) + KERNEL

    def ops(self) -> dict:
        return {f: (lambda f=f: self._launch(f)) for f in FAMILIES}

    def synchronize(self) -> None:
        self.clock.t = max(self.clock.t, self.gpu_free)

    def event(self) -> FakeEvent:
        return FakeEvent(self)

    def stream(self) -> FakeStream:
        return FakeStream(self)

    def capture(self, fn) -> FakeGraph:
        fn()
        self.captured += 1
        return FakeGraph(self)

    def copy_issuer(self, nbytes: int):
        def issue() -> None:
            self.clock.t += COPY
        return issue
