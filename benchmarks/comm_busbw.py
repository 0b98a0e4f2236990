"""Measure busbw of the collectives' variants with NCCL, one process per GPU, nccl-tests style.

On a machine with 2 or more GPUs::

    torchrun --nproc-per-node=8 benchmarks/comm_busbw.py --op all_reduce --sizes 1M,16M,256M

Each rank binds its GPU and joins an NCCL group; for each variant and message size it warms up, then times
``--iters`` calls between barriers with CUDA events; the time of a size is the slowest rank's median. algbw = S / t
and busbw = algbw * 2(n-1)/n for all-reduce, (n-1)/n for reduce-scatter, all-gather and all-to-all (nccl-tests'
definitions, from workbench.comm_model). Rank 0 prints one row per (variant, size) with busbw as a fraction of the
link's per-direction bandwidth (workbench.hardware.LINKS, NVLink 4 by default): nccl-tests reports busbw so it can be
held against that number, and a good all-reduce at large sizes gets most of it; small messages are latency-bound.

With fewer than 2 GPUs it measures nothing and says so (exit code 2): one GPU has no peer to talk to. ``--cpu``
times the same variants on this machine's rank pool over gloo instead, labelled as such (workbench.comm_time).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

OPS = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all")


def parse_size(text: str) -> int:
    """Return bytes from '4096', '64K', '16M' or '1G' (powers of 1024)."""
    text = text.strip().upper()
    mult = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1:], 1)
    return int(float(text[:-1] if mult > 1 else text) * mult)


def args_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--op", choices=OPS, default="all_reduce")
    p.add_argument("--variants", default="", help="comma-separated variant names (default: every correct one)")
    p.add_argument("--sizes", default="64K,1M,16M,256M", help="message sizes S in bytes (K, M, G suffixes)")
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--link", default="nvlink4", help="link of workbench.hardware.LINKS to compare busbw with")
    p.add_argument("--cpu", action="store_true", help="time on this machine's gloo rank pool instead (4 ranks)")
    p.add_argument("--json", default="", help="also write the rows to this file (rank 0)")
    return p


def shape_for(op: str, nbytes: int, elem: int, world: int) -> dict:
    """Return the op's shape (without world) whose S is about ``nbytes``."""
    if op == "all_to_all":
        d = 1024
        return {"T": max(1, nbytes // (elem * d)), "d": d}
    return {"N": max(world, nbytes // elem)}


def gpu_main(a: argparse.Namespace) -> int:
    """Run under torchrun: time each variant at each size with NCCL; rank 0 prints the table."""
    import torch.distributed as dist

    import workbench as wb
    from workbench import hardware
    from workbench.comm_model import algbw, bus_factor

    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    dev = torch.device("cuda", local)
    dist.init_process_group("nccl", device_id=dev)
    rank, world = dist.get_rank(), dist.get_world_size()
    spec = wb.get_op(a.op)
    dt = wb.registry.as_dtype(a.dtype)
    elem = torch.empty((), dtype=dt).element_size()
    names = [n for n in a.variants.split(",") if n] or [v.name for v in wb.variants(a.op)]
    link = hardware.link(a.link)
    rows = []
    for name in names:
        v = wb.variant(a.op, name)
        for size in map(parse_size, a.sizes.split(",")):
            shape = {"world": world, **shape_for(a.op, size, elem, world)}
            sizes, kw = spec.split(shape)
            inputs = tuple(t.to(dev) if isinstance(t, torch.Tensor) else t  # NCCL: every tensor on the GPU
                           for t in spec.make(sizes | kw, dt, 0, torch.device("cpu"))[rank])
            v.fn(*inputs, None, **kw)
            times = []
            for _ in range(a.iters):
                dist.barrier()
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                v.fn(*inputs, None, **kw)
                end.record()
                torch.cuda.synchronize()
                times.append(start.elapsed_time(end) / 1e3)
            t = torch.tensor([statistics.median(times)], device=dev)
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            nbytes = spec.bytes(dtype=dt, **shape)
            bus = algbw(nbytes, float(t)) * bus_factor(a.op, world)
            rows.append({"op": a.op, "name": name, "world": world, "bytes": int(nbytes), "t_s": float(t),
                         "busbw_GBps": bus, "of_link": bus / link.bandwidth_gbs,
                         "where": f"NCCL on {world} x {torch.cuda.get_device_name(dev)}"})
    if rank == 0:
        print(f"{rows[0]['where']}; busbw against {link.name}: {link.bandwidth_gbs:g} GB/s per direction")
        for r in rows:
            print(f"{r['name']:20} {r['bytes']:>13,} B {r['t_s'] * 1e6:>10.1f} us  busbw {r['busbw_GBps']:8.1f} GB/s"
                  f"  ({100 * r['of_link']:.0f}% of the link)")
        if a.json:
            Path(a.json).write_text(json.dumps(rows, indent=1))
    dist.destroy_process_group()
    return 0


def cpu_main(a: argparse.Namespace) -> int:
    """Time the variants on this machine's gloo rank pool (4 ranks), labelled as such."""
    import workbench as wb
    from workbench.comm_time import table, time_collective

    names = [n for n in a.variants.split(",") if n] or [v.name for v in wb.variants(a.op)]
    dt = wb.registry.as_dtype("float32")
    rows = []
    for name in names:
        shapes = [shape_for(a.op, min(parse_size(s), 2**22), 4, 4) for s in a.sizes.split(",")]
        rows += time_collective(name, a.op, world=4, shapes=shapes, dtype=dt, repeats=max(1, min(a.iters, 5)))
    print(table(rows))
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1, default=str))
    return 0


def main(argv: list[str] | None = None) -> int:
    a = args_parser().parse_args(argv)
    if a.cpu:
        return cpu_main(a)
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if gpus < 2:
        print(f"comm_busbw: this machine has {gpus} GPU(s); a collective needs 2 or more (one rank per GPU), so "
              "nothing was measured. Run it under torchrun on a multi-GPU node, or pass --cpu to time the gloo "
              "rank pool on this CPU (not a GPU interconnect).", file=sys.stderr)
        return 2
    if "LOCAL_RANK" not in os.environ:
        print(f"comm_busbw: start it with torchrun, one process per GPU: torchrun --nproc-per-node={gpus} "
              f"{Path(__file__).as_posix()} --op {a.op}", file=sys.stderr)
        return 2
    return gpu_main(a)


if __name__ == "__main__":
    raise SystemExit(main())
