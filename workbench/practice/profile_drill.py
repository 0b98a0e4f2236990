"""Profile drills: read a table of one of the workbench's kernels, name the limiter and the change that fixes it.

``d.show()`` displays the table of one kernel: exact counters of an emulated run (``wb.profile``), the compiler's
resource report (``wb.inspect``: registers, spills, occupancy), or a model computed from those and the hardware
tables (waves of thread blocks over the SMs, a tile's arithmetic intensity against the roofline). The learner
answers ``d.submit(limiter="bank conflicts", fix="pad the shared tile")``: the limiter from a fixed vocabulary
(:data:`LIMITERS`), the fix in a few words (:data:`FIXES`), both matched through synonyms. Both must be right. The
feedback names the rows that show it, with this kernel's value and the fixed kernel's, and shows the two tables
side by side; as with concept drills, the answer is shown after any attempt (a failed one is recorded as a reveal).

Every number is computed, never typed: the tables are measured when first shown (a few seconds of emulation or
one ``nvcc``/``ptxas`` run) and kept on disk under the workbench cache (``cache_dir("profile-drills")``), keyed
by the drill's table spec and the text of every source file the numbers depend on. Prose in ``drills.toml``
quotes numbers through placeholders, ``{{this:<row>}}``, ``{{fixed:<row>}}`` and ``{{hw:<field>}}``, filled in
from the tables and :mod:`workbench.hardware`. Hardware facts (SM count, bandwidth, peaks) come from
:mod:`workbench.hardware`; none of these numbers comes from a GPU: each table says it is an emulated count or a
model.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.practice.base import Drill, DrillDataError, Grade

#: The device every profile drill's model uses: the project's reference GPU (tables do not change with the machine).
DEVICE_KEY = "H200"
TABLE_KINDS = ("counters", "resources", "waves", "roofline")
_CACHE_VERSION = "2"


# ------------------------------------------------------------------------------------------------ vocabulary
@dataclass(frozen=True)
class Term:
    """One limiter or fix: its id, the label shown, the phrases that name it, and the ids a match of it absorbs."""

    id: str
    label: str
    phrases: tuple[str, ...]
    absorbs: tuple[str, ...] = ()


def _terms(*rows: tuple) -> dict[str, Term]:
    return {r[0]: Term(r[0], r[1], tuple(r[2]), tuple(r[3]) if len(r) > 3 else ()) for r in rows}


LIMITERS: dict[str, Term] = _terms(
    ("uncoalesced-loads", "uncoalesced loads",
     ["uncoalesced loads", "uncoalesced reads", "uncoalesced global loads", "strided loads", "strided reads",
      "non coalesced loads", "noncoalesced loads", "scattered loads", "poor load coalescing", "load coalescing"]),
    ("uncoalesced-stores", "uncoalesced stores",
     ["uncoalesced stores", "uncoalesced writes", "uncoalesced global stores", "strided stores", "strided writes",
      "non coalesced stores", "noncoalesced stores", "scattered stores", "scattered writes", "store coalescing",
      "poor store coalescing"]),
    ("bank-conflicts", "shared-memory bank conflicts",
     ["bank conflicts", "shared memory bank conflicts", "smem bank conflicts", "shared bank conflicts",
      "bank conflicted"]),
    ("excess-traffic", "excess global traffic (bytes above the compulsory)",
     ["excess global traffic", "excess traffic", "redundant global traffic", "redundant loads", "redundant reads",
      "no data reuse", "no reuse", "poor data reuse", "traffic amplification", "rereads", "re reads",
      "rereading the input", "extra passes", "too many passes", "materialized intermediates",
      "intermediates through global memory", "unfused", "too much global traffic", "extra global traffic"]),
    ("memory-bound", "memory-bound at the roofline",
     ["memory bound at roofline", "memory bound", "bandwidth bound", "memory bandwidth", "dram bandwidth",
      "hbm bandwidth", "memory roofline", "bandwidth limited", "at the memory roof", "dram bound", "hbm bound",
      "bandwidth"]),
    ("compute-bound", "compute-bound",
     ["compute bound", "math bound", "fma bound", "ffma bound", "fp32 throughput", "alu bound", "compute roof",
      "flop bound", "arithmetic bound", "compute limited", "fp32 compute"]),
    ("low-occupancy", "low occupancy",
     ["low occupancy", "occupancy", "register limited occupancy", "occupancy limited by registers",
      "few active warps per sm"]),
    ("too-few-blocks", "too few blocks for the SMs (latency-bound)",
     ["too few blocks", "too few warps", "latency bound", "latency", "grid too small", "small grid",
      "not enough blocks", "not enough parallelism", "idle sms", "underfilled gpu", "under filled gpu",
      "low sm utilization", "too few ctas"]),
    ("register-spills", "register spills",
     ["register spills", "spills", "spilling", "register spilling", "local memory spills", "spill to local memory",
      "local memory traffic"]),
    ("tail-effect", "tail effect (wave quantization)",
     ["tail effect", "wave quantization", "partial wave", "partial last wave", "last wave", "tail"]),
    ("warp-divergence", "warp divergence",
     ["warp divergence", "branch divergence", "divergence", "divergent branches"]),
    ("atomic-contention", "atomic contention", ["atomic contention", "atomics", "serialized atomics"]),
    ("launch-overhead", "kernel launch overhead",
     ["launch overhead", "too many launches", "kernel launch overhead", "too many kernels"]),
)

FIXES: dict[str, Term] = _terms(
    ("shared-tile", "stage the data through a shared-memory tile",
     ["shared memory tile", "shared tile", "smem tile", "tile in shared memory", "stage through shared memory",
      "stage in shared memory", "shared memory tiling", "tiling", "use shared memory", "block tiling",
      "tile a and b in shared memory", "transpose in shared memory"]),
    ("pad-shared", "pad the shared tile (an extra column)",
     ["pad", "padding", "padded", "extra column", "33 columns", "plus one column"], ["shared-tile"]),
    ("swizzle", "swizzle the shared layout (XOR the column)",
     ["swizzle", "swizzled", "swizzling", "xor the column", "xor swizzle"], ["shared-tile"]),
    ("swap-mapping", "map threadIdx.x to consecutive columns",
     ["threadidx x over columns", "threadidx x along columns", "threadidx x to columns", "threadidx x on columns",
      "swap the thread mapping", "swap thread mapping", "swap threadidx", "consecutive threads on consecutive columns",
      "thread mapping", "remap threads", "remap the threads", "swap the indices", "swap row and column"]),
    ("warp-per-row", "a warp (or a block) per row, lanes on consecutive elements",
     ["warp per row", "block per row", "one warp per row", "one block per row", "lanes along the row",
      "threads of a warp share a row"]),
    ("keep-row", "read the row once: keep it in registers (or shared memory)",
     ["keep the row in registers", "row in registers", "row in shared memory", "cache the row", "read the row once",
      "read once", "single pass", "one pass", "hold the row"]),
    ("fuse", "fuse the kernels (the intermediates stay on chip)",
     ["fuse", "fusion", "fused", "one kernel", "single kernel", "kernel fusion", "fused kernel", "fused moe"]),
    ("flash", "FlashAttention: stream K/V tiles with an online softmax",
     ["flash attention", "flashattention", "online softmax", "flash", "fa2", "tile k and v", "stream k v"],
     ["fuse"]),
    ("fewer-bytes", "move fewer bytes: a narrower dtype",
     ["lower precision", "bf16", "fp16", "half precision", "fp8", "quantize", "smaller dtype", "narrower dtype",
      "fewer bytes", "compress"]),
    ("nothing", "nothing inside the kernel: it is at the memory roof",
     ["nothing", "none", "no change", "already optimal", "leave it as is", "already at the roofline"]),
    ("tensor-cores", "use tensor cores (wmma / mma, bf16 or tf32)",
     ["tensor core", "wmma", "mma", "mma sync", "wgmma", "tf32", "hmma"], ["fewer-bytes"]),
    ("cap-registers", "cap registers with __launch_bounds__(threads, min blocks per SM)",
     ["launch bounds", "min blocks per sm", "minblockspersm", "maxrregcount", "cap registers", "cap the registers",
      "limit registers", "fewer registers", "register cap", "reduce registers", "reduce register usage",
      "reduce register pressure", "lower register count"]),
    ("uncap-registers", "remove the register cap (drop the min-blocks bound)",
     ["remove the register cap", "remove launch bounds", "drop the launch bounds", "remove the min blocks",
      "more registers", "raise the register limit", "uncap registers", "allow more registers",
      "remove maxrregcount", "raise maxrregcount", "increase maxrregcount", "increase the register limit",
      "drop min blocks", "drop the min blocks bound"],
     ["cap-registers"]),
    ("smaller-thread-tile", "a smaller per-thread tile (fewer accumulators)",
     ["smaller thread tile", "smaller register tile", "fewer accumulators", "fewer outputs per thread",
      "smaller micro tile", "smaller per thread tile", "smaller warp tile"]),
    ("split-kv", "split the keys over blocks (flash-decoding)",
     ["split kv", "split the keys", "split the kv sequence", "flash decoding", "flashdecoding", "split k v",
      "parallelize over keys", "split sk", "split the sequence"]),
    ("gqa-group", "one block per KV head serving its whole query group (each page read once)",
     ["one block per kv head", "block per kv head", "program per kv head", "group the query heads",
      "share the kv head", "share each page", "gqa grouping", "gqa grouped", "grouped query heads",
      "read each page once", "serve the query group", "whole query group", "query group together"]),
    ("split-k", "split-K (more, smaller work units)",
     ["split k", "splitk", "split the k dimension", "split the reduction"]),
    ("stream-k", "stream-K or a persistent kernel", ["stream k", "streamk", "persistent", "persistent kernel"]),
    ("smaller-tiles", "smaller block tiles (more of them)",
     ["smaller tiles", "smaller block tiles", "smaller tile", "change the tile size", "more tiles"]),
    ("vectorize", "vectorised (16-byte) loads",
     ["float4", "vectorized loads", "vectorize", "128 bit loads", "16 byte loads", "vector loads", "ldg 128"]),
    ("unroll", "unroll the loop", ["unroll", "loop unrolling"]),
    ("double-buffer", "double-buffer / pipeline the loads (cp.async)",
     ["double buffer", "double buffering", "cp async", "pipeline", "prefetch", "software pipelining"]),
    ("bigger-blocks", "more threads per block",
     ["more threads per block", "bigger blocks", "larger block size", "increase block size", "larger blocks"]),
    ("warp-shuffle", "warp shuffles for the reduction", ["warp shuffle", "shfl", "shuffle reduction"]),
)

#: What to say when the limiter named is a near miss of the right one (given, right) -> why not.
NEAR: dict[tuple[str, str], str] = {
    ("memory-bound", "excess-traffic"): "It is memory-bound, but not at the roof: it moves more bytes than the "
                                        "op needs (the traffic amplification row). The excess is the limiter.",
    ("excess-traffic", "memory-bound"): "The traffic amplification is the floor of one: no byte is moved twice.",
    ("low-occupancy", "too-few-blocks"): "Each SM could hold more blocks; there are simply not enough blocks for "
                                         "the SMs (compare the blocks launched with the SM count).",
    ("too-few-blocks", "low-occupancy"): "The grid is not the problem here; what each SM can hold is.",
    ("low-occupancy", "register-spills"): "The occupancy went up; the spill rows show what it cost.",
    ("uncoalesced-loads", "uncoalesced-stores"): "Look at the two sides apart: the loads are fine.",
    ("uncoalesced-stores", "uncoalesced-loads"): "Look at the two sides apart: the stores are fine.",
    ("low-occupancy", "tail-effect"): "Occupancy sets the blocks per wave; the waste is in the last wave.",
    ("compute-bound", "memory-bound"): "The intensity is far below the ridge point: the FLOPs cost nothing here.",
    ("memory-bound", "compute-bound"): "The tile's intensity is above the ridge point: bandwidth is not the bound.",
    ("uncoalesced-loads", "excess-traffic"): "The access rows are not what moves most of the bytes: compare the "
                                             "global bytes with the compulsory bytes.",
    ("uncoalesced-stores", "excess-traffic"): "The access rows are not what moves most of the bytes: compare the "
                                              "global bytes with the compulsory bytes.",
    ("excess-traffic", "uncoalesced-loads"): "The excess bytes are a symptom: look at how many sectors each load "
                                             "request needs.",
    ("excess-traffic", "uncoalesced-stores"): "The excess bytes are a symptom: look at how many sectors each store "
                                              "request needs.",
}

_BRITISH = {"quantisation": "quantization", "utilisation": "utilization", "utilised": "utilized",
            "materialised": "materialized", "vectorised": "vectorized", "vectorise": "vectorize",
            "serialised": "serialized", "optimise": "optimize", "parallelise": "parallelize", "quantise": "quantize"}


#: Words a phrase never needs ("transpose in shared memory" = "shared memory transpose").
_STOP = {"the", "a", "an", "in", "of", "to", "with", "through", "on", "at", "for", "by", "into", "it", "its", "and",
         "or", "is", "are", "be", "s", "this", "that", "each", "per"}
#: Negated words that name the positive term ("stores are not coalesced" = "uncoalesced stores").
_NEGATED = {"coalesced": "uncoalesced", "fused": "unfused"}


def _norm_words(text: str) -> list[str]:
    """Return the words of ``text``: lower case, American spelling, no filler words, a plural 's' dropped."""
    low = re.sub(r"[^a-z0-9]+", " ", text.lower().replace("n't", " not"))
    raw = low.split()
    out = []
    for i, w in enumerate(raw):
        if w == "not" and i + 1 < len(raw) and raw[i + 1] in _NEGATED:
            continue
        if w in _NEGATED and i > 0 and raw[i - 1] == "not":
            w = _NEGATED[w]
        w = _BRITISH.get(w, w)
        if len(w) > 3 and w.endswith("s") and not w.endswith("ss"):
            w = w[:-1]
        w = "sm" if w == "sms" else w
        if w not in _STOP:
            out.append(w)
    return out


def match_terms(text: str, vocab: dict[str, Term]) -> list[str]:
    """Return the ids of the terms ``text`` names: a phrase matches when all its words are in the text.

    A match whose words are a strict subset of another term's matched phrase is dropped ("remove the register cap"
    names uncap-registers, not cap-registers too), and so is every id a matched term absorbs.
    """
    words = set(_norm_words(text))
    found: dict[str, list[frozenset[str]]] = {}
    for t in vocab.values():
        for p in t.phrases:
            pw = frozenset(_norm_words(p))
            if pw and pw <= words:
                found.setdefault(t.id, []).append(pw)
    others = {i: [pw for j, pws in found.items() if j != i for pw in pws] for i in found}
    ids = [i for i, pws in found.items() if not all(any(pw < o for o in others[i]) for pw in pws)]
    absorbed = {a for i in ids for a in vocab[i].absorbs}
    return [i for i in ids if i not in absorbed]


def _vocabulary(vocab: dict[str, Term]) -> str:
    return "; ".join(t.label for t in vocab.values())


# ------------------------------------------------------------------------------------------------ tables
@dataclass
class Column:
    """One kernel's column of a table: its label and its values by row (a number, a text, or None: not counted)."""

    label: str
    values: dict[str, Any]


