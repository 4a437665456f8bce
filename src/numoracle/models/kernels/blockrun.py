"""Compiled block FMA over whole runs of chained blocks: simulate's BlockFMA steps k, k+1, ... as one call.

A BlockFMA order chains its blocks over K: block s + 1 takes block s's output as its c, and nothing
else reads it (the steps share one value slot: the program's ``BlockRun``). ``run_kernel`` computes such a run
for every output in one call, the per-output accumulator held in a small buffer across all blocks
of the run, so that c is neither fetched nor stored between blocks. Each block's arithmetic is
jitblock's (its steps 1-6, the same functions, rounding by core/kernels/rounding.py's step, overflow included),
so the bits are those of ``accumulate.block_fma``; where the inputs are finite, step 1 takes both maxima from
one maximum of key products (jitblock.keys_of: one multiply and one maximum a term, no labels), and a
truncating block sums in int32 (``_pass2_int``). Truncating blocks with an FP32 output rounded toward zero take
steps 2 and 4-5 in 32-bit words where jitblock32's route holds (``words_kernel``), c held as float32.
"""

from __future__ import annotations

import numpy as np

from ...core import jit
from ...core.formats.format import FP32
from ...core.formats.policy import Overflow
from ...core.kernels import rounding as jr
from ..engine.steps import BlockRun
from . import block as jitblock
from . import block32 as jitblock32
from .block import block_others, block_pass1, block_pass2, block_scales, key_of

__all__ = ["covers", "run", "calls", "run_kernel", "words_kernel"]

calls = jitblock.calls   # one counter for the block FMA steps the kernels run, one call or many

_JT = 256         # outputs j per tile
_ROWS = 32        # rows i per tile
_TILE = _JT * _ROWS


@jit.njit
def _join_round(S, cur, scale, inv, vbuf, vb, nxtb, sticky, mode, g):
    """Steps 4-5 for a tile: v = (S + trunc(c * scale)) / scale into vbuf, its normal-range rounding into
    nxt (bits); returns how many v lie outside the normal range."""
    jr.wide_vectors()
    for j in range(vbuf.size):
        yc = cur[j] * scale[j]
        tc = np.trunc(yc)
        vbuf[j] = (np.float64(S[j]) + (tc + tc + np.sign(yc - tc) if sticky else tc)) * inv[j]
    odd = 0
    for j in range(vbuf.size):
        bits = vb[j]
        odd += jr.outside(bits, g) > g.span
        nxtb[j] = jr.round_bits(bits, mode, g)
    return odd


@jit.njit(inline="always")
def _kmax4(a0, a1, a2, a3, b0, b1, b2, b3, j):
    """The largest of four key products for output j, in registers."""
    x, y = a0 * b0[j], a1 * b1[j]
    x = x if x > y else y
    y, z = a2 * b2[j], a3 * b3[j]
    y = y if y > z else z
    return x if x > y else y


@jit.njit
def _keys1(a, kb, g0, nr, ks, t0, t1, kmax, kw, ea, shift, field, bias):
    """Step 1 for output rows g0..g0+nr-1, outputs t0..t1-1, by keys (jitblock.keys_of: finite inputs): kmax (the
    rows one after another) = the largest key product over the block's terms ks, whose exponent carries both
    maxima. A's keys are made here (jitblock.key_of with A's fields ea, shift, field, bias), four at a time into
    kw (kb's type); four terms meet in registers before each write, the first four set it (keys are >= 0)."""
    jr.wide_vectors()
    n = t1 - t0
    q4 = ks.size - ks.size % 4
    for q in range(nr):
        i, km = g0 + q, kmax[q * n:(q + 1) * n]
        if q4 == 0:
            for j in range(n):
                km[j] = 0.0
        for kk in range(0, q4, 4):
            k0, k1, k2, k3 = ks[kk], ks[kk + 1], ks[kk + 2], ks[kk + 3]
            for r in range(4):                # A's keys of the four terms, in kb's type
                kw[r] = key_of(a[i, ks[kk + r]], ea, shift, field, bias)[0]
            a0, a1, a2, a3 = kw[0], kw[1], kw[2], kw[3]
            b0, b1, b2, b3 = kb[k0, t0:t1], kb[k1, t0:t1], kb[k2, t0:t1], kb[k3, t0:t1]
            if kk == 0:
                for j in range(n):
                    km[j] = _kmax4(a0, a1, a2, a3, b0, b1, b2, b3, j)
            else:
                for j in range(n):
                    x = _kmax4(a0, a1, a2, a3, b0, b1, b2, b3, j)
                    km[j] = x if x > km[j] else km[j]
        for kk in range(q4, ks.size):
            k = ks[kk]
            kw[0] = key_of(a[i, k], ea, shift, field, bias)[0]
            ak, bk = kw[0], kb[k, t0:t1]
            for j in range(n):
                m = ak * bk[j]
                km[j] = m if m > km[j] else km[j]


