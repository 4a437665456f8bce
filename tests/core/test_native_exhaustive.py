"""Exhaustive tier: every one of the 2^32 FP32 codes against the native casts, with ``numoracle.conformance.sweeper``.

Targets (RNE, numoracle's default policy for each destination): ml_dtypes and torch casts to
``bfloat16``, ``float16`` (torch only: ml_dtypes has none of its own), ``float8_e4m3fn`` and
``float8_e5m2``, and numpy's ``astype(float16)``. Every mismatch must be classified (no class
``other``) and covered by a ``KNOWN_DEVIATIONS`` entry of the library. Found when this was
written (ml_dtypes 0.6.0, torch 2.13.0, numpy 2.4): NaNs that keep the source's sign and payload
(every library; torch's float32 -> bfloat16 gives 0xFFFF for every NaN) and torch's saturating
E4M3FN cast; nothing else.

Run::

    pytest -m exhaustive tests/test_native_exhaustive.py

Each sweep runs on ``sweep``'s default spawn-context process pool (workers:
``$NUMORACLE_SWEEP_WORKERS``, default ``os.cpu_count()``). Measured here (2 cores shared with other
work; see ``benches/bench_sweep.py``): about 1 to 2 minutes per (library, destination) for ml_dtypes
and torch; numpy's float16 cast takes a slow path (~65 ns/element) for every value that underflows,
overflows or is subnormal in FP16 (84% of all FP32 codes), so its sweep takes ~4-6 minutes.

The default suite runs the same sweeps on a 2^24 slice made of the regions where the rounding
decisions are: FP16 underflow and overflow, the FP8 overflow thresholds, the infinities and NaNs.
"""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pytest

from numoracle.conformance.sweeper import Converter, sweep
from optional import requires

TARGETS = (("numpy", "fp16"), ("ml_dtypes", "bf16"), ("ml_dtypes", "fp8_e4m3fn"), ("ml_dtypes", "fp8_e5m2"),
           ("torch", "bf16"), ("torch", "fp16"), ("torch", "fp8_e4m3fn"), ("torch", "fp8_e5m2"))


def _workers() -> int:
    return int(os.environ.get("NUMORACLE_SWEEP_WORKERS", 0)) or os.cpu_count() or 1


# 4 regions of 2^20 codes: FP16 underflow (from 2^-25), FP16/E5M2 overflow (around 65520 = 0x477FF000),
# +inf and the first signalling NaNs, and -448 .. -480 (E4M3FN overflow at -464, negative)
SLICE = [range(0x33000000, 0x33100000), range(0x477F7000, 0x478F7000), range(0x7F800000, 0x7F900000),
         range(0xC3E00000, 0xC3F00000)]


@pytest.mark.parametrize("libraries", [("numpy", "ml_dtypes"),
                                       pytest.param(("torch",), marks=[requires("torch"), pytest.mark.slow])],
                         ids="+".join)
def test_sweep_machinery_on_a_slice(libraries):
    targets = [t for t in TARGETS if t[0] in libraries]
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=min(2, _workers()), mp_context=ctx) as pool:
        reports = {t: sweep(t[0], "fp32", t[1], inputs=SLICE, chunk=1 << 20, executor=pool) for t in targets}
    for r in reports.values():
        assert r.compared == 1 << 22 and r.ok, str(r)
    # the slice meets the NaN deviations (so classification runs) and torch's saturation, nothing else
    sat = ("torch", "fp8_e4m3fn")
    if sat in reports:
        assert set(reports[sat].classes) == {"saturation_vs_inf_nan"}  # torch gives +NaN the canonical 0x7F
    assert all(set(r.classes) <= {"nan_payload_or_sign"} for t, r in reports.items() if t != sat)
    for t in (("numpy", "fp16"), ("ml_dtypes", "fp8_e4m3fn"), ("torch", "bf16")):
        if t in reports:
            assert reports[t].classes["nan_payload_or_sign"].count > 0


class Planted:
    """ml_dtypes' bfloat16 cast with one wrong last bit (element 5 of each call), as a double rounding gives."""

    library = "ml_dtypes"

    def __call__(self, x):
        out = np.asarray(Converter("ml_dtypes", "bf16")(x)).view(np.uint16).copy()
        out[5] ^= 1
        return out.view(Converter("ml_dtypes", "bf16")(x[:1]).dtype)


def test_sweep_finds_a_planted_error():
    r = sweep(Planted(), "fp32", "bf16", inputs=range(0x3F800000, 0x3F800100))
    assert r.verdict == "unexplained" and r.unexplained == 1 and r.compared == 256
    (w,) = r.classes["off_by_one_ulp"].witnesses
    assert (w.source, w.fn_code, w.engine_code, w.known) == (0x3F800005, 0x3F81, 0x3F80, "")


@pytest.mark.exhaustive
@pytest.mark.parametrize("library, dst", TARGETS)
def test_all_fp32_codes(library, dst):
    r = sweep(library, "fp32", dst, workers=_workers())
    print(r)
    assert r.compared == 1 << 32 and not r.errors
    assert "other" not in r.classes, str(r)
    assert r.ok, str(r)