@dataclass
class Table:
    """A profile drill's table: rows in order, one or more kernel columns, a title and footnotes (what it is)."""

    title: str
    rows: list[str]
    columns: list[Column]
    notes: list[str] = field(default_factory=list)
    launches: list[list[str]] = field(default_factory=list)  # per-launch rows of the first column (kernel, grid, ...)

    def value(self, row: str, column: int = 0) -> Any:
        """Return the raw value of ``row`` in column ``column``; KeyError naming the rows when there is none."""
        if row not in self.rows:
            raise KeyError(f"profile table {self.title!r}: no row {row!r}; rows: {self.rows}")
        return self.columns[column].values.get(row)

    def markdown(self, with_columns: list[Column] | None = None) -> str:
        """Return the table as markdown (``with_columns``: more columns beside this one, e.g. the fixed kernel)."""
        cols = self.columns + list(with_columns or [])
        head = "| row | " + " | ".join(f"`{c.label}`" for c in cols) + " |"
        lines = [f"**{self.title}**", "", head, "|---|" + "---:|" * len(cols)]
        for r in self.rows:
            cells = [fmt_value(r, c.values.get(r)) for c in cols]
            lines.append(f"| {r} | " + " | ".join(cells) + " |")
        if self.launches:
            lines += ["", f"Per launch of `{self.columns[0].label}`:", "",
                      "| kernel | grid | block | global bytes |", "|---|---|---|---:|"]
            lines += ["| " + " | ".join(x) + " |" for x in self.launches]
        return "\n".join(lines + [""] + [f"*{n}*  " for n in self.notes])

    def to_json(self) -> dict:
        """Return the table as JSON-able data (the disk cache)."""
        return {"title": self.title, "rows": self.rows, "notes": self.notes, "launches": self.launches,
                "columns": [{"label": c.label, "values": c.values} for c in self.columns]}

    @classmethod
    def from_json(cls, d: dict) -> Table:
        """Rebuild a table from :meth:`to_json`'s data."""
        return cls(d["title"], list(d["rows"]), [Column(c["label"], dict(c["values"])) for c in d["columns"]],
                   list(d["notes"]), [list(x) for x in d.get("launches", [])])