@jit.njit
def _pass2_int(a, b, g0, nr, ks, t0, t1, scw, S):
    """Step 3 of a truncating block with int32 sums for rows g0..g0+nr-1 (``run``'s choice: every |trunc(Y)| <
    2^(F + 2) and n 2^(F + 2) <= 2^31, so the sums are exact in any order; all inputs finite): S = the sum of
    trunc(t * scale), the truncation and the conversion one instruction (float to int conversion rounds toward
    zero); four terms meet in registers before each read and write of S."""
    jr.wide_vectors()
    n = t1 - t0
    q4 = ks.size - ks.size % 4
    for q in range(nr):
        i, Sq, sw = g0 + q, S[q * n:(q + 1) * n], scw[q * n:(q + 1) * n]
        if q4 == 0:
            for j in range(n):
                Sq[j] = 0
        for kk in range(0, q4, 4):            # (the first four terms set S)
            k0, k1, k2, k3 = ks[kk], ks[kk + 1], ks[kk + 2], ks[kk + 3]
            a0, a1, a2, a3 = a[i, k0], a[i, k1], a[i, k2], a[i, k3]
            b0, b1, b2, b3 = b[k0, t0:t1], b[k1, t0:t1], b[k2, t0:t1], b[k3, t0:t1]
            for j in range(n):
                sc = sw[j]
                s4 = (np.int32(a0 * b0[j] * sc) + np.int32(a1 * b1[j] * sc)) + (np.int32(a2 * b2[j] * sc)
                                                                               + np.int32(a3 * b3[j] * sc))
                Sq[j] = s4 if kk == 0 else Sq[j] + s4
        for kk in range(q4, ks.size):
            k = ks[kk]
            ak, bk = a[i, k], b[k, t0:t1]
            for j in range(n):
                Sq[j] += np.int32(ak * bk[j] * sw[j])


@jit.njit
def _tile_io(flat, tile, base, nj, nr, nt, load):
    """A tile's accumulators from the flat outputs (``load``: tile[q * nt + j] = flat[base + q * nj + j], converted
    to the tile's type) or back to them (float64: exact for the FP32 values a float32 tile holds)."""
    for q in range(nr):
        o = base + q * nj
        for j in range(nt):
            if load:
                tile[q * nt + j] = flat[o + j]
            else:
                flat[o + j] = tile[q * nt + j]


