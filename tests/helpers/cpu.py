"""A CPU for `auto` precision to choose on (runtime.choose_bfloat16): its /proc/cpuinfo flags,
no GPU, and the measured rates of its products, so that the choice does not depend on the
machine the tests run on."""

from tfnmt import runtime

# An AMD EPYC with AVX512_BF16: bfloat16 products at twice its float32 rate (GFLOP/s).
BFLOAT16_FASTER = {"float32": 198.4, "bfloat16": 402.6}


def pretend_cpu(monkeypatch, flags, rates=BFLOAT16_FASTER):
    monkeypatch.setattr(runtime, "cpu_flags", lambda cpuinfo=None: frozenset(flags.split()))
    monkeypatch.setattr(runtime, "_gpu", lambda: False)
    monkeypatch.setattr(runtime, "_measured_rates", lambda: dict(rates))
