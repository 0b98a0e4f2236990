"""The catalogue of ``wb.profile``'s metrics: every counter and derived figure, declared once, complete at import.

Each :class:`Metric` has its key (Nsight Compute's name where one exists, ``wb__...`` for the workbench's own,
``triton__...`` for the Triton interpreter's), a label, what it means and what a good value is. The report lists
them in declaration order; :func:`resolve` turns a label or alias (what budgets and ``Profile[...]`` accept) into
the key; :func:`with_derived` adds the derived figures (ratios, efficiencies, totals) to a set of sums.

Every backend's counters are declared here, at import, so the catalogue never depends on which backend ran
first: the CUDA C engine's (Nsight Compute names), the backend-neutral totals, and the Triton interpreter's
(``workbench._triton_interp`` maps its counts onto these keys; nothing here imports Triton). A new backend adds
its section here; :func:`register_metric` stays public for counters declared at run time (a test's own).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["METRICS", "Good", "Metric", "register_metric", "resolve", "with_derived"]

Good = str | Callable[[dict[str, float]], str]


@dataclass(frozen=True)
class Metric:
    """One counter or derived figure: its key, a short label, what it means and what a good value is.

    ``kind``: ``"sum"`` (recorded by backends, added up over launches) or ``"derived"`` (computed from the sums by
    ``compute``, which returns None when its inputs are missing). ``ncu``: the key is a real Nsight Compute metric,
    requested by name in gpu mode; ``from_ncu`` computes a ``wb__`` key from ncu's values there (else it is absent).
    ``fmt``: ``"int"``, ``"ratio"``, ``"fraction"`` (shown with its percentage) or ``"bytes"``.
    ``better``: ``"lower"``, ``"higher"`` or None (a budget's direction when a check reports a miss).
    """

    key: str
    label: str
    meaning: str
    good: Good = ""
    kind: str = "sum"
    fmt: str = "int"
    ncu: bool = False
    aliases: tuple[str, ...] = ()
    better: str | None = None
    compute: Callable[[dict[str, float]], float | None] | None = None
    from_ncu: Callable[[dict[str, float]], float | None] | None = None
    group: str = ""
    detail: bool = False  # shown by report(detail=True) only

    def good_text(self, m: dict[str, float]) -> str:
        """Return what a good value is, given the profile's metrics (some depend on the access widths seen)."""
        return self.good(m) if callable(self.good) else self.good


METRICS: dict[str, Metric] = {}
_NAMES: dict[str, str] = {}  # normalised label/alias/key -> key


def _norm(name: str) -> str:
    return re.sub(r"[\s_-]+", " ", name.strip().lower())


def register_metric(key: str, label: str, meaning: str, good: Good = "", *, kind: str = "sum", fmt: str = "int",
                    ncu: bool = False, aliases: tuple[str, ...] = (), better: str | None = None,
                    compute: Callable[[dict[str, float]], float | None] | None = None,
                    from_ncu: Callable[[dict[str, float]], float | None] | None = None,
                    group: str = "", detail: bool = False) -> Metric:
    """Declare a metric (a backend's own counter, or a derived figure); the report lists them in this order.

    Re-registering a key replaces it (module reloads). ``label`` and ``aliases`` are names :func:`resolve` (and
    exercise budgets) accept besides the key; they must not name another metric. ``group`` gathers rows in the
    report (a group whose counters are all zero is left out; ``"hidden"``: never shown); ``detail`` rows show only
    in ``report(detail=True)``.
    """
    if kind not in ("sum", "derived"):
        raise ValueError(f"register_metric({key!r}): kind must be 'sum' or 'derived', got {kind!r}")
    if kind == "derived" and compute is None:
        raise ValueError(f"register_metric({key!r}): a derived metric needs compute=")
    if fmt not in ("int", "ratio", "fraction", "bytes", "float"):
        raise ValueError(f"register_metric({key!r}): fmt must be int, ratio, fraction, bytes or float, got {fmt!r}")
    m = Metric(key, label, meaning, good, kind, fmt, ncu, tuple(aliases), better, compute, from_ncu, group, detail)
    for name in (key, label, *aliases):
        owner = _NAMES.get(_norm(name))
        if owner is not None and owner != key:
            raise ValueError(f"register_metric({key!r}): the name {name!r} already names metric {owner!r}")
    METRICS.pop(key, None)
    METRICS[key] = m
    for name in (key, label, *aliases):
        _NAMES[_norm(name)] = key
    return m


def resolve(name: str) -> str:
    """Return the metric key that ``name`` (a key, a label such as "global load efficiency", or an alias) names."""
    key = _NAMES.get(_norm(name))
    if key is None:
        close = sorted(m.label for m in METRICS.values() if _norm(name).split()[0] in _norm(m.label))[:8]
        hint = f" (similar: {', '.join(close)})" if close else ""
        raise KeyError(f"no profile metric named {name!r}{hint}; the labels are: "
                       + ", ".join(m.label for m in METRICS.values()))
    return key


def _div(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b == 0:
        return None
    return a / b


def _get(m: dict[str, float], *keys: str) -> float | None:
    """Return the sum of ``keys`` present in ``m`` (None when none is)."""
    vals = [m[k] for k in keys if k in m]
    return sum(vals) if vals else None


def _ratio(num: str, den: str) -> Callable[[dict[str, float]], float | None]:
    return lambda m: _div(m.get(num), m.get(den))


def _sectors_good(op: str) -> Good:
    def good(m: dict[str, float]) -> str:
        ideal = _div(m.get(f"wb__global_ideal_sectors_op_{op}.sum"),
                     m.get(f"l1tex__t_requests_pipe_lsu_mem_global_op_{op}.sum"))
        if ideal is None:
            return "4 per fully active warp of 4-byte accesses (8 for 8-byte, 16 for 16-byte); 32 = no coalescing"
        return (f"{ideal:.3g}: what these requests' lanes and widths would touch at consecutive addresses; "
                "32 = every lane in its own sector")
    return good


def _declare_cuda_and_totals() -> None:
    """Declare the CUDA-side metrics (Nsight Compute names) and the backend-neutral totals."""
    R = register_metric
    for op, word in (("ld", "load"), ("st", "store")):
        R(f"l1tex__t_requests_pipe_lsu_mem_global_op_{op}.sum", f"global {word} requests",
          f"warp-level global {word} instructions (a warp with no active lane there makes none)",
          "fewer: one float4 request moves 4x the bytes of a float one", ncu=True,
          aliases=(f"global {word} instructions",), better="lower", group="global")
        R(f"l1tex__t_sectors_pipe_lsu_mem_global_op_{op}.sum", f"global {word} sectors",
          f"32-byte segments the {word} requests touch (each counted once per request)",
          "bytes requested / 32 (a warp's 32 consecutive floats: 4)", ncu=True, aliases=(f"{word} sectors",),
          better="lower", group="global")
        R(f"l1tex__average_t_sectors_per_request_pipe_lsu_mem_global_op_{op}.ratio", f"sectors per {word} request",
          f"global {word} sectors / requests (coalescing)", _sectors_good(op), kind="derived", fmt="ratio", ncu=True,
          better="lower", group="global", aliases=(f"global {word} sectors per request",),
          compute=_ratio(f"l1tex__t_sectors_pipe_lsu_mem_global_op_{op}.sum",
                         f"l1tex__t_requests_pipe_lsu_mem_global_op_{op}.sum"))
        R(f"wb__global_{word}_efficiency.ratio", f"global {word} efficiency",
          f"bytes requested / bytes in the sectors touched (ncu shows it x100 as smsp__sass_average_data_bytes_per_"
          f"sector_mem_global_op_{op}.pct); above 1: lanes share bytes", ">= 0.9 (0.125: a 4-byte lane per sector)",
          kind="derived", fmt="fraction", better="higher", group="global",
          compute=lambda m, op=op: _div(m.get(f"smsp__sass_data_bytes_mem_global_op_{op}.sum"),
                                        _mul(m.get(f"l1tex__t_sectors_pipe_lsu_mem_global_op_{op}.sum"), 32)))
        R(f"smsp__sass_average_data_bytes_per_sector_mem_global_op_{op}.pct", f"global {word} efficiency (%)",
          f"100 x global {word} efficiency (Nsight Compute's form)", "> 90", kind="derived", fmt="float", ncu=True,
          group="hidden", compute=lambda m, word=word: _mul(m.get(f"wb__global_{word}_efficiency.ratio"), 100))
        R(f"wb__global_{word}_bytes.sum", f"global {word} bytes",
          f"bytes global {word}s move: 32 x sectors for CUDA C (ncu: l1tex__t_bytes_pipe_lsu_mem_global_op_{op}.sum),"
          " bytes of unmasked lanes for Triton", "", better="lower", fmt="bytes", group="global",
          from_ncu=lambda m, op=op: m.get(f"l1tex__t_bytes_pipe_lsu_mem_global_op_{op}.sum"))
        R(f"smsp__sass_data_bytes_mem_global_op_{op}.sum", f"global {word} bytes requested",
          "bytes the active lanes ask for (lanes x width, repeats included)", "", ncu=True, fmt="bytes",
          group="global", detail=True)
        R(f"smsp__sass_thread_inst_executed_op_global_{op}_pred_on.sum", f"global {word} lanes",
          f"thread-level global {word}s (active lanes over all requests)", "", ncu=True, group="global", detail=True)
        R(f"wb__global_ideal_sectors_op_{op}.sum", f"ideal global {word} sectors",
          "sectors the same requests would need at consecutive aligned addresses (at most the real count)", "",
          group="global", detail=True)
    R("wb__global_bytes.sum", "global bytes",
      "global load + store bytes; against the op's compulsory bytes: the traffic amplification",
      "close to the compulsory bytes (inputs read once, output written once)", kind="derived", fmt="bytes",
      better="lower", group="global", aliases=("global traffic",),
      compute=lambda m: _get(m, "wb__global_load_bytes.sum", "wb__global_store_bytes.sum"))
    for op, word in (("ld", "load"), ("st", "store")):
        R(f"smsp__inst_executed_op_shared_{op}.sum", f"shared {word} requests",
          f"warp-level shared-memory {word} instructions", "", ncu=True, group="shared",
          aliases=(f"shared {word} instructions",))
        R(f"l1tex__data_pipe_lsu_wavefronts_mem_shared_op_{op}.sum", f"shared {word} wavefronts",
          "passes through the 32 banks (each serves one 4-byte word per pass, to any number of lanes)",
          "= requests (x2 for 8-byte, x4 for 16-byte accesses)", ncu=True, better="lower", group="shared")
        R(f"l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_{op}.sum", f"shared {word} bank conflicts",
          "wavefronts beyond one per request (per half-warp for 8-byte, per quarter-warp for 16-byte accesses)",
          "0", ncu=True, better="lower", group="shared")
        R(f"wb__shared_wavefronts_per_request_op_{op}.ratio", f"wavefronts per shared {word} request",
          f"shared {word} wavefronts / requests (32: a column of a 32x32 float tile)", "1 (2 for 8-byte, 4 for "
          "16-byte accesses)", kind="derived", fmt="ratio", better="lower", group="shared",
          compute=_ratio(f"l1tex__data_pipe_lsu_wavefronts_mem_shared_op_{op}.sum",
                         f"smsp__inst_executed_op_shared_{op}.sum"))
        R(f"smsp__sass_data_bytes_mem_shared_op_{op}.sum", f"shared {word} bytes requested",
          "bytes the active lanes ask for", "", ncu=True, fmt="bytes", group="shared", detail=True)
        R(f"smsp__sass_thread_inst_executed_op_shared_{op}_pred_on.sum", f"shared {word} lanes",
          f"thread-level shared {word}s (active lanes over all requests)", "", ncu=True, group="shared", detail=True)
    R("l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum", "shared bank conflicts",
      "shared load + store bank conflicts", "0 (pad a 32-wide tile to 33 columns)", kind="derived", ncu=True,
      better="lower", group="shared", aliases=("bank conflicts",),
      compute=lambda m: _get(m, "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
                             "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"))
    R("wb__global_atomics.sum", "global atomics", "thread-level global atomic operations",
      "one per block or warp, not one per element", better="lower", group="sync")
    R("wb__global_atomic_requests.sum", "global atomic requests",
      "warp-level global atomics (ncu: ..._op_atom + ..._op_red requests)", "", better="lower", group="sync",
      from_ncu=lambda m: _get(m, "l1tex__t_requests_pipe_lsu_mem_global_op_atom.sum",
                              "l1tex__t_requests_pipe_lsu_mem_global_op_red.sum"))
    R("wb__shared_atomics.sum", "shared atomics", "thread-level shared-memory atomic operations", "", group="sync")
    R("smsp__inst_executed_op_shared_atom.sum", "shared atomic requests", "warp-level shared-memory atomics", "",
      ncu=True, group="sync", detail=True)
    R("wb__barriers.sum", "barriers", "__syncthreads() executed, per warp (8 warps through one barrier: 8)",
      "only where data crosses warps", better="lower", group="sync", aliases=("barriers executed", "syncthreads"))
    R("wb__warp_collectives.sum", "warp collectives", "shuffles, votes, warp reductions, __syncwarp() (per warp)",
      "", group="sync", aliases=("shuffles",))
    R("wb__active_lanes_per_memory_request.ratio", "active lanes per memory instruction",
      "active lanes per warp-level global/shared instruction: divergence, as ncu's smsp__thread_inst_executed_"
      "per_inst_executed.ratio shows it for all instructions", "32 (less: divergence, masked tails)",
      kind="derived", fmt="ratio", better="higher", group="sync", aliases=("divergence", "lanes per request"),
      compute=lambda m: _div(_get(m, *(f"smsp__sass_thread_inst_executed_op_{s}_{o}_pred_on.sum"
                                       for s in ("global", "shared") for o in ("ld", "st"))),
                             _get(m, "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
                                  "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",
                                  "smsp__inst_executed_op_shared_ld.sum", "smsp__inst_executed_op_shared_st.sum")))
    R("wb__threads.sum", "threads launched", "CUDA threads over all launches (grid x block)", "", group="launch",
      from_ncu=lambda m: m.get("launch__thread_count"))
    R("wb__uncounted_accesses.sum", "uncounted accesses",
      "thread-level accesses to memory the emulator could not attribute (a pointer inside a struct argument, a "
      "__device__ variable): left out of every count above", "0", group="launch")


def _mul(a: float | None, b: float) -> float | None:
    return None if a is None else a * b




def with_derived(sums: dict[str, float]) -> dict[str, float]:
    """Return ``sums`` with every derived figure whose inputs are there (a NaN is left out)."""
    out = dict(sums)
    for m in METRICS.values():
        if m.kind == "derived" and m.key not in out:
            v = m.compute(out) if m.compute else None
            if v is not None and not (isinstance(v, float) and math.isnan(v)):
                out[m.key] = v
    return out


_NOT_SECTORS = ("Triton picks each access's vector width and thread layout itself, so these are bytes requested, "
                "not sectors: they show tiling and reuse, not coalescing")


def _declare_triton() -> None:
    """Declare the Triton interpreter's counters (its bytes go to the backend-neutral wb__global_*_bytes totals)."""
    R = register_metric
    R("triton__programs.sum", "Triton programs", "programs launched (the product of each launch's grid): a GPU runs "
      "one per thread block", "enough to fill the GPU (a few per SM), each with a tile worth its launch",
      group="triton", aliases=("programs", "programs launched"))
    for kind, word in (("load", "tl.load"), ("store", "tl.store")):
        R(f"triton__{kind}_calls.sum", f"{word} calls", f"{word} operations executed, one per program per call "
          "whatever the tile's size", "", group="triton")
        R(f"triton__{kind}_elements.sum", f"{word} elements", f"elements {word} asked for: lanes whose mask is on "
          f"(masked-off lanes move nothing). {_NOT_SECTORS}", "close to the elements the op must move",
          better="lower", group="triton")
    R("triton__dot_calls.sum", "tl.dot calls", "tl.dot operations executed (one per program per call)", "",
      group="triton")
    R("triton__dot_flops.sum", "tl.dot FLOPs", "2 x M x N x K of every tl.dot, the whole tile (padding a mask "
      "zeroed is multiplied too, as on a GPU)", "close to the op's FLOPs: more = tiles computed and thrown away",
      better="lower", group="triton", aliases=("dot flops",))
    R("triton__dot_flops_per_load_byte.ratio", "tl.dot FLOPs per loaded byte",
      "tl.dot FLOPs / global bytes loaded: the reuse a kernel's tiling buys (a GEMM with BM x BN output tiles: "
      "2 / (elem x (1/BM + 1/BN)))", "higher: bigger tiles reuse each loaded element more", kind="derived",
      fmt="ratio", better="higher", group="triton",
      compute=lambda m: (m["triton__dot_flops.sum"] / m["wb__global_load_bytes.sum"]
                         if m.get("triton__dot_flops.sum") and m.get("wb__global_load_bytes.sum") else None))


_declare_cuda_and_totals()
_declare_triton()
