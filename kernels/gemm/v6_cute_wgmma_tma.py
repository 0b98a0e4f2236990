"""GEMM in the CuTe DSL for Hopper: TMA into swizzled shared memory, a 4-stage mbarrier ring, wgmma, fp32 accumulators.

Each block (two warpgroups, 256 threads) owns a 128x256 tile of c. Warp 0 issues the TMA loads: per 64-wide slice
of K one box of a [128, 64] (K-major) and one of b [64, 256] (N-major: the contract's row-major b read in place,
no transpose) land in shared memory with the 128-byte swizzle wgmma's descriptors expect, and the TMA unit counts
the bytes into the stage's "full" mbarrier. Both warpgroups wait on it, issue 4 wgmma m64n256k16 each (one 64-row
half of the tile per warpgroup), keep one group of wgmmas in flight and free the stage before it through its
"empty" mbarrier, which lets warp 0 refill it: loads for the next 3 stages overlap the math of this one.

TMA needs 16-byte-aligned row strides (K and N multiples of 8 for 16-bit inputs): other shapes are refused by
:func:`supports`, with the reason. Edges are not refused: TMA zero-fills a box past M, N or K, and the epilogue
writes only the elements of c inside [M, N] (predicated fp32 -> bf16/fp16 stores straight from the accumulators).
Blocks walk the tiles in groups of 8 tile-rows so a wave of blocks shares its a and b tiles in L2.
"""

from typing import Any

import torch

from kernels import _cute
from kernels._launch import is_aligned
from kernels.gemm.reference import tma_supports
from workbench import empty, register
from workbench.contracts import require

BM, BN, BK = 128, 256, 64  # block tile; BK = 64 bf16 = 128 bytes: one swizzle row
STAGES = 4  # shared-memory ring: 4 x (128x64 + 256x64) x 2 bytes = 196,608 bytes
WARPGROUPS = 2  # each computes a 64x256 half of the block tile
THREADS = 128 * WARPGROUPS
GROUP_M = 8  # tile-rows per raster group (L2 reuse)
SMEM = 1024 + STAGES * (BM * BK + BN * BK) * 2  # 8 mbarriers, padded to the tiles' 1 KiB alignment: 197,632


