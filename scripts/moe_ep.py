"""Check expert-parallel MoE (kernels/moe/ep.py) on `world` spawned ranks and print who sent what to whom.

    python scripts/moe_ep.py --world 2 --T 64 --d 64 --I 128 --E 8 --top-k 2
    python scripts/moe_ep.py --world 2 --T 9 --E 4 --top-k 1 --case one_expert   # rank 1's experts get nothing

Backend: nccl when `world` GPUs are present, else gloo on the CPU (``--backend`` forces one).
Exit code 0 when the result matches the float64 reference within tolerance, 1 when it does not or a rank fails
or times out.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as `python scripts/moe_ep.py` from a checkout without an install
    sys.path.insert(0, str(ROOT))

from workbench import dtypes  # noqa: E402

EP_DTYPES = ("float32", "float16", "bfloat16")


def dtype(name: str) -> str:
    """Return the canonical name of an EP dtype given by any name ('bf16', 'torch.float16', ...)."""
    return dtypes.canonical(name, among=EP_DTYPES)


def _kib(n: int) -> str:
    return f"{n} B" if n < 1024 else f"{n / 1024:.1f} KiB"


def format_report(r: dict) -> str:
    """Return the check's result as a short text table: one row per rank, then bytes, error and time."""
    world = r["world"]
    lines = [f"moe EP  world={world} backend={r['backend']}  T={r['T']} d={r['d']} I={r['I']} E={r['E']} "
             f"top_k={r['top_k']} {r['dtype']} case={r['case']}",
             "rank  tokens  experts   rows sent to ranks      rows recv from ranks    cross-rank rows"]
    for rank in range(world):
        e0 = rank * r["experts_per_rank"]
        lines.append(f"{rank:>4}  {r['tokens_per_rank'][rank]:>6}  {e0:>3}..{e0 + r['experts_per_rank'] - 1:<3}  "
                     f"{str(r['sent_rows'][rank]):<22}  {str(r['recv_rows'][rank]):<22}  {r['cross_rank_rows'][rank]}")
    b, bx = r["bytes"], r["bytes_cross_rank"]
    lines += [f"bytes per all-to-all (all ranks): counts {_kib(b['counts'])}, dispatch {_kib(b['dispatch'])} "
              f"({_kib(bx['dispatch'])} cross-rank), combine {_kib(b['combine'])} ({_kib(bx['combine'])} cross-rank)",
              f"per token each way: top_k*d*elem_size = {r['bytes_per_token_each_way']} B",
              f"max |err| vs float64 reference {r['max_abs_err']:.3g} (atol {r['tol']['atol']:.3g}, "
              f"rtol {r['tol']['rtol']:.3g}), vs torch_loop {r['max_abs_err_vs_torch_loop']:.3g}",
              f"ep_moe {r['ep_ms']:.2f} ms (slowest rank, best of 3); whole run {r['wall_s']:.1f} s with spawn",
              "OK" if r["ok"] else f"FAILED (the checker's verdict): {r['result']}"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--world", type=int, default=2, help="number of ranks (processes); E must divide by it")
    ap.add_argument("--T", type=int, default=64, help="tokens in total, split over the ranks")
    ap.add_argument("--d", type=int, default=64, help="model (hidden) size")
    ap.add_argument("--I", type=int, default=128, help="expert intermediate size")
    ap.add_argument("--E", type=int, default=8, help="experts in total")
    ap.add_argument("--top-k", "--top_k", dest="top_k", type=int, default=2, help="experts per token")
    ap.add_argument("--dtype", type=dtype, default="float32", help=f"one of {', '.join(EP_DTYPES)} (or bf16, fp16)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--case", default="random", help="make_inputs case: random or one_expert")
    ap.add_argument("--no-renormalize", action="store_true", help="keep the raw softmax weights of the top_k")
    ap.add_argument("--backend", choices=("gloo", "nccl"), default=None, help="default: nccl with enough GPUs")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds before every rank is killed")
    a = ap.parse_args(argv)

    from kernels.moe.ep import run_ep_check

    try:
        r = run_ep_check(world=a.world, T=a.T, d=a.d, I=a.I, E=a.E, top_k=a.top_k, dtype=dtypes.to_torch(a.dtype),
                         seed=a.seed, case=a.case, renormalize=not a.no_renormalize, backend=a.backend,
                         timeout_s=a.timeout)
    except (RuntimeError, TimeoutError, ValueError) as e:
        print(f"moe EP check failed: {e}", file=sys.stderr)
        return 1
    print(format_report(r))
    return 0 if r["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
