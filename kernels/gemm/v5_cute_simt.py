"""GEMM in the CuTe DSL, SIMT: 64x64 block tiles staged through shared memory, a 4x4 register tile per thread.

The same algorithm as CUDA C's ``cuda_2d_blocktile``, written in NVIDIA's CuTe DSL (Python traced to PTX): each
block of 256 threads owns a 64x64 tile of c; per 8-wide slice of K it copies a[64, 8] and b[8, 64] into shared
memory (converted to fp32; out-of-range elements are written as 0, so any M, N, K works: the edges are predicated,
not refused), then every thread accumulates its 4x4 outputs in fp32 registers from 4 + 4 shared-memory reads per
k. Rows and columns of a thread's tile are 16 apart, so a warp's reads of one k-row touch 16 consecutive words:
no bank conflicts. No tensor cores: it runs on any sm_80+ GPU and shows the DSL's shape before ``cute_wgmma_tma``.
"""

from typing import Any

import torch

from kernels import _cute
from kernels.gemm.reference import output
from workbench import register

BM, BN, BK = 64, 64, 8  # block tile: 64x64 outputs, K staged 8 at a time
TM, TN = 4, 4  # outputs per thread (rows, columns), 16 apart
THREADS = (BM // TM) * (BN // TN)  # 256
SMEM = (BK * BM + BK * BN) * 4  # bytes: fp32 tiles of a (transposed) and b = 4,096


def _tile_loader() -> Any:
    """Return the ``@cute.jit`` device function that stages one tile of a row-major matrix into shared memory."""
    cutlass, cute = _cute.import_cute()

    @cute.jit
    def load_tile(g: cute.Tensor, s: cute.Tensor, r0: cutlass.Int32, c0: cutlass.Int32, tidx: cutlass.Int32,
                  rows: cutlass.Constexpr, cols: cutlass.Constexpr) -> None:
        """Copy g[r0:r0+rows, c0:c0+cols] into s[rows, cols] as fp32; 0 outside g. Consecutive threads walk
        the columns, g's contiguous dimension: a warp's loads coalesce."""
        n_rows, n_cols = g.shape
        for step in cutlass.range_constexpr(rows * cols // THREADS):
            e = tidx + step * THREADS
            i = e // cols
            j = e % cols
            v = cutlass.Float32(0.0)
            if r0 + i < n_rows:
                if c0 + j < n_cols:
                    v = g[r0 + i, c0 + j].to(cutlass.Float32)
            s[i, j] = v

    return load_tile


def _host() -> Any:
    """Return the ``@cute.jit`` host function (traced once per compile; the DSL is imported on first use)."""
    cutlass, cute = _cute.import_cute()
    import cuda.bindings.driver as cuda

    load_tile = _tile_loader()

    @cute.kernel
    def simt_kernel(ga: cute.Tensor, gb: cute.Tensor, gc: cute.Tensor) -> None:
        tidx, _, _ = cute.arch.thread_idx()
        bn, bm, _ = cute.arch.block_idx()
        m, k = ga.shape
        n = gb.shape[1]
        smem = cutlass.memory.SmemAllocator()
        # a's tile is stored m-fastest (sa[m, k] at m + 64 k) so that a k-row of it is contiguous, as b's is.
        sa = smem.allocate_tensor(cutlass.Float32, cute.make_layout((BM, BK), stride=(1, BM)), 16)
        sb = smem.allocate_tensor(cutlass.Float32, cute.make_layout((BK, BN), stride=(BN, 1)), 16)
        acc = cute.make_rmem_tensor((TM, TN), cutlass.Float32)
        acc.fill(0.0)
        ty = tidx // (BN // TN)  # this thread's rows are ty + 16 i, its columns tx + 16 j
        tx = tidx % (BN // TN)
        row0 = bm * BM
        col0 = bn * BN
        for k0 in cutlass.range(0, k, BK, unroll=1):
            load_tile(ga, sa, row0, k0, tidx, BM, BK)
            load_tile(gb, sb, k0, col0, tidx, BK, BN)
            cute.arch.sync_threads()
            for kk in cutlass.range_constexpr(BK):
                for i in cutlass.range_constexpr(TM):
                    av = sa[ty + i * (BM // TM), kk]
                    for j in cutlass.range_constexpr(TN):
                        acc[i, j] = acc[i, j] + av * sb[kk, tx + j * (BN // TN)]
            cute.arch.sync_threads()  # every thread is done with the tiles before the next slice overwrites them
        for i in cutlass.range_constexpr(TM):
            gm = row0 + ty + i * (BM // TM)
            for j in cutlass.range_constexpr(TN):
                gn = col0 + tx + j * (BN // TN)
                if gm < m:
                    if gn < n:
                        gc[gm, gn] = acc[i, j].to(gc.element_type)

    @cute.jit
    def host(a: cute.Tensor, b: cute.Tensor, c: cute.Tensor, stream: cuda.CUstream) -> None:
        m, n = c.shape
        grid = ((n + BN - 1) // BN, (m + BM - 1) // BM, 1)
        simt_kernel(a, b, c).launch(grid=grid, block=[THREADS, 1, 1], stream=stream)

    return host


def cute_args(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> tuple:
    """Return the launch's CuTe tensors: a, b and c row-major, assumed aligned to one element (no vector access)."""
    size = a.element_size()
    return _cute.to_cute(a, 1, size), _cute.to_cute(b, 1, size), _cute.to_cute(c, 1, size)


def compile_fake(dtype: torch.dtype = torch.float32, target: str | None = None) -> Any:
    """Compile the kernel for ``target`` (default: :func:`kernels._cute.arch`) on fake tensors: no GPU needed."""
    cutlass, cute = _cute.import_cute()
    dt = _cute.cutlass_dtype(dtype)
    sym = cute.sym_int
    fake = cute.runtime.make_fake_compact_tensor
    a = fake(dt, (sym(), sym()), stride_order=(1, 0))
    b = fake(dt, (sym(), sym()), stride_order=(1, 0))
    c = fake(dt, (sym(), sym()), stride_order=(1, 0))
    return _cute.compile_with_artifacts(_host(), a, b, c, _cute.fake_stream(), target=target)


def inspect_spec() -> dict:
    """Return the ``wb.inspect`` spec: the fp32 instance for sm_90a (any sm_80+ arch may be asked for)."""
    return _cute.cute_spec("cute_simt", compile_fake, torch.float32, THREADS, dynamic_smem=SMEM)


@register("gemm", "cute_simt", backend="cute", gpu_only=True, inspect_spec=inspect_spec,
          gpu_note="CuTe DSL: no CPU emulator; it compiles here, see wb.inspect",
          idea="CuTe DSL SIMT: 64x64 smem tiles, a 4x4 fp32 register tile per thread, predicated edges (sm_80+).")
def cute_simt(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    c, m, n, k = output(a, b)
    if c.numel() == 0:  # M or N is 0: an empty result (a grid of 0 blocks is a launch error)
        return c
    a, b = a.contiguous(), b.contiguous()
    if not _cute.dsl_installed():  # a GPU machine without the DSL: the ahead-of-time build (sm_90a)
        _cute.launch_aot("cute_simt", a, (b, (k, n), b.stride(0)), c)
        return c
    ca, cb, cc = cute_args(a, b, c)
    fn = _cute.compiled(("cute_simt", a.dtype, _cute.arch()),
                        lambda: _cute.import_cute()[1].compile(_host(), ca, cb, cc, _cute.current_stream()))
    fn(ca, cb, cc, _cute.current_stream())
    return c
