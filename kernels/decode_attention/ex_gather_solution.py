import torch
import triton
import triton.language as tl

from kernels.decode_attention.ex_common import paged_decode  # the kernel around your helper, and its launch


@triton.jit
def token_slots(table_ptr, b, maxp, t, n, page):
    """Return (slots, valid) of sequence b's tokens t [BLOCK_T]: each token's slot in the page pool (page id * page
    + slot in the page) and whether it exists (t < n = seq_lens[b]). The block table has maxp entries per row."""
    # >>> learner
    #> # TODO: token t lives in page block_table[b, t // page], slot t % page of that page. Tokens t >= n do not
    #> #       exist: read no table entry for them (past the sequence's last page the table holds junk page ids).
    #> valid = t < n
    #> slots = t  # so far: as if sequence b's tokens filled the pool from page 0, in order
    valid = t < n  # tokens past seq_lens[b]: no table entry read, and the kernel masks their K and V loads
    pages = tl.load(table_ptr + b * maxp + t // page, mask=valid, other=0)  # the gather: a page id per token
    slots = pages * page + t % page
    # <<< learner
    return slots, valid


def decode_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor,
                     seq_lens: torch.Tensor, scale: float | None = None) -> torch.Tensor:
    return paged_decode(token_slots, q, k_cache, v_cache, block_table, seq_lens, scale)