@jit.njit
def _tiles(i0, i1, j0, j1, w):
    """The tiles of a run, in the order the kernels take them: (t0, t1, r, g0, nr, base) a row, _JT outputs j from
    t0 to t1 by _ROWS rows i from g0 (nr of them), for each of the w rows of c; base: the tile's first output in
    c and out (o = r * B + (i - i0) * nj + (j - j0))."""
    nt = -(-(j1 - j0) // _JT)
    ng = -(-(i1 - i0) // _ROWS)
    out = np.empty((nt * w * ng, 6), np.int64)
    nj = j1 - j0
    k = 0
    for t0 in range(j0, j1, _JT):
        for r in range(w):
            for g0 in range(i0, i1, _ROWS):
                out[k, 0], out[k, 1], out[k, 2] = t0, min(t0 + _JT, j1), r
                out[k, 3], out[k, 4] = g0, min(g0 + _ROWS, i1) - g0
                out[k, 5] = r * (i1 - i0) * nj + (g0 - i0) * nj + t0 - j0
                k += 1
    return out


@jit.njit
def run_kernel(a, la, b, lb, kb, kf, i0, i1, j0, j1, tids, cnt, c, out, S, Si, frac, sticky, carry, sub_inputs,
               finite, clamp, mode, g, lim):
    """A run of chained blocks: for every row r of the step width and output (i, j), c = c[o] and then
    c = BFMA(c; a[i, k] * b[k, j] for k in tids[s, r, :cnt[s]]) for s = 0, 1, ...; out[o] = the last c,
    o = r * B + (i - i0) * nj + (j - j0) as jitblock._block_kernel, rounded by (mode, g, lim).
    la, lb: the raw labels as float32, or empty where kb, jitblock.keys_of's keys of B, is given (with kf, A's
    jitblock.key_fields: step 1 by one maximum a term, ``_keys1``, else by ``block_pass1``); S: the block sums'
    buffer (>= _TILE), float32 where simulate's _block32 holds; Si: empty, or an int32 buffer (>= _TILE) that
    step 3 sums in (``_pass2_int``).

    Tiles: _JT outputs j by _ROWS rows i, every block of the run for the whole tile before the next one,
    so that a block's rows of b (and lb) are read from memory once per tile, not once per row. The tile's
    outputs lie one row after another in its buffers (two for the accumulators: c and the block's output),
    so that steps 2, 4-6 are one loop over the whole tile and the term passes one call a tile."""
    jr.wide_vectors()
    keyed = kb.size > 0
    kw = np.empty(4, kb.dtype)
    steps, w = tids.shape[0], tids.shape[1]
    nj = j1 - j0
    amax_f, scw_f, lmax_f = np.empty(_TILE, b.dtype), np.empty(_TILE, b.dtype), np.empty(_TILE, np.float32)
    fsum_f, scale_f, inv_f, vbuf_f = np.empty(_TILE), np.empty(_TILE), np.empty(_TILE), np.empty(_TILE)
    acc = np.empty((2, _TILE))
    fsum_f[:] = -0.0                         # (block_others reads it; the keys route, finite inputs, leaves it so)
    tiles = _tiles(i0, i1, j0, j1, w)
    for k in range(tiles.shape[0]):
        t0, t1, r, g0, nr, base = tiles[k, 0], tiles[k, 1], tiles[k, 2], tiles[k, 3], tiles[k, 4], tiles[k, 5]
        nt = t1 - t0
        m = nr * nt                   # the tile's outputs: row q's at q * nt ... (q + 1) * nt - 1
        amax, scw, fsum, scale, inv = amax_f[:m], scw_f[:m], fsum_f[:m], scale_f[:m], inv_f[:m]
        vbuf, lmax, Sb, Sib = vbuf_f[:m], lmax_f[:m], S[:m], Si[:m]
        scale_b, inv_b, vb = scale.view(np.int64), inv.view(np.int64), vbuf.view(np.uint64)
        _tile_io(c, acc[0], base, nj, nr, nt, True)
        for s in range(steps):
            ks = tids[s, r, :cnt[s]]
            par = s & 1
            cur, nxt = acc[par, :m], acc[1 - par, :m]
            if keyed:
                _keys1(a, kb, g0, nr, ks, t0, t1, amax, kw, *kf)
            else:
                for q in range(nr):
                    rq = slice(q * nt, (q + 1) * nt)
                    block_pass1(a, la, b, lb, g0 + q, ks, t0, t1, amax[rq], lmax[rq], fsum[rq], finite)
            block_scales(amax, lmax, cur.view(np.int64), 0, scale_b, inv_b, scw, clamp, frac, sticky,
                         carry, sub_inputs, keyed)
            if Si.size:
                _pass2_int(a, b, g0, nr, ks, t0, t1, scw, Sib)
                odd = _join_round(Sib, cur, scale, inv, vbuf, vb, nxt.view(np.uint64), sticky, mode, g)
            else:
                for q in range(nr):
                    rq = slice(q * nt, (q + 1) * nt)
                    block_pass2(a, b, g0 + q, ks, t0, t1, scw[rq], Sb[rq], sticky)
                odd = _join_round(Sb, cur, scale, inv, vbuf, vb, nxt.view(np.uint64), sticky, mode, g)
            if odd or not finite:
                block_others(nxt, cur, fsum, vbuf, vb, 0, finite, mode, g, lim)
        _tile_io(out, acc[steps & 1], base, nj, nr, nt, False)


@jit.njit
def _words_fallback(amax, cur32, nxt32, cur, nxt, fsum, scale, inv, vbuf, scw, Si, frac, carry, clamp, mode, g, lim):
    """A tile step that jitblock32.join left undecided, on the float64 route (keys, no sticky bit, finite inputs):
    steps 2, 4-6 from the same key maxima and int32 sums (step 2 writes the same scw), nxt32 = its outputs
    (FP32 values or infinities: exact as float32)."""
    for j in range(cur32.size):
        cur[j] = np.float64(cur32[j])
    scale_b, inv_b, vb = scale.view(np.int64), inv.view(np.int64), vbuf.view(np.uint64)
    block_scales(amax, amax, cur.view(np.int64), 0, scale_b, inv_b, scw, clamp, frac, 0, carry, False, True)
    if _join_round(Si, cur, scale, inv, vbuf, vb, nxt.view(np.uint64), 0, mode, g):
        block_others(nxt, cur, fsum, vbuf, vb, 0, True, mode, g, lim)
    for j in range(cur32.size):
        nxt32[j] = np.float32(nxt[j])


@jit.njit
def words_kernel(a, b, kb, kf, i0, i1, j0, j1, tids, cnt, c, out, frac, carry, clamp, mode, g, lim):
    """``run_kernel`` on jitblock32's route (module docstring there): step 1 by keys (kb, kf), step 3 in int32,
    steps 2 and 4-5 in 32-bit words, c held as float32 (every c an FP32 value); a tile step with outputs
    jitblock32.join leaves undecided is redone on the float64 route (``_words_fallback``)."""
    jr.wide_vectors()
    kw = np.empty(4, kb.dtype)
    steps, w = tids.shape[0], tids.shape[1]
    nj = j1 - j0
    amax_f, scw_f = np.empty(_TILE, b.dtype), np.empty(_TILE, b.dtype)
    sh_f, Si_f = np.empty(_TILE, np.uint32), np.empty(_TILE, np.int32)
    fsum_f, scale_f, inv_f, vbuf_f = np.empty(_TILE), np.empty(_TILE), np.empty(_TILE), np.empty(_TILE)
    cur_f, nxt_f = np.empty(_TILE), np.empty(_TILE)
    acc = np.empty((2, _TILE), np.float32)
    fsum_f[:] = -0.0                          # (block_others reads it: finite inputs leave it so)
    frac_w, carry_w = np.uint32(frac), np.uint32(carry)
    tiles = _tiles(i0, i1, j0, j1, w)
    for k in range(tiles.shape[0]):
        t0, t1, r, g0, nr, base = tiles[k, 0], tiles[k, 1], tiles[k, 2], tiles[k, 3], tiles[k, 4], tiles[k, 5]
        nt = t1 - t0
        m = nr * nt
        amax, scw, sh, Sib = amax_f[:m], scw_f[:m], sh_f[:m], Si_f[:m]
        _tile_io(c, acc[0], base, nj, nr, nt, True)
        for s in range(steps):
            ks = tids[s, r, :cnt[s]]
            par = s & 1
            cur, nxt = acc[par, :m], acc[1 - par, :m]
            _keys1(a, kb, g0, nr, ks, t0, t1, amax, kw, *kf)
            jitblock32.scales(amax, cur, sh, scw, frac_w, carry_w)
            _pass2_int(a, b, g0, nr, ks, t0, t1, scw, Sib)
            if jitblock32.join(Sib.view(np.uint32), cur, sh, nxt):
                _words_fallback(amax, cur, nxt, cur_f[:m], nxt_f[:m], fsum_f[:m], scale_f[:m], inv_f[:m],
                                vbuf_f[:m], scw, Sib, frac, carry, clamp, mode, g, lim)
        _tile_io(out, acc[steps & 1], base, nj, nr, nt, False)


def covers(step: BlockRun) -> bool:
    """Does one kernel call run this BlockRun? When jitblock runs each of its steps: asked once per distinct
    (order, arithmetic, terms, range) among them (a run's steps share those objects: V100's 1024 steps ask once)."""
    distinct = {(id(s.order), id(s.ar), s.tids.shape[1], id(s.info)): s for s in step.steps}
    return all(jitblock.covers(s) for s in distinct.values())


def _term_ids(step: BlockRun, ctx) -> tuple[np.ndarray, np.ndarray]:
    """(tids (steps, w, nmax), cnt (steps,)): each step's term ids, padded, and their counts; made once per
    simulate call (the same for every chunk of the batch)."""
    memo = ctx.kernels.setdefault("jitblockrun", {})
    if id(step) not in memo:
        steps = step.steps
        cnt = np.array([st.tids.shape[1] for st in steps], np.int64)
        w, nmax = steps[0].c.width, int(cnt.max())                        # (w: the rows of c, as run fetches)
        if (cnt == nmax).all() and all(st.tids.shape[0] == w for st in steps):
            tids = np.stack([st.tids for st in steps]).astype(np.int64, copy=False)   # (one copy)
        else:
            tids = np.zeros((len(steps), w, nmax), np.int64)
            for s, st in enumerate(steps):
                tids[s, :, :cnt[s]] = st.tids
        memo[id(step)] = (step, tids, cnt)    # (the step kept: its id stays its own for the call)
    return memo[id(step)][1:]


def run(step: BlockRun, V, sub, ctx) -> np.ndarray:
    """The last step's outputs (rows, batch) of the run, computed in one kernel call (numpysteps.run_block_run)."""
    kin = jitblock.Inputs.of(ctx)
    steps = step.steps
    st0 = steps[0]
    bo, b32 = st0.order, st0.b32
    c = np.ascontiguousarray(st0.c.fetch(V, sub, None), np.float64)
    w, B = c.shape
    tids, cnt = _term_ids(step, ctx)
    nmax = tids.shape[2]
    i0, i1, j0, j1 = kin.bounds(sub)
    f32 = b32 or jitblock.terms32(st0)
    a, b = kin.ab(f32)
    out = np.empty(w * B)
    # int32 block sums: a truncating block of finite inputs whose n terms |trunc(Y)| < 2^(F + 2) sum below 2^31
    ints = bo.truncate and kin.finite and nmax << (bo.frac_bits + 2) <= 1 << 31
    keys = kin.keys(f32)
    mode, g, lim = kin.rounding(st0.ar)
    F, clamp = int(bo.frac_bits), 2.0**127 if f32 else np.inf
    if keys is not None and ints and _words_route(st0.ar, mode, F, nmax, c):
        kb, kf = keys
        words_kernel(a, b, kb, tuple(np.int32(f) for f in kf), i0, i1, j0, j1, tids, cnt, c.reshape(-1), out, F,
                     int(bool(bo.carry_bit)), clamp, mode, g, lim)
    else:
        if keys is None:                      # the label route: no keys
            kb, kf, la, lb = np.empty((0, 0), a.dtype), (0, 0, 0, 0), kin.laf, kin.lbf
        else:                                 # the keys route reads no labels
            (kb, kf), la, lb = keys, np.empty((0, 0), np.float32), np.empty((0, 0), np.float32)
        S = np.empty(_TILE, np.float32 if b32 else np.float64)
        Si = np.empty(_TILE if ints else 0, np.int32)
        run_kernel(a, la, b, lb, kb, tuple(np.int32(f) for f in kf), i0, i1, j0, j1, tids, cnt, c.reshape(-1), out,
                   S, Si, F, int(not bo.truncate), bool(bo.carry_bit), kin.sub_inputs, kin.finite, clamp, mode, g, lim)
    calls.add(len(steps))
    return out.reshape(w, B)


def _words_route(ar, mode: int, F: int, n: int, c: np.ndarray) -> bool:
    """jitblock32's route, besides the keys and the int32 sums (which imply finite inputs and no sticky bit): an
    FP32 output in RTZ under IEEE overflow, F <= 25, (n + 1) 2^(F + 2) <= 2^31 and every c an FP32 value."""
    return (ar.fmt == FP32 and mode == jit.RTZ and ar.pol.overflow is Overflow.IEEE
            and F <= 25 and (n + 1) << (F + 2) <= 1 << 31 and bool(np.array_equal(c, c.astype(np.float32))))
