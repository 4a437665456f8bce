"""conformance/versions.py: the CPU condition of a recorded deviation (cpu_flags, cpu_matches)."""

from __future__ import annotations

from numoracle.conformance import versions
from numoracle.conformance.deviations import Deviation, deviations_for


def test_cpu_condition_reads_the_flags(monkeypatch):
    monkeypatch.setattr(versions, "cpu_flags", lambda: frozenset({"f16c", "avx512f"}))
    assert versions.cpu_matches("") and versions.cpu_matches("without avx512_fp16")
    assert not versions.cpu_matches("without f16c")
    monkeypatch.setattr(versions, "cpu_flags", lambda: None)       # unreadable: the record applies
    assert versions.cpu_matches("without f16c")


def test_a_record_applies_only_on_the_cpus_it_names(monkeypatch):
    d = next(d for d in deviations_for("jax", "fp64", "fp16", version="any") if d.cpu)
    assert isinstance(d, Deviation) and d.cpu == "without avx512_fp16"
    monkeypatch.setattr(versions, "cpu_flags", lambda: frozenset({"avx512f", "avx512_fp16"}))
    assert not d.on_this_cpu() and d not in deviations_for("jax", "fp64", "fp16", version="0.10.2")
    monkeypatch.setattr(versions, "cpu_flags", lambda: frozenset({"avx512f", "f16c"}))
    assert d.on_this_cpu() and d in deviations_for("jax", "fp64", "fp16", version="0.10.2")