#: How each row's value is written: a format and a unit ("" for a plain count).
_ROW_FORMAT: dict[str, tuple[str, str]] = {
    "global load efficiency": ("pct", ""), "global store efficiency": ("pct", ""),
    "global bytes": ("bytes", ""), "compulsory bytes": ("bytes", ""), "traffic amplification": ("x", ""),
    "sectors per load request": ("g", ""), "sectors per store request": ("g", ""),
    "wavefronts per shared load request": ("g", ""), "wavefronts per shared store request": ("g", ""),
    "arithmetic intensity (counted bytes)": ("g", " FLOP/B"), "tile intensity (DRAM)": ("g", " FLOP/B"),
    "ridge point": ("g", " FLOP/B"), "modelled time": ("us", ""), "memory bandwidth": ("g", " GB/s"),
    "peak": ("g", " TFLOP/s"), "DRAM-only bound": ("g", " TFLOP/s"), "theoretical occupancy": ("pct", ""),
    "last-wave fill": ("pct", ""), "wave efficiency": ("pct", ""), "SM fill (blocks / SMs)": ("pct", ""),
    "spill stores": ("g", " B"), "spill loads": ("g", " B"), "stack frame": ("g", " B"),
    "static shared memory per block": ("g", " B"), "waves": ("g", ""), "FLOPs": ("g", ""),
}


def fmt_value(row: str, v: Any) -> str:
    """Return ``v`` (the value of ``row``) as the table writes it: '-' when absent, with its unit."""
    if v is None:
        return "-"
    if isinstance(v, str):
        return v
    how, unit = _ROW_FORMAT.get(row, ("count", ""))
    if how == "pct":
        return f"{100 * v:.3g}%"
    if how == "bytes":
        return f"{int(v):,} B"
    if how == "x":
        return f"{v:.3g}x"
    if how == "us":
        return f"{v * 1e6:.3g} µs"
    if how == "g":
        return (f"{v:,.0f}" if float(v).is_integer() and abs(v) < 1e7 else f"{v:.3g}") + unit
    return f"{int(v):,}" if float(v).is_integer() else f"{v:,.4g}"


def device() -> Any:
    """Return the reference device the drills' models use (:data:`DEVICE_KEY` in :mod:`workbench.hardware`)."""
    from workbench import hardware

    return hardware.get_device(DEVICE_KEY)


def _arch() -> str:
    return device().sm


# ----------------------------------------------------------------------------------------------- table spec
@dataclass(frozen=True)
class Kernel:
    """What one column measures: ``op/variant``, optionally compiled with ``__launch_bounds__(threads, min_blocks)``."""

    op: str
    variant: str
    min_blocks: int = 0

    @property
    def label(self) -> str:
        """Return the column's name: the variant, and the launch bound it was compiled with (T: its threads)."""
        if self.min_blocks:
            return f"{self.variant} + __launch_bounds__(T, {self.min_blocks})"
        return self.variant


