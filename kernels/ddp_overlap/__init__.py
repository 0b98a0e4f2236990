"""Data-parallel gradient sync: bucketed all-reduces overlapping the backward pass, against syncing after it.

Not an op contract: a small training step (:mod:`kernels.ddp_overlap.step`) whose gradients are checked against a
float64 reference and whose timeline notebook 08 draws.
"""
