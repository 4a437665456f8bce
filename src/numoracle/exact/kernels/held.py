"""Arrays the exact kernels keep between calls, per thread and slot: one place for the reuse of large buffers.

Large arrays freed at the top of the heap go back to the system and their pages are faulted in again on the next
call's first writes, which costs more than the passes that fill them (the Ozaki split's digit planes, Ozaki II's
residues); reusing the previous call's arrays (of this thread, for this slot) avoids that. The arrays stay held
until the thread ends.
"""

from __future__ import annotations

import threading

import numpy as np

_local = threading.local()


def held(slot: str | None, dtype: type, need: int, limit: int) -> np.ndarray:
    """A flat array of at least ``need`` values of ``dtype`` (the first ``need`` returned): this thread's held one
    for (slot, dtype), grown when too small, or a fresh one where ``slot`` is None or it would take more than
    ``limit`` bytes. Valid until the next call for the same slot and dtype."""
    if slot is None or need * np.dtype(dtype).itemsize > limit:
        return np.empty(need, dtype)
    arrays = _local.__dict__.setdefault("arrays", {})
    buf = arrays.get((slot, dtype))
    if buf is None or buf.size < need:
        buf = arrays[(slot, dtype)] = np.empty(need, dtype)
    return buf[:need]