@dataclass(frozen=True)
class TableSpec:
    """What a drill's table shows: its kind, the kernel, its problem (sizes, dtype) and the fixed kernel."""

    kind: str
    kernel: Kernel
    fixed: Kernel | None
    shape: tuple[tuple[str, Any], ...]
    dtype: str | None = None
    grid: bool = False  # counters: add the blocks-against-SMs rows
    split_k: tuple[int, ...] = ()  # waves: the split-K factors of the fixed columns

    def key(self) -> str:
        """Return the cache key: this spec and the text of every source file the numbers depend on."""
        ident = json.dumps([self.kind, self.kernel.__dict__, self.fixed.__dict__ if self.fixed else None,
                            list(self.shape), self.dtype, self.grid, list(self.split_k), DEVICE_KEY, _CACHE_VERSION],
                           sort_keys=True, default=str)
        h = hashlib.sha256(ident.encode())
        for p in _source_files(self):
            h.update(str(p).encode())
            h.update(p.read_bytes() if p.is_file() else b"<missing>")
        return h.hexdigest()[:32]


def _source_files(spec: TableSpec) -> list[Path]:
    """Return the files whose text decides the table's numbers (kernels, their headers, the counting code)."""
    import workbench
    from workbench.registry import variant

    root = Path(workbench.__file__).resolve().parent
    files = [root / "profile_counters.py", root / "profile_metrics.py", root / "counters.py",
             root / "cuda" / "_cpu.py", root / "cuda" / "_cpu_build.py", root / "cuda" / "_cpu_args.py",
             root / "_triton_interp.py", root / "cuda" / "arch.py", root / "hardware.py", root / "inspection.py",
             root / "ladder.py", Path(__file__).resolve()]
    missing = [f for f in files if not f.is_file()]
    if missing:  # a renamed module would otherwise hash as missing and never refresh a cached table
        raise FileNotFoundError(f"profile drills: the counting code moved; update _source_files ({missing})")
    for k in (spec.kernel, spec.fixed):
        if k is None:
            continue
        for name in _pipeline_variants(k):
            v = variant(*name.split("/"))
            for p in (v.source, v.cu_file):
                if p is not None:
                    p = Path(p)
                    files += [p, *sorted(p.parent.glob("*.cuh"))]
    inc = root.parent / "kernels" / "include"
    files += sorted(inc.glob("*.cuh"))
    ladder = root.parent / "kernels" / spec.kernel.op / "ladder.toml"
    if ladder.is_file():
        files.append(ladder)
    return sorted(set(files))


# ----------------------------------------------------------------------------------------------- pipelines
def _attention_materialised(q: Any, k: Any, v: Any) -> Any:
    """Attention as three of the workbench's kernels: S = QK^T (gemm/cuda_smem), softmax/cuda_warp, O = PV."""
    import workbench as wb

    b, h, s, d = q.shape
    if b != 1 or h != 1:
        raise ValueError(f"attention/materialised: one batch and one head, got B={b}, H={h}")
    gemm, softmax = wb.variant("gemm", "cuda_smem"), wb.variant("softmax", "cuda_warp")
    q_scaled, k_t = q[0, 0] / math.sqrt(d), k[0, 0].T.contiguous()  # prepared by torch: not counted
    scores = gemm(q_scaled, k_t)
    return gemm(softmax(scores), v[0, 0]).view(1, 1, s, -1)


#: Kernels that are a pipeline of the workbench's kernels rather than one registered variant.
PIPELINES: dict[tuple[str, str], tuple[Callable[..., Any], tuple[str, ...]]] = {
    ("attention", "materialised"): (_attention_materialised, ("gemm/cuda_smem", "softmax/cuda_warp")),
}


def _pipeline_variants(k: Kernel) -> tuple[str, ...]:
    if (k.op, k.variant) in PIPELINES:
        return PIPELINES[(k.op, k.variant)][1]
    return (f"{k.op}/{k.variant}",)


def _callable(k: Kernel) -> Any:
    from workbench.registry import variant

    if (k.op, k.variant) in PIPELINES:
        return (k.variant, PIPELINES[(k.op, k.variant)][0])
    return variant(k.op, k.variant)


# ----------------------------------------------------------------------------------------------- measuring
COUNTER_ROWS = ("launches", "blocks launched", "threads launched", "global load requests", "sectors per load request",
                "global load efficiency", "global store requests", "sectors per store request",
                "global store efficiency", "shared load requests", "shared bank conflicts",
                "wavefronts per shared load request", "barriers", "global bytes", "compulsory bytes",
                "traffic amplification", "FLOPs", "arithmetic intensity (counted bytes)", "ridge point",
                "modelled time", "bound (model)")
GRID_ROWS = ("SMs on the device", "SM fill (blocks / SMs)")
_METRIC_KEYS = {
    "global load requests": "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
    "sectors per load request": "l1tex__average_t_sectors_per_request_pipe_lsu_mem_global_op_ld.ratio",
    "global load efficiency": "wb__global_load_efficiency.ratio",
    "global store requests": "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",
    "sectors per store request": "l1tex__average_t_sectors_per_request_pipe_lsu_mem_global_op_st.ratio",
    "global store efficiency": "wb__global_store_efficiency.ratio",
    "shared load requests": "smsp__inst_executed_op_shared_ld.sum",
    "shared bank conflicts": "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum",
    "wavefronts per shared load request": "wb__shared_wavefronts_per_request_op_ld.ratio",
    "barriers": "wb__barriers.sum",
    "global bytes": "wb__global_bytes.sum",
    "threads launched": "wb__threads.sum",
}


def _shape(spec: TableSpec) -> dict[str, Any]:
    return dict(spec.shape)


def _counters_column(spec: TableSpec, k: Kernel) -> tuple[Column, list[list[str]]]:
    """Profile kernel ``k`` once on the drill's problem; return its column and its per-launch rows."""
    from workbench import hardware
    from workbench.counters import counters_table
    from workbench.plots import traffic_model

    shape = _shape(spec)
    if spec.dtype:
        shape["dtype"] = spec.dtype
    t = counters_table(k.op, [_callable(k)], **shape)
    row = t.rows[0]
    if not row.counted:
        raise RuntimeError(f"profile drill table: {k.op}/{k.variant} could not be counted here: {row.note}")
    m = row.profile.metrics
    vals: dict[str, Any] = {name: m.get(key) for name, key in _METRIC_KEYS.items()}
    launches = row.profile.launches
    vals["launches"] = len(launches)
    vals["blocks launched"] = sum(math.prod(r.grid or (1,)) for r in launches)
    vals["compulsory bytes"] = t.compulsory_bytes
    vals["traffic amplification"] = row.amplification
    model = traffic_model(t, device())[0]
    vals["FLOPs"] = model["flops"]
    vals["arithmetic intensity (counted bytes)"] = model["flops"] / model["bytes"] if model["bytes"] else None
    dt = hardware.canonical_dtype(t.dtype)
    vals["ridge point"] = hardware.ridge_point(device(), dt, measured=True)
    vals["modelled time"] = model["time_s"]
    vals["bound (model)"] = model["bound"]
    if spec.grid:
        vals["SMs on the device"] = device().sm_count
        vals["SM fill (blocks / SMs)"] = min(1.0, vals["blocks launched"] / device().sm_count)
    if not vals.get("shared load requests"):
        for r in ("shared load requests", "shared bank conflicts", "wavefronts per shared load request"):
            vals[r] = None
    per = [[r.kernel, _dims(r.grid), _dims(r.block), f"{int(r.metrics.get('wb__global_bytes.sum', 0)):,} B"]
           for r in launches] if len(launches) > 1 else []
    return Column(k.label, vals), per


