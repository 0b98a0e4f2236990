"""Every CUDA C kernel compiles as cupy will compile it on the GPU: NVRTC, cupy's options, no GPU needed.

The CPU engine compiles the same ``.cu`` files with g++, which has libc headers and a newer C++ default, so it
cannot see what NVRTC rejects (``#include <stdint.h>`` made softmax_vec.cu and softmax_rows.cu fail on a GPU).
Each build below is what the gpu-mode launch code compiles: the same file, the same ``-D`` options (attention,
moe_topk and moe_experts compile one head dim / expert count / dtype at a time on a GPU), and the kernel names it
then asks cupy for. sm_90 (the H200) gets every one of those builds; sm_80 gets each file once, whole (every
kernel of it), unless the file is Hopper-only: as a cubin (ptxas included) when the file has inline PTX, whose
instructions ptxas checks per architecture, and as PTX otherwise (NVRTC's front end and NVVM for sm_80; ptxas
already accepted the same SIMT code for sm_90, and repeating it for sm_80 would add ~30 s of CPU to `make test`).
``arch="sm_90a"`` kernels (wgmma, setmaxnreg) never go through
NVRTC: the project builds them with nvcc (``workbench.cuda.build_cubin``), and that build is checked here too.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

import workbench as wb
from tests._nvrtc import compile_like_cupy, load_nvrtc
from tests.conftest import ROOT
from workbench.cuda import _frontend, _gpu_source, has_inline_asm, load_source
from workbench.practice.starters import starter_text

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the NVRTC wheel test runs on Linux")

K = ROOT / "kernels"
SFX = ("f32", "f16", "bf16")
HOPPER_NVCC = {"kernels/gemm/cu/hgemm_wgmma_tma.cu": ("hgemm_wgmma_tma_f16", "hgemm_wgmma_tma_bf16")}


@dataclass(frozen=True)
class Build:
    """One NVRTC compile the GPU path makes: a file (or inline source), its options, the kernels it must export."""

    src: str  # repo-relative .cu path, "module:ATTR" for CUDA C held in a Python string, "starter:path:ATTR" for
    # the same in the starter generated from a solution file
    options: tuple[str, ...]
    names: tuple[str, ...]

    @property
    def id(self) -> str:
        name = Path(self.src.split(":")[1]).stem.replace("solution", "starter") if self.src.startswith("starter:") \
            else Path(self.src.split(":")[0]).name
        return f"{name}{' ' + ' '.join(self.options) if self.options else ''}"

    def source(self):
        if self.src.startswith("starter:"):  # what learners start from: run the generated starter, take ATTR
            _, path, attr = self.src.split(":")
            ns: dict = {}
            exec(compile(starter_text(ROOT / path), path, "exec"), ns)  # noqa: S102  (our own exercise)
            return load_source(ns[attr])
        if ":" in self.src:
            mod, attr = self.src.split(":")
            return load_source(getattr(__import__(mod, fromlist=[attr]), attr))
        return load_source(ROOT / self.src)


def _softmax_and_small() -> list[Build]:
    out = [Build("kernels/vecadd/vecadd.cu", (), ("vecadd_f32", "vecadd_f16")),
           Build("kernels/rmsnorm/rmsnorm.cu", (), tuple(f"rmsnorm_{s}" for s in SFX)),
           Build("kernels/layernorm_bwd/layernorm_bwd.cu", (), tuple(f"ln_bwd_{k}_{s}" for k in ("partials", "colsum")
                                                                     for s in SFX)),
           Build("kernels/add_rmsnorm/add_rmsnorm.cu", (), tuple(f"add_rmsnorm_{s}" for s in SFX)),
           Build("kernels/rope/rope.cu", (), tuple(f"rope_{s}" for s in SFX)),
           Build("kernels/gemm_w8a8/cu/w8a8_dp4a.cu", (), ("w8a8_dp4a",)),
           Build("kernels/gemm_w8a8/cu/w8a8_mma.cu", (), ("w8a8_mma",)),
           Build("kernels/gemm_w8a8/cu/wrong_w8a8.cu", (), ("w8a8_scale_first",)),
           Build("kernels/moe_align/moe_align.cu", (), ("moe_align_count", "moe_align_scatter")),
           Build("kernels.softmax.ex_warp_solution:SOURCE", (), ("softmax_warp",)),
           Build("starter:kernels/softmax/ex_warp_solution.py:SOURCE", (), ("softmax_warp",)),
           Build("kernels.decode_attention.ex_gqa_solution:SOURCE", (), ("decode_gqa_map",)),
           Build("starter:kernels/decode_attention/ex_gqa_solution.py:SOURCE", (), ("decode_gqa_map",)),
           # known-wrong kernels: their bug must be the one they teach, not a compile error on the GPU
           Build("kernels/vecadd/wrong_vecadd.cu", (), ("vecadd_unguarded_f32",)),
           Build("kernels/softmax/wrong_block_slots.cu", (), ("softmax_unguarded_slots_f32",)),
           Build("kernels/transpose/transpose.cu", (),
                 ("transpose_naive_f32", "transpose_smem_f32", "transpose_padded_f32"))]
    for ex in ("coalesce", "conflicts"):  # the transpose exercises' starters and solutions
        out.append(Build(f"kernels.transpose.ex_{ex}_solution:SOURCE", (), ("transpose_tile",)))
        out.append(Build(f"starter:kernels/transpose/ex_{ex}_solution.py:SOURCE", (), ("transpose_tile",)))
    for stem in ("naive", "online", "warp", "block", "vec", "rows"):
        base = f"softmax_{stem}"
        out.append(Build(f"kernels/softmax/{base}.cu", (), tuple(f"{base}_{s}" for s in SFX)))
    return out


def _gemm() -> list[Build]:
    out = []
    for v in wb.variants("gemm", backend="cuda", include_wrong=True):
        rel = v.cu_file.resolve().relative_to(ROOT).as_posix()
        if rel in HOPPER_NVCC or any(b.src == rel for b in out):
            continue
        stem = v.cu_file.stem
        if stem.startswith("sgemm_"):
            names = tuple(f"{stem}_{s}" for s in SFX)
        elif stem.startswith("hgemm_"):
            names = (f"{stem}_f16", f"{stem}_bf16")
        else:  # wrong_gemm.cu: the known-wrong kernels
            names = ("sgemm_smem_nosync", "sgemm_smem_k_tail")
        out.append(Build(rel, (), names))
    return out


def _one_at_a_time() -> list[Build]:
    from kernels._launch import SUFFIX, only_dtype
    from kernels.attention import _cuda as attn
    from kernels.moe_topk import v1_cuda_topk as topk

    out = []
    for cu, dtypes in (("attn_flash_simt", (torch.float32, torch.float16, torch.bfloat16)),
                       ("attn_flash_wmma", (torch.float16, torch.bfloat16)),
                       ("attn_flash_mma", (torch.float16, torch.bfloat16))):
        for hd in attn.HEAD_DIMS:
            for dt in dtypes:
                out.append(Build(f"kernels/attention/{cu}.cu", attn.only(hd, dt), (f"{cu}_d{hd}_{SUFFIX[dt]}",)))
    for dt, s in SUFFIX.items():
        out.append(Build("kernels/moe/moe_experts.cu", only_dtype(dt),
                         tuple(f"moe_{k}_{s}" for k in ("permute", "gemm_nt", "silu_mul", "combine"))))
    for dt, s in SUFFIX.items():
        for cu, names in (("decode_warp", ("decode_warp",)), ("decode_gqa", ("decode_gqa",)),
                          ("decode_split", ("decode_split", "decode_merge", "lse_merge"))):
            out.append(Build(f"kernels/decode_attention/cu/{cu}.cu", only_dtype(dt),
                             tuple(f"{n}_{s}" for n in names)))
        out.append(Build("kernels/decode_attention_q8/cu/decode_q8_gqa.cu", only_dtype(dt),
                         (f"decode_q8_i8_{s}", f"decode_q8_e4m3_{s}")))
        for cu in ("layernorm_warp", "layernorm_welford", "layernorm_block"):  # kernels/layernorm/_host.py's launches
            out.append(Build(f"kernels/layernorm/cu/{cu}.cu", only_dtype(dt), (f"{cu}_{s}",)))
    out += [Build("kernels.layernorm.ex_welford_solution:SOURCE", (), ("layernorm_welford_ex",)),
            Build("starter:kernels/layernorm/ex_welford_solution.py:SOURCE", (), ("layernorm_welford_ex",))]
    for vpl in topk.VPLS:
        for dt, s in SUFFIX.items():
            out.append(Build("kernels/moe_topk/moe_topk.cu", topk.only(32 * vpl, dt), (f"moe_topk_v{vpl}_{s}",)))
    return out


SM90 = _softmax_and_small() + _gemm() + _one_at_a_time()


def _whole_files() -> list[Build]:
    """Each file once, without -D options (all its kernels): the sm_80 builds."""
    out: dict[str, Build] = {}
    for b in SM90:
        w = out.setdefault(b.src, Build(b.src, (), ()))
        out[b.src] = Build(b.src, (), w.names + b.names)
    return list(out.values())


SM80 = _whole_files()


def _compile(b: Build, arch: str):
    src = b.source()
    text, opts = _gpu_source(src, b.options)  # exactly what workbench.cuda hands cupy in gpu mode
    return compile_like_cupy(text, src.path or "inline.cu", opts, arch)


@pytest.fixture(scope="module", autouse=True)
def _nvrtc():
    try:
        return load_nvrtc()
    except RuntimeError as e:
        pytest.fail(f"the NVRTC test needs NVRTC here: {e}")


def test_every_cu_file_is_compiled_here():
    listed = {b.src for b in SM90} | set(HOPPER_NVCC)
    on_disk = {p.relative_to(ROOT).as_posix() for p in K.rglob("*.cu")}
    assert on_disk - listed == set(), "a .cu file the NVRTC test does not compile: add its GPU builds to the table"
    for op in wb.ops():
        for v in wb.variants(op, include_wrong=True, backend="cuda"):
            assert v.cu_file.resolve().relative_to(ROOT).as_posix() in listed, f"{op}/{v.name}: {v.cu_file}"


@pytest.mark.parametrize("b", SM90, ids=lambda b: b.id)
def test_nvrtc_compiles_for_sm90_as_cupy_will(b):
    # through the CPU engine's front-end gate, whose verdict cache the cpu-mode builds of the same file then reuse
    # (it compiles with --Ofast-compile=max first and a refusal again with cupy's options: the verdict is cupy's)
    src = b.source()
    text, opts = _gpu_source(src, b.options)
    v = _frontend.verdict(text, src.path, src.path or "inline.cu", opts)
    assert v is not None and v.arch == "sm_90"
    assert v.ok, f"NVRTC (cupy's options, sm_90) rejects {b.src} {b.options}:\n{v.log[-3000:]}"
    missing = [n for n in b.names if n not in v.entries]
    assert not missing, f"{b.src} {b.options}: the GPU path asks for {missing}, which the cubin does not export"


@pytest.mark.parametrize("b", SM80, ids=lambda b: b.id)
def test_nvrtc_compiles_for_sm80_as_cupy_will(b):
    arch = "sm_80" if has_inline_asm(b.source().text) else "compute_80"
    r = _compile(b, arch)
    assert r.ok, f"NVRTC (cupy's options, {arch}) rejects {b.src}:\n{r.log[-3000:]}"
    assert all(r.has_kernel(n) for n in b.names)


def test_libc_headers_fail_under_nvrtc_as_on_the_gpu():
    # What broke softmax_vec.cu and softmax_rows.cu: g++ and nvcc find <stdint.h>, NVRTC does not.
    src = load_source(K / "softmax" / "softmax_vec.cu")
    text, opts = _gpu_source(src, ())
    inc = '#include "../include/kernel_helpers.cuh"'
    assert inc in text
    text = text.replace(inc, "#include <stdint.h>\n" + inc, 1)
    r = compile_like_cupy(text, src.path, opts, "sm_90")
    assert not r.ok and 'cannot open source file "stdint.h"' in r.log


def test_hopper_only_kernels_are_built_with_nvcc_for_sm90a():
    # cupy picks -arch=sm_90 itself; wgmma and setmaxnreg exist only for sm_90a, so NVRTC's sm_90 build fails and
    # the variant passes arch="sm_90a": workbench.cuda.build_cubin runs nvcc, cupy loads the cubin.
    from workbench.cuda import build_cubin
    from workbench.inspection import find_cuda_tool

    try:
        find_cuda_tool("nvcc")
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"no nvcc here: {e}")
    from kernels._launch import cuda_kernel

    for rel, names in HOPPER_NVCC.items():
        cubin = build_cubin(ROOT / rel, "sm_90a").read_bytes()
        for n in names:
            assert b"\0" + n.encode() + b"\0" in cubin, n
        src = load_source(ROOT / rel)
        text, opts = _gpu_source(src, ())
        r = compile_like_cupy(text, src.path, opts, "sm_90")
        assert not r.ok and "not supported on .target 'sm_90'" in r.log
    wgmma = cuda_kernel(ROOT / "kernels/gemm/cu/hgemm_wgmma_tma.cu", "hgemm_wgmma_tma", torch.bfloat16, arch="sm_90a")
    assert wgmma.arch == "sm_90a"