def _host() -> Any:
    """Return the ``@cute.jit`` host function (the DSL is imported on first use)."""
    cutlass, cute = _cute.import_cute()
    import cuda.bindings.driver as cuda
    import cutlass.pipeline as pipeline
    import cutlass.utils.hopper_helpers as sm90
    from cutlass.tensor_utils import LayoutEnum

    @cute.kernel
    def wgmma_kernel(tma_a: cute.CopyAtom, ma: cute.Tensor, tma_b: cute.CopyAtom, mb: cute.Tensor,
                     mc: cute.Tensor, tiled_mma: cute.TiledMma, sa_layout: cute.ComposedLayout,
                     sb_layout: cute.ComposedLayout, storage_t: cutlass.Constexpr) -> None:
        tidx, _, _ = cute.arch.thread_idx()
        bid, _, _ = cute.arch.block_idx()
        warp = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        if warp == 0:
            cute.nvgpu.cpasync.prefetch_descriptor(tma_a)
            cute.nvgpu.cpasync.prefetch_descriptor(tma_b)

        # Which tile: blocks run in groups of GROUP_M tile-rows, column by column inside a group.
        m, n = mc.shape
        tiles_m = (m + BM - 1) // BM
        tiles_n = (n + BN - 1) // BN
        per_group = GROUP_M * tiles_n
        first_m = (bid // per_group) * GROUP_M
        rows = cutlass.min(tiles_m - first_m, GROUP_M)
        pid_m = first_m + (bid % per_group) % rows
        pid_n = (bid % per_group) // rows

        smem = cutlass.memory.SmemAllocator()
        storage = smem.allocate(storage_t)
        sa = storage.sa.get_tensor(sa_layout.outer, swizzle=sa_layout.inner)  # (BM, BK, STAGES), swizzled
        sb = storage.sb.get_tensor(sb_layout.outer, swizzle=sb_layout.inner)  # (BN, BK, STAGES)
        stage_bytes = cute.size_in_bytes(mc.element_type, cute.slice_(sa_layout, (None, None, 0))) + \
            cute.size_in_bytes(mc.element_type, cute.slice_(sb_layout, (None, None, 0)))
        ring = pipeline.PipelineTmaAsync.create(
            barrier_storage=storage.bars.data_ptr(), num_stages=STAGES,
            producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread),
            consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, THREADS // 32),  # one arrive per warp
            tx_count=stage_bytes, cta_layout_vmnk=cute.make_layout((1, 1, 1, 1)))

        tile = (BM, BN, BK)
        ga = cute.local_tile(ma, tile, (pid_m, pid_n, None), proj=(1, None, 1))  # (BM, BK, k tiles)
        gb = cute.local_tile(mb, tile, (pid_m, pid_n, None), proj=(None, 1, 1))  # (BN, BK, k tiles)
        gc = cute.local_tile(mc, tile, (pid_m, pid_n, None), proj=(1, 1, None))  # (BM, BN)
        cc = cute.local_tile(cute.make_identity_tensor(mc.shape), tile, (pid_m, pid_n, None), proj=(1, 1, None))
        one = cute.make_layout(1)
        tas, tag = cute.nvgpu.cpasync.tma_partition(tma_a, 0, one, cute.group_modes(sa, 0, 2),
                                                     cute.group_modes(ga, 0, 2))
        tbs, tbg = cute.nvgpu.cpasync.tma_partition(tma_b, 0, one, cute.group_modes(sb, 0, 2),
                                                     cute.group_modes(gb, 0, 2))

        wg = cute.arch.make_warp_uniform(tidx // 128)
        thr = tiled_mma.get_slice(wg * 128)
        fa = tiled_mma.make_fragment_A(thr.partition_A(sa))  # wgmma smem descriptors, per stage
        fb = tiled_mma.make_fragment_B(thr.partition_B(sb))
        tgc = thr.partition_C(gc)
        tcc = thr.partition_C(cc)
        acc = cute.make_rmem_tensor(tgc.shape, cutlass.Float32)
        acc.fill(0.0)
        tiled_mma.set(cute.nvgpu.warpgroup.Field.ACCUMULATE, True)
        k_blocks = cute.size(fa, mode=[2])

        k_tiles = cute.size(ga, mode=[2])
        put = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, STAGES)
        got = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, STAGES)
        done = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, STAGES)
        if warp == 0:  # fill the ring
            for _ in cutlass.range(cutlass.min(STAGES, k_tiles), unroll=1):
                ring.producer_acquire(put)
                bar = ring.producer_get_barrier(put)
                cute.copy(tma_a, tag[(None, put.count)], tas[(None, put.index)], tma_bar_ptr=bar)
                cute.copy(tma_b, tbg[(None, put.count)], tbs[(None, put.index)], tma_bar_ptr=bar)
                ring.producer_commit(put)
                put.advance()

        for kt in cutlass.range(k_tiles, unroll=1):
            ring.consumer_wait(got)
            cute.nvgpu.warpgroup.fence()
            for kb in cutlass.range_constexpr(k_blocks):
                cute.gemm(tiled_mma, acc, fa[(None, None, kb, got.index)], fb[(None, None, kb, got.index)], acc)
            cute.nvgpu.warpgroup.commit_group()
            cute.nvgpu.warpgroup.wait_group(1)  # the previous slice's wgmmas are done: its stage may be refilled
            got.advance()
            if kt > 0:  # slice kt - 1's stage is free: this warp says so, then warp 0 refills it with slice kt + 3
                ring.consumer_release(done)
                done.advance()
                # Only after its own release: warp 0 waits there for all 8 warps' releases, its own included.
                if warp == 0:
                    if put.count < k_tiles:
                        ring.producer_acquire(put)
                        bar = ring.producer_get_barrier(put)
                        cute.copy(tma_a, tag[(None, put.count)], tas[(None, put.index)], tma_bar_ptr=bar)
                        cute.copy(tma_b, tbg[(None, put.count)], tbs[(None, put.index)], tma_bar_ptr=bar)
                        ring.producer_commit(put)
                        put.advance()
        cute.nvgpu.warpgroup.wait_group(0)

        for i in cutlass.range(cute.size(acc), unroll_full=True):  # epilogue: fp32 -> c's dtype, inside [M, N] only
            if cute.elem_less(tcc[i], mc.shape):
                tgc[i] = acc[i].to(mc.element_type)

    @cute.jit
    def host(a: cute.Tensor, b: cute.Tensor, c: cute.Tensor, stream: cuda.CUstream) -> None:
        """Launch c[M, N] = a[M, K] @ b viewed as (N, K) (N-major), on ``stream``."""
        dt = a.element_type
        a_major, b_major = LayoutEnum.from_tensor(a), LayoutEnum.from_tensor(b)
        tiled_mma = sm90.make_trivial_tiled_mma(dt, dt, a_major.sm90_mma_major_mode(), b_major.sm90_mma_major_mode(),
                                                cutlass.Float32, (WARPGROUPS, 1, 1), tiler_mn=(64, BN))
        tile = (BM, BN, BK)
        sa_layout = sm90.make_smem_layout_a(a_major, tile, dt, STAGES)
        sb_layout = sm90.make_smem_layout_b(b_major, tile, dt, STAGES)
        load = cute.nvgpu.cpasync.CopyBulkTensorTileG2SOp()
        ta = cute.nvgpu.cpasync.make_tiled_tma_atom(load, a, cute.slice_(sa_layout, (None, None, 0)), (BM, BK))
        tb = cute.nvgpu.cpasync.make_tiled_tma_atom(load, b, cute.slice_(sb_layout, (None, None, 0)), (BN, BK))

        @cute.struct
        class Storage:
            bars: cute.struct.MemRange[cutlass.Int64, 2 * STAGES]  # a full and an empty mbarrier per stage
            sa: cute.struct.Align[cute.struct.MemRange[dt, cute.cosize(sa_layout)], 1024]
            sb: cute.struct.Align[cute.struct.MemRange[dt, cute.cosize(sb_layout)], 1024]

        # The launch asks for the shared memory the allocator counted; wb.inspect reports SMEM: they must agree.
        if cutlass.const_expr(Storage.size_in_bytes() != SMEM):
            raise AssertionError(f"cute_wgmma_tma: shared storage is {Storage.size_in_bytes()} bytes, SMEM says {SMEM}")
        m, n = c.shape
        tiles = ((m + BM - 1) // BM) * ((n + BN - 1) // BN)
        wgmma_kernel(ta.atom, ta.tma_tensor, tb.atom, tb.tma_tensor, c, tiled_mma, sa_layout, sb_layout,
                     Storage).launch(grid=(tiles, 1, 1), block=[THREADS, 1, 1], stream=stream)

    return host


def supports(shape: dict) -> str | None:
    """Return why the kernel cannot take ``shape`` (TMA: 16-byte row strides), naming the op and variant, or None."""
    why = tma_supports(shape)
    return f"gemm/cute_wgmma_tma: {why}" if why else None


def cute_args(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> tuple:
    """Return the launch's CuTe tensors: a (M, K) K-major, b read as (N, K) N-major (no copy), c (M, N)."""
    return _cute.to_cute(a, 1), _cute.to_cute(b.t(), 0), _cute.to_cute(c, 1)


def _fakes(dtype: torch.dtype) -> tuple:
    """Return fake a (M, K) K-major, b as (N, K) N-major and c (M, N): shapes runtime values, K and N % 8 == 0."""
    _, cute = _cute.import_cute()
    dt = _cute.cutlass_dtype(dtype)
    fake = cute.runtime.make_fake_compact_tensor
    m, n, k = cute.sym_int(), cute.sym_int(divisibility=8), cute.sym_int(divisibility=8)
    return (fake(dt, (m, k), stride_order=(1, 0), assumed_align=16),
            fake(dt, (n, k), stride_order=(0, 1), assumed_align=16),
            fake(dt, (m, n), stride_order=(1, 0), assumed_align=16))


def compile_fake(dtype: torch.dtype = torch.bfloat16, target: str | None = None) -> Any:
    """Compile the kernel for ``target`` (default :func:`kernels._cute.arch`, sm_90a here) on fake tensors."""
    return _cute.compile_with_artifacts(_host(), *_fakes(dtype), _cute.fake_stream(), target=target)


def inspect_spec() -> dict:
    """Return the ``wb.inspect`` spec: the bf16 instance for sm_90a."""
    return _cute.cute_spec("cute_wgmma_tma", compile_fake, torch.bfloat16, THREADS, dynamic_smem=SMEM)


@register("gemm", "cute_wgmma_tma", backend="cute", gpu_only=True, dtypes=("float16", "bfloat16"),
          supports=supports, inspect_spec=inspect_spec, alignment=16,
          gpu_note="CuTe DSL for sm_90a: TMA, mbarriers and wgmma (Hopper only); it compiles here, see wb.inspect",
          idea="CuTe DSL Hopper: TMA into 128B-swizzled smem, a 4-stage mbarrier ring, wgmma 64x256x16, 128x256 tiles.")
def cute_wgmma_tma(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    m, k = a.shape
    n = b.shape[1]
    require("gemm", torch.cuda.get_device_capability(a.device)[0] == 9,
            f"cute_wgmma_tma uses wgmma and TMA (sm_90a): it runs on Hopper GPUs only, not on "
            f"{torch.cuda.get_device_name(a.device)}")
    a, b = a.contiguous(), b.contiguous()
    require("gemm", is_aligned(a, b), "cute_wgmma_tma loads a and b with TMA, which needs 16-byte-aligned base "
            f"addresses; got a at {a.data_ptr():#x}, b at {b.data_ptr():#x} (a sliced view? pass a fresh tensor)")
    c = empty((m, n), a.dtype, a.device)
    if c.numel() == 0 or k == 0:  # a TMA descriptor needs every extent >= 1; K = 0: every dot product is 0
        return c.zero_()
    if not _cute.dsl_installed():  # a GPU machine without the DSL: the ahead-of-time build
        _cute.launch_aot("cute_wgmma_tma", a, (b, (n, k), b.stride(0)), c)  # b as (N, K), N-major: stride N
        return c
    ca, cb, cc = cute_args(a, b, c)
    stream = _cute.current_stream()
    fn = _cute.compiled(("cute_wgmma_tma", a.dtype, _cute.arch()),
                        lambda: _cute.import_cute()[1].compile(_host(), ca, cb, cc, stream))
    fn(ca, cb, cc, stream)
    return c
