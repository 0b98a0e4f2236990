def bus_factor(op: str, n: int) -> float:
    """Return nccl-tests' busbw / algbw for collective ``op`` on ``n`` ranks: bytes each rank sends, over S."""
    # >>> learner
    #> # Given: a ring reduce-scatter takes n - 1 steps, each sending one chunk of S / n bytes.
    #> # TODO: the factor of every collective ("all_reduce", "reduce_scatter", "all_gather", "all_to_all"),
    #> #       counted from its ring's steps. So far every collective gets 1.
    #> return 1.0
    steps = {"reduce_scatter": n - 1,  # one chunk of S / n per step
             "all_gather": n - 1,  # each rank forwards the n - 1 pieces it does not own
             "all_to_all": n - 1,  # pairwise exchange: one block of S / n to each other rank
             "all_reduce": 2 * (n - 1)}  # a reduce-scatter, then an all-gather
    if op not in steps:
        raise ValueError(f"bus_factor: unknown collective {op!r}")
    return steps[op] / n
    # <<< learner
