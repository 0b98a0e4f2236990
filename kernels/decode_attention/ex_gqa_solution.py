import torch

from kernels.decode_attention.ex_common import GQA_KERNEL, gqa_decode  # the kernel that calls kv_head, its launch

SOURCE = r"""
__device__ int kv_head(int h, int Hq, int Hkv) {
    // >>> learner
    //> // TODO: Hq query heads share Hkv KV heads; each KV head serves a group of consecutive query heads.
    //> return 0;  // so far: every query head reads KV head 0 (right only for MQA, Hkv = 1)
    const int group = Hq / Hkv;  // query heads per KV head
    return h / group;  // heads 0 .. group - 1 read KV head 0, the next group KV head 1, ...
    // <<< learner
}
""" + GQA_KERNEL  # decode_gqa_map: one warp per (query head, sequence), calling kv_head (ex_gqa_kernel.cuh)


def decode_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor,
                     seq_lens: torch.Tensor, scale: float | None = None) -> torch.Tensor:
    return gqa_decode(SOURCE, q, k_cache, v_cache, block_table, seq_lens, scale)
