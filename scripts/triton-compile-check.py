"""Compile every registered Triton kernel for sm_90 (and sm_80 unless it needs Hopper) with the Triton installed.

    python scripts/triton-compile-check.py          # exit 1 if any kernel fails to compile

Each Triton variant's ``inspect_spec`` (one launch configuration of its kernel) goes through ``triton.compile``
for sm_90 via ``workbench.inspect``, which also tries sm_80 for the occupancy table; no GPU is needed. This is how
the Triton versions in ``workbench.versions.VERIFIED_TRITON`` were verified (README, "Versions"): run it in an
environment with the Triton to check, e.g. a venv with ``triton==3.6.0`` (the GPU image's) beside this project's
other pins. Autotuned kernels compile their other configs only when tuned on a GPU; a config that fails there is
skipped by the autotuner.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import workbench as wb  # noqa: E402  (before triton, imported in main: it sets TRITON_INTERPRET for cpu mode)
from workbench.inspection import inspect  # noqa: E402


def main() -> int:
    """Compile each Triton variant's kernel and print one line per variant; return 1 on any failure."""
    import triton

    failed = 0
    for op in wb.ops():
        for v in wb.variants(op, include_wrong=True, backend="triton"):
            if v.inspect_spec is None:
                continue
            t0 = time.time()
            try:
                r = inspect(v, arch="sm_90")
            except Exception as e:  # noqa: BLE001  (report every kernel, then fail)
                failed += 1
                print(f"FAIL {op}/{v.name}: {type(e).__name__}: {str(e)[:300]}", flush=True)
                continue
            sm80 = next((n for n in r.notes if "could not compile for sm_80" in n), "")
            print(f"ok   {op}/{v.name}: sm_90 {r.registers} regs, {r.shared_static} B shared, "
                  f"{r.spill_stores} B spilled ({time.time() - t0:.0f} s)"
                  + (f"; sm_80: {sm80.split('(')[0].strip()} (needs sm_89+)" if sm80 else "; sm_80 ok"), flush=True)
    print(f"triton {triton.__version__}: {'all compiled' if not failed else f'{failed} failed'}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
