"""The first minute of a GPU run: what runs here, and do the three riskiest paths work at all?

    python scripts/gpu_smoke.py --out smoke.json            # versions, numba.cuda, a cupy bf16 round trip
    python scripts/gpu_smoke.py --gemm --out gemm.json      # one cuda_wgmma_tma GEMM against torch (GPU)

``scripts/gpu-run.sh`` runs the first under a 30 s timeout and the second under ``timeout 60`` in its own process,
in case an mbarrier wait never completes. In cpu mode (``gpu-run.sh --smoke``) the same code runs emulated: the
GEMM step then runs a CUDA C GEMM on the CPU engine instead of the Hopper-only wgmma kernel, and says so.
Each check is recorded as {ok, detail}; the exit status is 1 when any failed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as `python scripts/gpu_smoke.py` from a checkout without an install
    sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

import workbench as wb  # noqa: E402


def facts() -> dict:
    """Return mode, device, versions and the Triton guard."""
    from workbench.versions import device_info, triton_guard, versions

    ok, line = triton_guard()
    return {"mode": wb.mode(), "mode_reason": wb.MODE_REASON, "device": device_info(), "versions": versions(),
            "triton_guard": {"ok": ok, "detail": line}}


def numba_check() -> dict:
    """Return whether numba.cuda sees a GPU (the CUDA simulator in cpu mode)."""
    from workbench.numba_helpers import PROBLEM, cuda

    if PROBLEM:
        return {"ok": False, "detail": PROBLEM}
    avail = bool(cuda.is_available())
    what = "a GPU" if wb.mode() == "gpu" else "the CUDA simulator"
    return {"ok": avail, "detail": f"numba.cuda.is_available() = {avail} ({what})"}


def bf16_round_trip() -> dict:
    """Hand a bf16 tensor to cupy as raw bits (what CUDA C kernels get), copy it there, and bring it back."""
    from workbench.interop import to_raw, to_torch, xp

    t = torch.randn(257, 33, device=wb.device()).to(torch.bfloat16)
    raw = to_raw(t)  # int16 view: no ml_dtypes bfloat16 involved
    copied = xp().array(raw, copy=True)  # a copy made by cupy on the device (numpy in cpu mode)
    back = to_torch(copied).view(torch.bfloat16)
    same = bool(torch.equal(back, t)) and back.data_ptr() != t.data_ptr()
    return {"ok": same, "detail": f"{type(raw).__module__}.{type(raw).__name__} {raw.dtype}, "
                                  f"{t.numel()} values back {'bit-exact' if same else 'CHANGED'}"}


def gemm_check() -> dict:
    """Run one Hopper wgmma + TMA GEMM (a CUDA C GEMM on the CPU engine in cpu mode) and compare with torch."""
    name, shape, dt = ("cuda_wgmma_tma", 1024, torch.bfloat16) if wb.mode() == "gpu" else \
        ("cuda_smem", 64, torch.float32)
    v = wb.variant("gemm", name)
    why = v.why_not_here(dt, {"M": shape, "N": shape, "K": shape})
    if why:
        return {"ok": False, "detail": why}
    a, b = wb.make_inputs("gemm", dtype=dt, M=shape, N=shape, K=shape)
    t0 = time.perf_counter()
    c = v(a, b)
    if wb.mode() == "gpu":
        torch.cuda.synchronize()
    ms = (time.perf_counter() - t0) * 1e3
    ref = torch.matmul(a.float(), b.float())
    err = float((c.float() - ref).abs().max() / ref.abs().max())
    tol = 2e-2 if dt == torch.bfloat16 else 1e-5
    where = "" if wb.mode() == "gpu" else " (cpu mode: the CPU engine; cuda_wgmma_tma is GPU-only)"
    return {"ok": err <= tol, "variant": f"gemm/{name}",
            "detail": f"{name} {shape}^3 {str(dt)[6:]}: max error {err:.2e} of max |c| vs torch (tolerance {tol}), "
                      f"first call {ms:.0f} ms incl. compile{where}"}


def _guarded(fn: Callable[[], dict]) -> dict:
    try:
        return fn()
    except Exception as e:  # noqa: BLE001  (a smoke check reports, it does not stop the others)
        return {"ok": False, "detail": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()[-2000:]}


def main(argv: list[str] | None = None) -> int:
    """Run the smoke checks (or the GEMM alone) and write them as JSON."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--gemm", action="store_true", help="run the one GEMM against torch (its own process)")
    p.add_argument("--out", type=Path, required=True, help="JSON file to write")
    a = p.parse_args(argv)
    out: dict = {"facts": _guarded(facts)}
    checks = {"gemm": gemm_check} if a.gemm else {"numba_cuda": numba_check, "bf16_round_trip": bf16_round_trip}
    for key, fn in checks.items():
        out[key] = _guarded(fn)
        print(f"{key}: {'ok' if out[key]['ok'] else 'FAILED'}: {out[key]['detail']}", flush=True)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(out, indent=1, default=str) + "\n")
    return 0 if all(out[k]["ok"] for k in checks) else 1


if __name__ == "__main__":
    raise SystemExit(main())