def _dims(d: tuple[int, ...] | None) -> str:
    return "-" if d is None else "(" + ", ".join(str(x) for x in d) + ")"


def _title(spec: TableSpec, what: str) -> str:
    dims = ", ".join(f"{k}={v}" for k, v in spec.shape)
    dt = f", {spec.dtype}" if spec.dtype else ""
    return f"{spec.kernel.op}({dims}{dt}): {what}"


_COUNTERS_NOTE = ("Emulated, not measured: exact counts of one run on the workbench's emulators (wb.profile; L1-level "
                  "requests and 32-byte sectors, shared wavefronts of the 32-bank model). 'modelled time' and "
                  "'bound (model)' are a model: time >= counted bytes / the {bw} and >= FLOPs / the dtype's peak "
                  "on the {dev}. No cache, latency or issue rate is modelled.")


def measure_counters(spec: TableSpec) -> tuple[Table, Table | None]:
    """Return (the kernel's counters table, the fixed kernel's) for a ``counters`` drill."""
    col, per = _counters_column(spec, spec.kernel)
    rows = list(COUNTER_ROWS) + (list(GRID_ROWS) if spec.grid else [])
    dev = device()
    bw = (f"measured copy bandwidth ({dev.measured_bandwidth_gbs:,.0f} GB/s)" if dev.measured_bandwidth_gbs
          else f"datasheet bandwidth ({dev.bandwidth_gbs:,.0f} GB/s)")
    note = _COUNTERS_NOTE.format(bw=bw, dev=dev.name)
    title = _title(spec, "wb.profile counters (emulated)")
    this = Table(title, rows, [col], [note], per)
    if spec.fixed is None:
        return this, None
    fcol, fper = _counters_column(spec, spec.fixed)
    return this, Table(title, rows, [fcol], [note], fper)


RESOURCE_ROWS = ("registers per thread", "spill stores", "spill loads", "stack frame", "static shared memory per block",
                 "threads per block", "blocks per SM allowed by registers", "blocks per SM allowed by shared memory",
                 "blocks per SM allowed by threads", "blocks per SM", "active warps per SM", "theoretical occupancy",
                 "limited by")


def inspect_kernel(k: Kernel) -> Any:
    """Compile kernel ``k`` for the reference device's architecture with ``wb.inspect`` (no GPU involved).

    ``min_blocks``: the kernel's export line is rewritten to ``__launch_bounds__(threads, min_blocks)`` first (a
    GEMM_EXPORT kernel of kernels/gemm/cu: what a learner would change to cap its registers). Only the reference
    architecture is compiled: the tables show no other.
    """
    from workbench.inspection import inspect
    from workbench.registry import variant

    v = variant(k.op, k.variant)
    spec = v.inspect_spec() if v.inspect_spec is not None else None
    if spec is None or spec.get("kind", "cuda") != "cuda":
        raise ValueError(f"profile drill: {k.op}/{k.variant} has no CUDA C inspect spec (wb.inspect)")
    if k.min_blocks:
        spec = _with_min_blocks(spec, k.min_blocks)
    return inspect(spec, _arch(), occupancy_archs=())  # the tables show no other architecture


def _with_min_blocks(spec: dict, min_blocks: int) -> dict:
    path = Path(spec["code"])
    text = path.read_text()
    m = re.search(r"^GEMM_EXPORT\((\w+), (\w+), (\d+)\)\s*$", text, re.M)
    if m is None:
        raise ValueError(f"profile drill: {path.name} has no GEMM_EXPORT(name, body, threads) line to add "
                         "__launch_bounds__(threads, min_blocks) to")
    name, body, threads = m.groups()
    line = (f'extern "C" __global__ void __launch_bounds__({threads}, {min_blocks}) {name}_f32(const float* a, '
            f"const float* b, float* c, int M, int N, int K, int vec) {{ {body}<float>(a, b, c, M, N, K, vec != 0); }}")
    return {**spec, "code": text[:m.start()] + line + text[m.end():],
            "options": tuple(spec.get("options") or ()) + (f"-I{path.parent}",)}


def _resources_column(k: Kernel) -> Column:
    ins = inspect_kernel(k)
    o = ins.occupancy[_arch()]
    lim = o["block_limits"]
    vals = {"registers per thread": ins.registers, "spill stores": ins.spill_stores, "spill loads": ins.spill_loads,
            "stack frame": ins.stack, "static shared memory per block": ins.shared_static,
            "threads per block": ins.threads_per_block, "blocks per SM allowed by registers": lim["registers"],
            "blocks per SM allowed by shared memory": lim["shared memory"],
            "blocks per SM allowed by threads": lim["threads"], "blocks per SM": o["blocks_per_sm"],
            "active warps per SM": f"{o['active_warps_per_sm']} of {o['max_warps_per_sm']}",
            "theoretical occupancy": o["occupancy"], "limited by": ", ".join(o["limited_by"])}
    label = f"{k.variant} + __launch_bounds__({ins.threads_per_block}, {k.min_blocks})" if k.min_blocks else k.label
    return Column(label, vals)


def measure_resources(spec: TableSpec) -> tuple[Table, Table | None]:
    """Return (the kernel's resource table, the fixed kernel's) for a ``resources`` drill (ptxas -v, occupancy)."""
    title = (f"{spec.kernel.op}: what ptxas made of it for {_arch()} ({device().name}), and the theoretical occupancy "
             "(wb.inspect)")
    note = ("Computed here without a GPU: nvcc and ptxas -v report the registers, spills and shared memory; the "
            "occupancy follows from the per-SM limits of workbench.cuda.arch (the CUDA Occupancy Calculator's rules).")
    this = Table(title, list(RESOURCE_ROWS), [_resources_column(spec.kernel)], [note])
    fixed = None if spec.fixed is None else Table(title, list(RESOURCE_ROWS), [_resources_column(spec.fixed)], [note])
    return this, fixed


def rung_tile(op: str, name: str) -> tuple[int, int, str]:
    """Return (BM, BN, dtype) of variant ``name``'s rung in ``kernels/<op>/ladder.toml``."""
    from workbench.ladder import load_ladder

    rungs, _ = load_ladder(op)
    for r in rungs:
        if r.variant == name:
            return r.bm, r.bn, r.dtype
    raise KeyError(f"profile drill: {op}/{name} has no rung in kernels/{op}/ladder.toml (its tile BM x BN)")


