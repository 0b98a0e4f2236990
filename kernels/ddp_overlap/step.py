"""One data-parallel training step of an MLP, its gradients all-reduced after the backward or overlapping it.

The model is ``layers`` linear layers of ``[H, H]`` with tanh between them (none after the last), loss
``sum((out - y)^2) / (2 * batch)`` per rank; every rank holds the same weights and its own batch. Data parallelism
needs the gradient of the mean loss over all ranks: every rank's gradient, all-reduced (summed) and divided by
``world``.

The backward is written out layer by layer, last layer first (what autograd does), so that each layer's compute is a
span on the timeline and each gradient is known the moment it is ready:

* :func:`sync_after` (no overlap): the whole backward, then one blocking ``all_reduce`` per bucket; the link idles
  during the backward and the compute idles during the sync.
* :func:`sync_overlapped` (PyTorch DDP's idea): the gradients are grouped in **buckets** of consecutive layers, in
  the order the backward produces them (last layers first); as soon as a bucket's last gradient is computed, its
  flattened gradients go out with ``all_reduce(async_op=True)`` and the backward goes on with the layers before it.
  One ``wait()`` per bucket at the end. DDP does this with autograd hooks (its ``Reducer``, buckets of
  ``bucket_cap_mb = 25`` MB by default, filled in reverse parameter order); here the hand-written backward calls
  the launch itself. Only the last bucket's all-reduce cannot hide: nothing computes after it.

Both return the averaged gradients, which :func:`reference_grads` computes in float64 for the check.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.distributed as dist

from workbench import comm


def make(world: int, batch: int, hidden: int, layers: int, seed: int = 0) -> tuple[list[torch.Tensor], list[tuple]]:
    """Return (weights, per-rank (x, y)): ``layers`` weights [H, H] shared by all ranks, a batch of its own each."""
    g = torch.Generator().manual_seed(seed)
    weights = [torch.randn(hidden, hidden, generator=g) * hidden ** -0.5 for _ in range(layers)]
    data = [(torch.randn(batch, hidden, generator=g), torch.randn(batch, hidden, generator=g)) for _ in range(world)]
    return weights, data


def _forward(weights: Sequence[torch.Tensor], x: torch.Tensor) -> list[torch.Tensor]:
    """Return every layer's input and the output: acts[0] = x, acts[l + 1] = layer l's output."""
    acts = [x]
    for i, w in enumerate(weights):
        z = acts[-1] @ w
        acts.append(torch.tanh(z) if i < len(weights) - 1 else z)
    return acts


def _layer_grads(weights: Sequence[torch.Tensor], x: torch.Tensor, y: torch.Tensor, on_ready=None,
                 ) -> list[torch.Tensor]:
    """Run the backward last layer first; call ``on_ready(layer, grad)`` as each weight's gradient is computed."""
    acts = _forward(weights, x)
    grads: list[torch.Tensor] = [torch.empty(0)] * len(weights)
    delta = (acts[-1] - y) / x.shape[0]  # d loss / d out
    for i in reversed(range(len(weights))):
        with comm.span("compute", note=f"backward layer {i}"):
            grads[i] = acts[i].T @ delta
            if i:
                delta = (delta @ weights[i].T) * (1 - acts[i] ** 2)  # through tanh: 1 - tanh^2
        if on_ready is not None:
            on_ready(i, grads[i])
    return grads


def buckets(layers: int, per_bucket: int) -> list[list[int]]:
    """Return the buckets of layer indices in the order the backward fills them: the last layers first."""
    if per_bucket < 1:
        raise ValueError(f"ddp_overlap: per_bucket must be >= 1 layer, got {per_bucket}")
    order = list(reversed(range(layers)))
    return [order[i:i + per_bucket] for i in range(0, layers, per_bucket)]


def sync_after(rank: int, world: int, device: object, weights: list[torch.Tensor], data: list[tuple],
               per_bucket: int = 2) -> list[torch.Tensor]:
    """Rank function: the whole backward, then a blocking all-reduce per bucket; return the averaged gradients."""
    x, y = data[rank]
    grads = _layer_grads(weights, x, y)
    for bucket in buckets(len(weights), per_bucket):
        flat = torch.cat([grads[i].reshape(-1) for i in bucket])
        dist.all_reduce(flat)
        _unflatten(flat / world, bucket, grads)
    return grads


def sync_overlapped(rank: int, world: int, device: object, weights: list[torch.Tensor], data: list[tuple],
                    per_bucket: int = 2) -> list[torch.Tensor]:
    """Rank function: launch each bucket's all-reduce as soon as its gradients exist; wait for all at the end."""
    x, y = data[rank]
    plan = buckets(len(weights), per_bucket)
    bucket_of = {layer: b for b, bucket in enumerate(plan) for layer in bucket}
    ready: dict[int, dict[int, torch.Tensor]] = {b: {} for b in range(len(plan))}
    pending: list[tuple[list[int], torch.Tensor, object]] = []

    def on_ready(layer: int, grad: torch.Tensor) -> None:
        b = bucket_of[layer]
        ready[b][layer] = grad
        if len(ready[b]) == len(plan[b]):  # the bucket is full: send it while the backward goes on
            flat = torch.cat([ready[b][i].reshape(-1) for i in plan[b]])
            pending.append((plan[b], flat, dist.all_reduce(flat, async_op=True)))

    grads = _layer_grads(weights, x, y, on_ready)
    for bucket, flat, work in pending:
        work.wait()  # flat holds the sum only from here on
        _unflatten(flat / world, bucket, grads)
    return grads


def _unflatten(flat: torch.Tensor, bucket: list[int], grads: list[torch.Tensor]) -> None:
    at = 0
    for i in bucket:
        n = grads[i].numel()
        grads[i] = flat[at:at + n].reshape(grads[i].shape)
        at += n


def reference_grads(weights: list[torch.Tensor], data: list[tuple]) -> list[torch.Tensor]:
    """Return the float64 gradients of the mean over ranks of each rank's loss (autograd, not the code above)."""
    ws = [w.double().requires_grad_() for w in weights]
    total = 0.0
    for x, y in data:
        a = x.double()
        for i, w in enumerate(ws):
            a = a @ w
            if i < len(ws) - 1:
                a = torch.tanh(a)
        total = total + ((a - y.double()) ** 2).sum() / (2 * x.shape[0])
    (total / len(data)).backward()
    return [w.grad for w in ws]
