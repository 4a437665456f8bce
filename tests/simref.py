"""Slow step-by-step Fraction emulation of the accumulation orders (the reference of test_simulate.py).

Independent of numoracle.models.engine.simulation / accumulate / orders' schedules: every value is an exact
``exact.Value`` (Fraction, or a Special for -0, +-inf, NaN), every step is the exact sum rounded by
``exact.round_value``, and the association of each order is written out as plain recursion from
its documented definition (orders are read only for their parameters).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

import numoracle as no
from numoracle import orders as O
from numoracle.core import scalar as exact
from numoracle.core.formats.format import Format

# ======================================================================================================
# Reference: exact values and one rounded step at a time
# ======================================================================================================

def val(x) -> exact.Value:
    return exact._as_value(float(x))


def rnd(v, fmt, mode, ftz=False):
    return exact.value_of(exact.round_value(v, fmt, rounding=mode, ftz=ftz), fmt)


def is_nan(v):
    return isinstance(v, exact.Special) and v.kind == "nan"


def is_inf(v):
    return isinstance(v, exact.Special) and v.kind == "inf"


def frac(v) -> Fraction:
    return Fraction(0) if isinstance(v, exact.Special) else Fraction(v)


def neg(v) -> bool:
    if isinstance(v, exact.Special):
        return v.negative
    return v < 0


def exact_add(x, y, mode):
    """x + y exactly, with IEEE 754's specials and sign of zero."""
    if is_nan(x) or is_nan(y) or (is_inf(x) and is_inf(y) and x.negative != y.negative):
        return exact.NAN
    if is_inf(x) or is_inf(y):
        return x if is_inf(x) else y
    f = frac(x) + frac(y)
    if f != 0:
        return f
    if frac(x) == 0 and frac(y) == 0:   # two zeros
        negative = (neg(x) or neg(y)) if mode == "rd" else (neg(x) and neg(y))
    else:                               # exact cancellation
        negative = mode == "rd"
    return exact.NEG_ZERO if negative else Fraction(0)


def exact_mul(a, b):
    if is_nan(a) or is_nan(b):
        return exact.NAN
    if is_inf(a) or is_inf(b):
        if frac(a) == 0 and not is_inf(a) or frac(b) == 0 and not is_inf(b):
            return exact.NAN
        return exact.NEG_INF if neg(a) != neg(b) else exact.POS_INF
    f = frac(a) * frac(b)
    if f == 0:
        return exact.NEG_ZERO if neg(a) != neg(b) else Fraction(0)
    return f


class Ctx:
    """The arithmetic of one reference run: acc format, mode, fma, ftz."""

    def __init__(self, acc, mode="rne", fma=True, ftz=False):
        self.acc, self.mode, self.fma, self.ftz = acc, mode, fma, ftz

    def term(self, t, fmt=None):
        return t if self.fma else rnd(t, fmt or self.acc, self.mode, self.ftz)

    def add(self, x, y, fmt=None, mode=None):
        mode = mode or self.mode
        return rnd(exact_add(x, y, mode), fmt or self.acc, mode, self.ftz)


def ref_sequential(ts, c: Ctx, fmt=None):
    s = Fraction(0)
    for t in ts:
        s = c.add(s, c.term(t, fmt), fmt)
    return s


def ref_pairwise_node(ts, c: Ctx, fmt=None):
    """A subtree: a single term stays a term; else fl(left + right), left = first ceil(n/2)."""
    if len(ts) == 1:
        return c.term(ts[0], fmt)
    left = (len(ts) + 1) // 2
    return c.add(ref_pairwise_node(ts[:left], c, fmt), ref_pairwise_node(ts[left:], c, fmt), fmt)


def ref_pairwise(ts, c: Ctx, fmt=None):
    if len(ts) == 1:
        return rnd(c.term(ts[0], fmt), fmt or c.acc, c.mode, c.ftz)
    return ref_pairwise_node(ts, c, fmt)