WAVE_ROWS = ("problem (M x N)", "block tile (BM x BN)", "split-K", "work units (blocks)", "SMs on the device",
             "blocks per SM", "blocks per wave", "waves", "blocks in the last wave", "last-wave fill",
             "wave efficiency")


def waves(units: int, per_wave: int) -> dict[str, Any]:
    """Return the wave figures of ``units`` equal blocks over ``per_wave`` concurrent slots."""
    n = -(-units // per_wave)
    last = units - (n - 1) * per_wave
    return {"waves": n, "blocks in the last wave": last, "last-wave fill": last / per_wave,
            "wave efficiency": units / (n * per_wave)}


def _waves_column(spec: TableSpec, split: int) -> Column:
    k = spec.kernel
    bm, bn, _ = rung_tile(k.op, k.variant)
    shape = _shape(spec)
    m, n = int(shape["M"]), int(shape["N"])
    per_sm = inspect_kernel(k).occupancy[_arch()]["blocks_per_sm"]
    sms = device().sm_count
    units = -(-m // bm) * -(-n // bn) * split
    vals = {"problem (M x N)": f"{m} x {n}", "block tile (BM x BN)": f"{bm} x {bn}", "split-K": split,
            "work units (blocks)": units, "SMs on the device": sms, "blocks per SM": per_sm,
            "blocks per wave": sms * per_sm, **waves(units, sms * per_sm)}
    return Column(k.variant if split == 1 else f"{k.variant}, split-K {split}", vals)


def measure_waves(spec: TableSpec) -> tuple[Table, Table | None]:
    """Return (the kernel's waves table, the split-K alternatives') for a ``waves`` drill (a model)."""
    title = (f"{spec.kernel.op}/{spec.kernel.variant} on the {device().name}: thread blocks in waves over the SMs "
             "(a model)")
    note = ("A model, not a measurement: every block takes the same time, a wave is the blocks the SMs hold at once "
            "(SM count from workbench.hardware, blocks per SM from wb.inspect's occupancy), and a split-K block "
            "does 1/split of the K loop (its partial sums still have to be added: not counted here).")
    this = Table(title, list(WAVE_ROWS), [_waves_column(spec, 1)], [note])
    if not spec.split_k:
        return this, None
    return this, Table(title, list(WAVE_ROWS), [_waves_column(spec, s) for s in spec.split_k], [note])


ROOF_ROWS = ("block tile (BM x BN)", "input dtype", "tile intensity (DRAM)", "memory bandwidth", "peak",
             "ridge point", "DRAM-only bound", "bound (model)")


def _roof_column(k: Kernel) -> Column:
    from workbench import hardware
    from workbench.ladder import elem_bytes, tile_intensity

    bm, bn, dt = rung_tile(k.op, k.variant)
    dev = device()
    intensity = tile_intensity(bm, bn, elem_bytes(dt))
    bw, peak = hardware.peak_bandwidth(dev), hardware.peak_tflops(dev, dt)
    ridge = hardware.ridge_point(dev, dt)
    unit = "tensor cores" if dt in ("float16", "bfloat16") else "CUDA cores, FFMA"
    return Column(k.variant, {"block tile (BM x BN)": f"{bm} x {bn}", "input dtype": f"{dt} ({unit})",
                              "tile intensity (DRAM)": intensity, "memory bandwidth": bw, "peak": peak,
                              "ridge point": ridge, "DRAM-only bound": min(peak, intensity * bw / 1e3),
                              "bound (model)": "compute" if intensity >= ridge else "memory"})


def measure_roofline(spec: TableSpec) -> tuple[Table, Table | None]:
    """Return (the kernel's tile-roofline table, the fixed kernel's) for a ``roofline`` drill (a model)."""
    dev = device()
    title = f"{spec.kernel.op}: each rung's output tile against the {dev.name} roofline (a model)"
    note = ("A model, not a measurement: a BM x BN tile streams (BM + BN) x K elements for 2 BM BN K FLOPs "
            "(workbench.ladder.tile_intensity, no L2 hit assumed); bandwidth and the dense peak of the input dtype "
            "are the device's datasheet figures (workbench.hardware).")
    this = Table(title, list(ROOF_ROWS), [_roof_column(spec.kernel)], [note])
    fixed = None if spec.fixed is None else Table(title, list(ROOF_ROWS), [_roof_column(spec.fixed)], [note])
    return this, fixed


MEASURE: dict[str, Callable[[TableSpec], tuple[Table, Table | None]]] = {
    "counters": measure_counters, "resources": measure_resources, "waves": measure_waves,
    "roofline": measure_roofline}

_MEMO: dict[str, tuple[Table, Table | None]] = {}


def tables(spec: TableSpec, use_disk: bool = True) -> tuple[Table, Table | None]:
    """Return (this kernel's table, the fixed one's): from memory, the disk cache, or measured now (and kept)."""
    key = spec.key()
    if key in _MEMO:
        return _MEMO[key]
    path = None
    if use_disk:
        from workbench.cuda.toolchain import cache_dir

        path = cache_dir("profile-drills") / f"{key}.json"
        if path.is_file():
            try:
                d = json.loads(path.read_text())
                out = (Table.from_json(d["this"]), Table.from_json(d["fixed"]) if d["fixed"] else None)
                _MEMO[key] = out
                return out
            except (ValueError, KeyError, TypeError):
                pass  # a damaged entry is measured again
    from workbench._mode import MODE

    if spec.kind == "counters" and MODE != "cpu":
        out = _measure_in_cpu_mode(spec)  # gpu mode: wb.profile would run ncu; the drills show the emulated counts
        _MEMO[key] = out
        return out
    out = MEASURE[spec.kind](spec)
    _MEMO[key] = out
    if use_disk:
        _store(spec, out)
    return out


def _store(spec: TableSpec, out: tuple[Table, Table | None]) -> None:
    """Write a spec's tables to the disk cache (atomically: a reader never sees half a file)."""
    from workbench.cuda.toolchain import cache_dir

    path = cache_dir("profile-drills") / f"{spec.key()}.json"
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"this": out[0].to_json(), "fixed": out[1].to_json() if out[1] else None}))
    tmp.replace(path)


_CHILD = """
import json, sys
from workbench.practice import profile_drill as pd
spec = pd.spec_from_json(json.loads(sys.argv[1]))
this, fixed = pd.tables(spec, use_disk=False)
print(json.dumps({"this": this.to_json(), "fixed": fixed.to_json() if fixed else None}))
"""


def spec_to_json(spec: TableSpec) -> dict:
    """Return ``spec`` as JSON-able data (what a child process in cpu mode measures)."""
    return {"kind": spec.kind, "kernel": spec.kernel.__dict__, "fixed": spec.fixed.__dict__ if spec.fixed else None,
            "shape": [list(x) for x in spec.shape], "dtype": spec.dtype, "grid": spec.grid,
            "split_k": list(spec.split_k)}


