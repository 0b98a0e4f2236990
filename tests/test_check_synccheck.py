"""wb.check names a divergent warp collective (synccheck) as its diagnosis, not a bare error."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

import workbench as wb
from workbench.checker import DIAGNOSES, RUN_DIAGNOSES
from workbench.interop import to_raw

CU = Path(__file__).parent / "cuda" / "sync_softmax_lane_exit.cu"


def test_lanes_that_exit_before_a_full_mask_shuffle_are_diagnosed():
    from workbench import cuda

    kernel = cuda.RawKernel(CU, "softmax_lane_exit")

    def softmax(x: torch.Tensor) -> torch.Tensor:
        m, n = x.shape
        y = wb.empty_like(x)
        if y.numel():
            kernel((m,), (32,), (to_raw(x), to_raw(y), np.int32(m), np.int32(n)))
        return y

    r = wb.check(softmax, op="softmax", shapes=[{"M": 3, "N": 64}, {"M": 2, "N": 5}], dtypes=["float32"],
                 seeds=(0,), probes=False)
    assert not r.ok
    assert r.diagnosis == "divergent_barrier", r.summary()
    assert "synccheck" in DIAGNOSES["divergent_barrier"] and "divergent_barrier" in RUN_DIAGNOSES
    ok = [c for c in r.cases if c.ok]
    assert ok, "rows of 64 elements keep every lane: those runs are right"