def ref_order(order, ts, c: Ctx, fmt=None):
    if isinstance(order, O.Sequential):
        return ref_sequential(ts, c, fmt)
    if isinstance(order, O.Pairwise):
        return ref_pairwise(ts, c, fmt)
    if isinstance(order, O.Blocked):
        parts = [ref_order(order.inner, ts[i:i + order.b], c, fmt) for i in range(0, len(ts), order.b)]
        return ref_order(order.outer, parts, Ctx(c.acc, c.mode, True, c.ftz), order.outer_acc or fmt)
    if isinstance(order, O.SplitK):
        n, s = len(ts), order.s
        parts = [ref_order(order.inner, ts[j * n // s:(j + 1) * n // s], c, fmt) if (j + 1) * n // s > j * n // s
                 else Fraction(0) for j in range(s)]
        perm = order.permutation or range(s)
        return ref_order(order.combine, [parts[i] for i in perm], Ctx(c.acc, c.mode, True, c.ftz),
                         order.combine_acc or fmt)
    raise AssertionError(order)


# ---- BlockFMA, following Khattak & Mikaitis' Generic_BFMA_TC step list literally ----------------------

def floor_log2(f: Fraction) -> int:
    e = 0
    f = abs(f)
    while f >= 2:
        f /= 2
        e += 1
    while f < 1:
        f *= 2
        e -= 1
    return e


def ref_bfma(c, prods, o: O.BlockFMA, acc: Format):
    """prods: (a, b, fmt_a, fmt_b) of exact values (sum op: b = 1 in a format whose emin is 0)."""
    out_fmt = acc if o.out_frac_bits is None else Format("ref_out", acc.exp_bits, o.out_frac_bits, acc.bias)
    vals = [exact_mul(a, b) for a, b, _, _ in prods]
    if any(isinstance(v, exact.Special) and v.kind != "zero" for v in vals + [c]):
        s = c
        for v in vals:
            s = exact_add(s, v, "rne")
        return s
    items = []   # (value, raw label, label)
    for (a, b, fa, fb), t in zip(prods, vals):
        if frac(t) == 0:
            continue                                           # zero products are dropped
        ea = max(floor_log2(frac(a)), fa.emin)
        eb = max(floor_log2(frac(b)), fb.emin)
        raw = ea + eb
        sig = abs(frac(t)) / Fraction(2) ** raw
        items.append((frac(t), raw, raw + (1 if sig >= 2 else 0)))
    cf = frac(c)
    exp_c = max(floor_log2(cf), -126) if cf != 0 else None
    spc = False
    if items and o.carry_bit:
        max_raw = max(r for _, r, _ in items)
        max_sig = max(abs(t) / Fraction(2) ** r for t, r, _ in items if r == max_raw)
        spc = (exp_c is None or max_raw >= exp_c) and max_sig >= 2
    labels = [lab for _, _, lab in items] + ([exp_c] if exp_c is not None else [])
    if not labels:
        return Fraction(0)
    E = max(labels)
    F = o.frac_bits + (1 if spc else 0)
    q = Fraction(2) ** (E - F)
    S = Fraction(0)
    for t in [t for t, _, _ in items] + ([cf] if cf != 0 else []):
        k = abs(t) / q
        aligned = (k.numerator // k.denominator)
        if not o.truncate:      # a sticky bit one place below the window
            aligned = 2 * aligned + (1 if k != int(k) else 0)
        S += -aligned if t < 0 else aligned
    if S == 0:
        return Fraction(0)
    v = S * q / (1 if o.truncate else 2)
    if out_fmt.has_inf and abs(v) >= Fraction(2) ** (out_fmt.emax + 1):
        return exact.NEG_INF if v < 0 else exact.POS_INF
    return rnd(v, out_fmt, o.out_rounding)


def ref_bfma_chain(prods, o: O.BlockFMA, acc):
    d = Fraction(0)
    for i in range(0, len(prods), o.n):
        d = ref_bfma(d, prods[i:i + o.n], o, acc)
    return d


# ---- whole operations ------------------------------------------------------------------------------

def terms_of(op, inputs):
    """Per output (flattened): a list of (a, b, fmt_a, fmt_b) exact pairs."""
    fmts = [no.formats.format_of(x.dtype) for x in inputs]
    vals = [np.vectorize(val, otypes=[object])(np.asarray(x, np.float64)) for x in inputs]
    if op == "sum":
        x = vals[0].reshape(-1, vals[0].shape[-1])
        one = Format("ref_one0", 8, 3, 1)  # emin 0: label(1) = 0, so a term's label is its own
        return [[(v, Fraction(1), fmts[0], one) for v in row] for row in x]
    a, b = vals
    if op == "dot":
        return [[(a[k], b[k], fmts[0], fmts[1]) for k in range(a.size)]]
    return [[(a[i, k], b[k, j], fmts[0], fmts[1]) for k in range(a.shape[1])]
            for i in range(a.shape[0]) for j in range(b.shape[1])]


def reference(op, inputs, order, acc, mode="rne", fma=True, ftz=False):
    out = []
    for prods in terms_of(op, inputs):
        if isinstance(order, O.BlockFMA):
            out.append(ref_bfma_chain(prods, order, order.acc or acc))
            continue
        if isinstance(order, O.Promoted):
            inner = order.inner
            parts = [ref_bfma_chain(prods[i:i + order.every], inner, inner.acc or acc)
                     for i in range(0, len(prods), order.every)]
            out.append(ref_sequential(parts, Ctx(order.outer_acc, mode, True, ftz)))
            continue
        ts = [exact_mul(a, b) for a, b, _, _ in prods]
        out.append(ref_order(order, ts, Ctx(acc, mode, fma, ftz)))
    return out


def result_fmt(order, acc):
    """The format of an order's result: its last reduction's accumulator."""
    if isinstance(order, O.Blocked) and order.outer_acc is not None:
        return order.outer_acc
    if isinstance(order, O.SplitK) and order.combine_acc is not None:
        return order.combine_acc
    if isinstance(order, O.Promoted):
        return order.outer_acc
    return order.acc or acc


def codes_of(values, fmt):
    return [exact.round_value(v, fmt) for v in values]


def assert_same(got_codes, ref_values, fmt):
    """Compare bit patterns; NaN compares by class (any NaN code)."""
    got = [int(c) for c in np.asarray(got_codes).ravel()]
    ref = codes_of(ref_values, fmt)
    for i, (g, r) in enumerate(zip(got, ref)):
        if is_nan(exact.value_of(r, fmt)):
            assert is_nan(exact.value_of(g, fmt)), (i, hex(g), "expected NaN")
        else:
            assert g == r, (i, hex(g), hex(r), exact.value_of(g, fmt), exact.value_of(r, fmt))


# ======================================================================================================
# Test data
# ======================================================================================================

def cut_fields(x, bits: int) -> np.ndarray:
    """float32 values of x with the low ``bits`` bits of every fraction field cleared (truncation: TF32 at 13, BF16
    at 16): data whose values have at most 24 - bits significant bits."""
    return (np.asarray(x).astype(np.float32).view(np.uint32) & np.uint32(~((1 << bits) - 1) & 0xFFFFFFFF)).view(
        np.float32)


def same_with_and_without(kernels, op, inputs, **kw) -> int:
    """simulate with the compiled kernels and without (the numpy reference): both results' bits equal. Returns how
    many steps ``kernels`` (a kernel module: its ``calls``) ran.

    NaN results compare by class: IEEE 754 leaves the sign of inf - inf open, and it differs between numpy 1.24's
    float32 loop (+NaN) and numpy 2's or the kernels' (x86's default -NaN); every other bit must match."""
    from numoracle.core import jit

    before = kernels.calls.count
    got = no.simulate(op, *inputs, **kw)
    ran = kernels.calls.count - before
    with jit.disabled():
        want = no.simulate(op, *inputs, **kw)
    assert kernels.calls.count - before == ran
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    nan = np.isnan(got)
    np.testing.assert_array_equal(nan, np.isnan(want), err_msg=f"{op} {kw}: NaN positions")
    np.testing.assert_array_equal(np.where(nan, 0.0, got).view(np.uint64), np.where(nan, 0.0, want).view(np.uint64),
                                  err_msg=f"{op} {kw}")
    return ran