def spec_from_json(d: dict) -> TableSpec:
    """Rebuild a :class:`TableSpec` from :func:`spec_to_json`'s data."""
    return TableSpec(d["kind"], Kernel(**d["kernel"]), Kernel(**d["fixed"]) if d["fixed"] else None,
                     tuple((k, v) for k, v in d["shape"]), d["dtype"], d["grid"], tuple(d["split_k"]))


def _measure_in_cpu_mode(spec: TableSpec) -> tuple[Table, Table | None]:
    """Measure a counters table in a child Python in cpu mode (the emulators' counts; this process runs on a GPU)."""
    import subprocess
    import sys

    import workbench

    root = str(Path(workbench.__file__).resolve().parent.parent)
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_ENABLE_CUDASIM", "TRITON_INTERPRET")}
    env.update(WORKBENCH_MODE="cpu", PYTHONPATH=root + os.pathsep + env.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(spec_to_json(spec))], capture_output=True,
                       text=True, env=env, cwd=root, timeout=900)
    if r.returncode != 0:
        raise RuntimeError(f"profile drill: measuring {spec.kernel.op}/{spec.kernel.variant} in cpu mode failed:\n"
                           f"{r.stderr[-3000:]}")
    d = json.loads(r.stdout.strip().splitlines()[-1])
    out = (Table.from_json(d["this"]), Table.from_json(d["fixed"]) if d["fixed"] else None)
    _store(spec, out)
    return out


# ----------------------------------------------------------------------------------------------- prose
_PLACE = re.compile(r"\{\{\s*(this|fixed|hw|wb)\s*:\s*([^{}]+?)\s*\}\}")


def _model_facts() -> dict[str, int]:
    """Return the counting model's facts prose may quote: ``{{wb:banks}}``, ``{{wb:sector}}`` (bytes)."""
    from workbench.access_picture import BANKS, SECTOR

    return {"banks": BANKS, "sector": SECTOR}


def fill(text: str, this: Table, fixed: Table | None, where: str = "") -> str:
    """Return ``text`` with ``{{this:<row>}}``, ``{{fixed:<row>}}``, ``{{hw:<field>}}``, ``{{wb:<fact>}}`` filled in.

    ``{{fixed:<row>}}`` takes the fixed table's first column (``{{fixed:<row>@2}}`` its second).
    """
    def one(m: re.Match) -> str:
        src, name = m.group(1), m.group(2)
        if src == "wb":
            facts = _model_facts()
            if name not in facts:
                raise DrillDataError(f"{where}: {{{{wb:{name}}}}}: the model's facts are {sorted(facts)}")
            return str(facts[name])
        if src == "hw":
            if not hasattr(device(), name):
                raise DrillDataError(f"{where}: {{{{hw:{name}}}}} is not a field of workbench.hardware.DeviceSpec")
            v = getattr(device(), name)
            return f"{v:,}" if isinstance(v, (int, float)) else str(v)
        table = this if src == "this" else fixed
        if table is None:
            raise DrillDataError(f"{where}: {{{{fixed:...}}}} in a drill without a fixed table")
        col = 0
        if "@" in name:
            name, c = name.rsplit("@", 1)
            col = int(c) - 1
        try:
            return fmt_value(name, table.value(name, col))
        except (KeyError, IndexError) as e:
            raise DrillDataError(f"{where}: placeholder {m.group(0)}: {e}") from None

    return _PLACE.sub(one, text)


# ----------------------------------------------------------------------------------------------- the drill
@dataclass(eq=False, repr=False)
class ProfileDrill(Drill):
    """Read a table of one of the workbench's kernels: ``d.submit(limiter="...", fix="...")``."""

    spec: TableSpec | None = None
    limiter: str = ""  # a LIMITERS id
    fixes: tuple[str, ...] = ()  # FIXES ids, any of which fixes it
    compatible: tuple[str, ...] = ()  # FIXES ids that may be named beside an accepted one
    evidence: tuple[str, ...] = ()  # the rows that show the limiter
    context: str = ""  # markdown above the table ({{...}} placeholders allowed)
    why: str = ""  # markdown: the explanation shown after an attempt

    # -------------------------------------------------------------- tables
    def tables(self) -> tuple[Table, Table | None]:
        """Return (this kernel's table, the fixed kernel's table or None), measured once and cached on disk."""
        assert self.spec is not None
        return tables(self.spec)

    def statement(self) -> str:
        this, fixed = self.tables()
        ctx = fill(self.context, this, fixed, self.id)
        return (f"{ctx}\n\n{this.markdown()}\n\nWhat limits this kernel, and what one change fixes it? Limiters: "
                f"{_vocabulary(LIMITERS)}.")

    def answer_format(self) -> str:
        return ('`d.submit(limiter="...", fix="...")`: the limiter from the list above (synonyms are fine), the fix '
                'in a few words (e.g. "unroll the loop"); or a dict with those two keys.')

    # -------------------------------------------------------------- grading
    def submit(self, answer: Any = None, *, limiter: str | None = None, fix: str | None = None) -> Any:
        """Grade the limiter and the fix (``d.submit(limiter=..., fix=...)`` or a dict); the answer follows."""
        from workbench.practice import store

        if answer is None:
            answer = {"limiter": limiter, "fix": fix}
        elif limiter is not None or fix is not None:
            raise TypeError(f"drill {self.id}: pass either a dict or limiter=/fix=, not both")
        seen = self._answer_seen
        res = super().submit(answer)
        if not res.passed and not seen:
            self._answer_seen = True  # the answer and the fixed table are in the feedback
            store.record(self, "reveal", answer="shown after a failed attempt")
        return res

    def _parse(self, answer: Any) -> tuple[str, list[str], str, str]:
        if isinstance(answer, (tuple, list)) and len(answer) == 2:
            answer = {"limiter": answer[0], "fix": answer[1]}
        if not isinstance(answer, dict) or set(answer) != {"limiter", "fix"}:
            raise TypeError(f"drill {self.id}: answer with d.submit(limiter=\"...\", fix=\"...\") (or a dict with "
                            f"keys 'limiter' and 'fix'), got {answer!r}"[:300])
        lim_text, fix_text = answer["limiter"], answer["fix"]
        for name, v in (("limiter", lim_text), ("fix", fix_text)):
            if not isinstance(v, str) or not v.strip():
                raise TypeError(f"drill {self.id}: {name}= takes a few words (a non-empty str), got {v!r}")
            if "not" in _norm_words(v):
                raise ValueError(f"drill {self.id}: name the {name} you mean, not what it is not ({v!r})")
        lims = match_terms(lim_text, LIMITERS)
        if len(lims) != 1:
            what = "names no limiter I know" if not lims else f"names {len(lims)} limiters ({', '.join(lims)})"
            raise ValueError(f"drill {self.id}: limiter={lim_text!r} {what}; name one of: {_vocabulary(LIMITERS)}")
        fixes = match_terms(fix_text, FIXES)
        if not fixes:
            raise ValueError(f"drill {self.id}: fix={fix_text!r} names no change I know; say it in a few words, "
                             f"e.g. one of: {_vocabulary(FIXES)}")
        return lims[0], fixes, lim_text.strip(), fix_text.strip()

    def _grade(self, answer: Any) -> Grade:
        lim, fixes, lim_text, fix_text = self._parse(answer)
        lim_ok = lim == self.limiter
        named = [f for f in fixes if f in self.fixes]
        extra = [f for f in fixes if f not in self.fixes and f not in self.compatible]
        fix_ok = bool(named) and not extra
        head = []
        if lim_ok:
            head.append(f"Limiter: right, {LIMITERS[lim].label}.")
        else:
            near = NEAR.get((lim, self.limiter), "")
            head.append(f"Limiter: not {LIMITERS[lim].label}. {near}".rstrip())
        if fix_ok:
            head.append(f"Fix: right, {FIXES[named[0]].label}.")
        elif named:
            head.append(f"Fix: {FIXES[named[0]].label} is right, but your answer also names "
                        + ", ".join(FIXES[f].label for f in extra) + ", which does not fix this: name one change.")
        else:
            head.append("Fix: " + ", ".join(FIXES[f].label for f in fixes) + " does not fix this limiter.")
        ok = lim_ok and fix_ok
        verdict = "Right." if ok else "Not yet: both the limiter and the fix must be right."
        fb = f"{verdict}\n\n" + "\n".join(f"- {h}" for h in head) + f"\n\n{self.explanation()}"
        return Grade(ok, fb, f"limiter {lim} ({lim_text[:60]}); fix {'+'.join(fixes)} ({fix_text[:60]})",
                     {"limiter": lim, "fixes": fixes, "limiter_ok": lim_ok, "fix_ok": fix_ok})

    def model_answer(self) -> dict[str, str]:
        return {"limiter": LIMITERS[self.limiter].label, "fix": FIXES[self.fixes[0]].label}

    def evidence_lines(self) -> list[str]:
        """Return one line per evidence row: its value here and in the fixed kernel."""
        this, fixed = self.tables()
        out = []
        for r in self.evidence:
            line = f"**{r}**: {fmt_value(r, this.value(r))} in `{this.columns[0].label}`"
            if fixed is not None:
                line += "; " + ", ".join(f"{fmt_value(r, c.values.get(r))} in `{c.label}`" for c in fixed.columns)
            out.append(line)
        return out

    def explanation(self) -> str:
        this, fixed = self.tables()
        fixes = "; or ".join(FIXES[f].label for f in self.fixes)
        parts = [f"**The limiter:** {LIMITERS[self.limiter].label}. **The fix:** {fixes}.",
                 "Where the table shows it:\n\n" + "\n".join(f"- {x}" for x in self.evidence_lines()),
                 fill(self.why, this, fixed, self.id)]
        if fixed is not None:
            parts.append(this.markdown(with_columns=fixed.columns))
        return "\n\n".join(parts)


