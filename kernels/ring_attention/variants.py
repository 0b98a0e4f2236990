"""Register the ring_attention variants; ``LADDER`` is their teaching order.

The all-gather baseline first (every rank holds the whole K/V; in reference.py), then the ring: blocking
(exchange, then compute), overlapped (the next block in flight while this one computes); the known-wrong merge
last.
"""

from workbench.registry import teaching_order

from . import (  # noqa: F401
    v1_ring_blocking,
    v2_ring_overlapped,
    wrong,  # wrong_merge_no_rescale: the running output not rescaled when the max grows
)

LADDER = ("torch_allgather", "ring_blocking", "ring_overlapped", "wrong_merge_no_rescale")
teaching_order("ring_attention", LADDER)
