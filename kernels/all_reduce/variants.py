"""Register the all_reduce variants; ``LADDER`` is their teaching order.

torch's own first (the vendor baseline), then the naive reduce-to-one-and-broadcast, the ring, recursive
halving-doubling and the chunked, pipelined ring; the known-wrong kernels last.
"""

from workbench.registry import teaching_order

from . import (  # noqa: F401
    v1_naive,
    v2_ring,
    v3_halving_doubling,
    v4_ring_pipelined,
    wrong,
)

LADDER = ("torch_all_reduce", "naive", "ring", "halving_doubling", "ring_pipelined", "wrong_ring_chunk_off_by_one",
          "wrong_read_before_wait", "wrong_deadlock_order")
teaching_order("all_reduce", LADDER)