# ----------------------------------------------------------------------------------------------- loading
REQUIRED = {"table": str, "variant": str, "limiter": str, "fixes": list, "evidence": list, "context": str,
            "why": str}
OPTIONAL = {"shape": dict, "dtype": str, "fixed": str, "min_blocks": int, "fixed_min_blocks": int, "grid": bool,
            "split_k": list, "compatible": list}


def _ids(where: str, key: str, items: list, vocab: dict[str, Term]) -> tuple[str, ...]:
    bad = [x for x in items if not isinstance(x, str) or x not in vocab]
    if bad or not items and key != "compatible":
        raise DrillDataError(f"{where}: {key!r} takes ids of {sorted(vocab)}; got {bad or items!r}")
    return tuple(items)


def _spec(where: str, raw: dict, op: str) -> TableSpec:
    kind = raw["table"]
    if kind not in TABLE_KINDS:
        raise DrillDataError(f"{where}: table must be one of {list(TABLE_KINDS)}, got {kind!r}")
    kernel = Kernel(op, raw["variant"], int(raw.get("min_blocks", 0)))
    fixed = None
    if "fixed" in raw:
        fixed = Kernel(op, raw["fixed"], int(raw.get("fixed_min_blocks", 0)))
    split = raw.get("split_k", [])
    if kind == "waves" and (not split or not all(isinstance(s, int) and s > 1 for s in split)):
        raise DrillDataError(f"{where}: a waves table needs split_k = [factors > 1] for its fixed columns")
    shape = raw.get("shape", {})
    if kind in ("counters", "waves") and not shape:
        raise DrillDataError(f"{where}: a {kind} table needs shape = {{...}} (the problem it is measured on)")
    if kind in ("resources", "roofline") and fixed is None:
        raise DrillDataError(f"{where}: a {kind} table needs fixed = '<variant>' (the table shown after the attempt)")
    return TableSpec(kind, kernel, fixed, tuple(shape.items()), raw.get("dtype"), bool(raw.get("grid", False)),
                     tuple(split))


def build(where: str, raw: dict, common: dict) -> ProfileDrill:
    """Return the ProfileDrill of one ``[[drill]]`` table (types already checked); DrillDataError on bad values."""
    from workbench.registry import variant

    spec = _spec(where, raw, common["op"])
    for k in (spec.kernel, spec.fixed):
        if k is not None and (k.op, k.variant) not in PIPELINES:
            try:
                variant(k.op, k.variant)
            except Exception as e:  # noqa: BLE001  (the registry's message names the variants)
                raise DrillDataError(f"{where}: {e}") from None
    limiter = raw["limiter"]
    if limiter not in LIMITERS:
        raise DrillDataError(f"{where}: limiter must be an id of {sorted(LIMITERS)}, got {limiter!r}")
    rows = {"counters": COUNTER_ROWS + (GRID_ROWS if spec.grid else ()), "resources": RESOURCE_ROWS,
            "waves": WAVE_ROWS, "roofline": ROOF_ROWS}[spec.kind]
    bad = [r for r in raw["evidence"] if r not in rows]
    if bad or not raw["evidence"]:
        raise DrillDataError(f"{where}: evidence names rows of the {spec.kind} table {list(rows)}; got {bad or '[]'}")
    if not common["hints"]:
        raise DrillDataError(f"{where}: a profile drill needs hints")
    return ProfileDrill(**common, spec=spec, limiter=limiter, fixes=_ids(where, "fixes", raw["fixes"], FIXES),
                        compatible=_ids(where, "compatible", raw.get("compatible", []), FIXES),
                        evidence=tuple(raw["evidence"]), context=raw["context"].strip(), why=raw["why"].strip())
