"""Turn the records of a checked CPU-engine launch into compute-sanitizer-like errors.

A checked launch (``RawKernel(..., checked=True)``, or any launch while :func:`workbench._sanitize.sanitizing`
is on) runs four tools at once and raises the first that found something, in this order (synccheck comes right
after memcheck, since a misused barrier makes races of its own):

* memcheck -> :class:`MemcheckError`: out-of-bounds or misaligned accesses through a kernel's pointer
  parameters (global memory) and accesses outside the block's static or dynamic shared memory;
* racecheck -> :class:`RaceError`: RAW/WAR/WAW hazards on shared memory (two threads of a block, same byte,
  no barrier between, one writes, neither atomic; lanes of a warp unless a warp collective separates them) and
  on global memory (the same, plus any two threads of different blocks);
* initcheck -> :class:`UninitializedError`: shared memory read before the block wrote it;
* synccheck -> :class:`SynccheckError`: a ``__syncthreads()`` that only part of the block reached (the others
  exited), a ``*_sync`` warp collective whose mask names lanes that exited, that leaves out the calling lane, or
  whose lanes are at different calls (not converged), and barriers no thread can get past (a deadlock).

Every error carries ``records`` (dicts, see :func:`record_dict`), ``total`` and ``reports`` (all four tools:
``{tool: (records, total)}``). Source lines come from the module's debug info via ``addr2line``.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from functools import lru_cache
from pathlib import Path
from typing import Any

from workbench.cuda._elf import is_internal_tls
from workbench.cuda.errors import MemcheckError, RaceError, SanitizerError, SynccheckError, UninitializedError

TOOLS = ("memcheck", "racecheck", "initcheck", "synccheck")
ERRORS: dict[str, type[SanitizerError]] = {"memcheck": MemcheckError, "racecheck": RaceError,
                                           "initcheck": UninitializedError, "synccheck": SynccheckError}
# A misused barrier makes races of its own: synccheck's finding is raised before racecheck's.
_RAISE_ORDER = ("memcheck", "synccheck", "racecheck", "initcheck")
# The runtime's SYNC_* kinds.
_SYNC_KINDS = {0: "partial barrier", 1: "exited lane", 2: "invalid mask", 3: "divergent warp", 4: "deadlock",
               5: "mask mismatch"}
_KINDS = {0: "read", 1: "write", 2: "access", 3: "misaligned access", 4: "wild access"}
_HAZARDS = {0: "RAW", 1: "WAR", 2: "WAW"}
_SPACES = {0: "global", 1: "shared", 2: "shared"}
_INCLUDE_DIR = str(Path(__file__).resolve().parent / "include")


# ----------------------------------------------------------------------------------------------- source lines
def _addr2line() -> str | None:
    return shutil.which("addr2line") or shutil.which("llvm-addr2line")


def _pick_frame(frames: list[tuple[str, str]]) -> tuple[str | None, int | None, str | None]:
    """Return (file, line, function) of the innermost frame in the user's code (not the engine's headers).

    The function is what addr2line names, which for inlined kernels can be the engine's wrapper: not reported.
    """
    good = [(fn, loc) for fn, loc in frames if not loc.startswith("??")]
    user = [(fn, loc) for fn, loc in good if not loc.startswith(_INCLUDE_DIR)]
    for fn, loc in user or good:
        loc = loc.split(" (discriminator")[0]
        path, _, line = loc.rpartition(":")
        return path or None, int(line) if line.isdigit() and int(line) > 0 else None, fn
    return None, None, None


@lru_cache(maxsize=64)
def _resolve_cached(so: str, pcs: tuple[int, ...]) -> dict[int, tuple[str | None, int | None, str | None]]:
    exe = _addr2line()
    out: dict[int, tuple[str | None, int | None, str | None]] = {pc: (None, None, None) for pc in pcs}
    if not exe or not pcs:
        return out
    try:
        r = subprocess.run([exe, "-C", "-f", "-i", "-a", "-e", so, *(hex(max(pc - 1, 0)) for pc in pcs)],
                           capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return out
    blocks: list[list[str]] = []
    for ln in r.stdout.splitlines():
        if ln.startswith("0x"):
            blocks.append([])
        elif blocks:
            blocks[-1].append(ln)
    for pc, lines in zip(pcs, blocks, strict=False):
        frames = [(lines[i], lines[i + 1]) for i in range(0, len(lines) - 1, 2)]
        out[pc] = _pick_frame(frames)
    return out


def resolve(so: str, pcs: set[int]) -> dict[int, tuple[str | None, int | None, str | None]]:
    """Return {pc: (file, line, function)} for module offsets ``pcs`` of the module at ``so``."""
    return _resolve_cached(so, tuple(sorted(p for p in pcs if p)))


@lru_cache(maxsize=4096)
def demangle(name: str) -> str:
    """Return the demangled ``name`` (c++filt), or a best effort when c++filt is missing."""
    exe = shutil.which("c++filt")
    if exe:
        try:
            r = subprocess.run([exe, name], capture_output=True, text=True, timeout=30)
            if r.returncode == 0 and r.stdout.strip():
                return r.stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            pass
    m = re.match(r"_ZZ(\d+)(\w+?)E(\d+)(\w+)", name)
    if m and len(m.group(2)) == int(m.group(1)):
        return f"{m.group(2)}::{m.group(4)[:int(m.group(3))]}"
    return name


# ----------------------------------------------------------------------------------------------- records
def _where(r: Any, prefix: str = "") -> tuple[tuple[int, ...], tuple[int, ...]]:
    return tuple(getattr(r, prefix + "block")), tuple(getattr(r, prefix + "thread"))


def _variable(module: Any, space: int, offset: int, nearest: bool = False) -> tuple[str | None, int | None,
                                                                                 int | None]:
    """Return (variable, offset in it, its bytes) for a shared-memory offset.

    Static shared memory: the ``__shared__`` variable holding the byte, or with ``nearest`` (an out-of-bounds
    access) the one just before it (or the first one). Dynamic: the ``extern __shared__`` name and the window.
    """
    if space == 2:
        names = module.extern_shared_names
        return (names[0] if len(names) == 1 else "extern __shared__"), offset, None
    tls_off = module.static_window[0] + offset
    vs = sorted((s for s in (module.image.tls if module.image else ()) if s.size and not is_internal_tls(s.name)),
                key=lambda s: s.value)
    hit = next((s for s in vs if s.value <= tls_off < s.value + s.size), None)
    if hit is None and nearest and vs:
        before = [s for s in vs if s.value + s.size <= tls_off]
        hit = before[-1] if before else vs[0]
    if hit is None:
        return None, None, None
    return demangle(hit.name).split("::")[-1], tls_off - hit.value, hit.size


def _warp(thread: tuple[int, ...], bdim: tuple[int, int, int]) -> int:
    return (thread[0] + bdim[0] * (thread[1] + bdim[1] * thread[2])) // 32


def _lanes(bits: int) -> list[int]:
    return [i for i in range(32) if bits >> i & 1]


def sync_record(r: Any, info: Any, lines: dict) -> dict:
    """Return a synccheck record: kind, block, thread, line, file (the call reported), mask and lanes, other."""
    block, thread = _where(r)
    file, line, _ = lines.get(r.pc, (None, None, None))
    kind = _SYNC_KINDS.get(r.kind, "barrier")
    d: dict[str, Any] = {"tool": "synccheck", "kind": kind, "block": block, "thread": thread, "line": line,
                         "file": file, "kernel": info.name, "count": int(r.count)}
    if kind == "partial barrier":
        d["exited"] = int(r.size)
    elif kind == "deadlock":
        d["waiting_at_barrier"] = int(r.size)
    else:
        d["mask"] = int(r.offset) & 0xFFFFFFFF
        d["lanes"] = _lanes(int(r.size))
    d["other"] = None
    if r.prev_write:  # another thread is involved: the one that exited, or the lane at another call
        ofile, oline, _ = lines.get(r.prev_pc, (None, None, None)) if r.prev_pc else (None, None, None)
        d["other"] = {"thread": tuple(r.prev_thread), "line": oline, "file": ofile}
    return d


def record_dict(r: Any, module: Any, info: Any, lines: dict, bdim: tuple[int, int, int] = (1, 1, 1)) -> dict:
    """Return one runtime record as a dict with stable keys (see the module docstring of workbench.cuda)."""
    tool = TOOLS[r.tool]
    if tool == "synccheck":
        return sync_record(r, info, lines)
    block, thread = _where(r)
    file, line, _ = lines.get(r.pc, (None, None, None))
    d: dict[str, Any] = {"tool": tool, "space": _SPACES.get(r.space, "global"), "offset": int(r.offset),
                         "size": int(r.size), "block": block, "thread": thread, "line": line, "file": file,
                         "kernel": info.name}
    if r.space == 0:
        idx = int(r.param)
        d["param_index"] = idx
        d["param"] = (info.params[idx].name if 0 <= idx < len(info.params) else f"#{idx}") if idx >= 0 else None
        d["buffer_bytes"] = int(r.window)
    else:
        d["window"] = "static" if r.space == 1 else "dynamic"
        d["buffer_bytes"] = int(r.window)
        d["variable"], d["variable_offset"], d["variable_bytes"] = _variable(module, r.space, int(r.offset),
                                                                             nearest=tool == "memcheck")
    if tool == "memcheck":
        d["kind"] = _KINDS.get(r.kind, "access")
    elif tool == "racecheck":
        d["hazard"] = _HAZARDS.get(r.kind, "RAW")
        pfile, pline, _ = lines.get(r.prev_pc, (None, None, None))
        pblock, pthread = _where(r, "prev_")
        d["first"] = {"block": pblock, "thread": pthread, "warp": _warp(pthread, bdim), "line": pline,
                      "file": pfile, "access": "write" if r.prev_write else "read"}
        d["second"] = {"block": block, "thread": thread, "warp": _warp(thread, bdim), "line": line, "file": file,
                       "access": "write" if r.write else "read"}
    if tool != "memcheck":
        d["count"] = int(r.count)
    return d


# ----------------------------------------------------------------------------------------------- messages
def _loc(file: str | None, line: int | None) -> str:
    if not line:
        return "an unknown line"
    return f"{Path(file).name if file and not file.startswith('<') else (file or '?')}:{line}"


def _coords(v: tuple[int, ...]) -> str:
    return "(" + ",".join(str(x) for x in v) + ")"


def _shared_what(r: dict) -> str:
    var = r.get("variable")
    if var and r.get("window") == "static":
        return f"__shared__ {var} (byte {r['variable_offset']} of its {r['variable_bytes']})"
    if var:
        return f"extern __shared__ {var} (byte {r['offset']} of the launch's {r['buffer_bytes']})"
    return f"{r['window']} shared memory (byte {r['offset']} of {r['buffer_bytes']})"


def _memcheck_line(r: dict) -> str:
    off, nb, kind = r["offset"], r["buffer_bytes"], r["kind"]
    if kind == "wild access":
        where = f"address {off:#x}" if off else "an address no memory can have"
        return (f"  Invalid access to {where}, far from every buffer of the launch (a segmentation fault on the "
                f"CPU, stopped)\n      by thread {r['thread']} in block {r['block']} at {_loc(r['file'], r['line'])}")
    rel = (f"at byte offset {off}, not a multiple of {r['size']}" if kind == "misaligned access" else
           f"{off - nb} bytes after the end" if off >= nb else f"{-off} bytes before the start" if off < 0
           else f"at byte offset {off}")
    space = "__shared__" if r["space"] == "shared" else "__global__"
    what = "Misaligned address" if kind == "misaligned access" else f"Invalid {space} {kind}"
    if r["space"] == "global":
        target = f"on {r['param']!r} ({rel} of a {nb}-byte buffer)"
    elif r.get("variable_bytes") and kind != "misaligned access":
        vo, vb = r["variable_offset"], r["variable_bytes"]
        vrel = (f"{vo - vb} bytes after the end" if vo >= vb else f"{-vo} bytes before the start" if vo < 0
                else f"at byte {vo}")
        target = f"on __shared__ {r['variable']} ({vrel} of its {vb} bytes; outside the block's static shared memory)"
    elif r.get("window") == "dynamic":
        target = f"on extern __shared__ {r['variable']} ({rel} of the launch's {nb} bytes of dynamic shared memory)"
    else:
        target = f"on static shared memory ({rel} of its {nb} bytes)"
    return (f"  {what} of size {r['size']} {target}\n"
            f"      by thread {r['thread']} in block {r['block']} at {_loc(r['file'], r['line'])}")


def _race_line(r: dict) -> str:
    a, b = r["first"], r["second"]
    on = (f"global memory {r['param']!r} at byte offset {r['offset']}" if r["space"] == "global"
          else _shared_what(r))
    why = ("blocks are never ordered" if a["block"] != b["block"] else
           "no __syncwarp() or __syncthreads() between them" if a["warp"] == b["warp"] else
           "no __syncthreads() between them")
    return (f"  {r['hazard']} hazard on {on}:\n"
            f"      {a['access']} by thread {_coords(a['thread'])} block {_coords(a['block'])} at "
            f"{_loc(a['file'], a['line'])}\n"
            f"      {b['access']} by thread {_coords(b['thread'])} block {_coords(b['block'])} at "
            f"{_loc(b['file'], b['line'])}  [{r['count']} such access(es); {why}]")


def _init_line(r: dict) -> str:
    return (f"  Uninitialized __shared__ read of size {r['size']} from {_shared_what(r)}\n"
            f"      by thread {r['thread']} in block {r['block']} at {_loc(r['file'], r['line'])}"
            f"  [{r['count']} such read(s)]")


def _sync_line(r: dict) -> str:
    at = f"by thread {r['thread']} in block {r['block']} at {_loc(r['file'], r['line'])}"
    o = r.get("other") or {}
    kind = r["kind"]
    if kind == "partial barrier":
        return (f"  Barrier error: __syncthreads() reached by only part of the block ({r['exited']} thread(s) had "
                f"exited without reaching it, e.g. thread {o.get('thread')}); divergent thread(s) in block\n"
                f"      {at}  [{r['count']} such barrier(s)]")
    if kind == "deadlock":
        other = f" (thread {o['thread']} waits elsewhere)" if o else ""
        return (f"  Barrier deadlock: no thread of the block can go on; {r['waiting_at_barrier']} thread(s) wait at "
                f"__syncthreads(), the others at a warp collective or exited{other}\n      {at}")
    mask, lanes = f"{r['mask']:#010x}", r["lanes"]
    if kind == "exited lane":
        what = f"its mask {mask} names lane(s) {lanes}, which exited without taking part"
    elif kind == "invalid mask":
        what = f"its mask {mask} does not name the calling lane {lanes} (invalid arguments)"
    elif kind == "divergent warp":
        what = (f"lane(s) {lanes} reached it from a different call site than thread {o.get('thread')} at "
                f"{_loc(o.get('file'), o.get('line'))} (the lanes named in the mask are not converged)")
    else:
        what = f"lane(s) {lanes} and thread {o.get('thread')} do not name each other in their masks ({mask})"
    return f"  Warp synchronization error: a *_sync collective: {what}\n      {at}  [{r['count']} such call(s)]"


_HEAD = {"memcheck": "invalid memory access(es)", "racecheck": "data race hazard(s)",
         "initcheck": "read(s) of uninitialized shared memory",
         "synccheck": "invalid use(s) of barriers or warp collectives"}
_LINE = {"memcheck": _memcheck_line, "racecheck": _race_line, "initcheck": _init_line, "synccheck": _sync_line}
_HINT = {"racecheck": "add a __syncthreads() (or __syncwarp() within a warp) between the write and the read, or "
                      "use an atomic",
         "initcheck": "every element a thread reads must be written first in the same block (zero-fill tile "
                      "elements that fall outside the matrix)",
         "synccheck": "every thread of the block must reach each __syncthreads() (no return before it), and every "
                      "lane named in a *_sync mask must make the same call (move the collective out of the branch, "
                      "or pass __ballot_sync of the branch's condition as the mask)"}


def report(kernel: str, tool: str, records: list[dict], total: int, others: dict[str, int]) -> str:
    """Return the message of a sanitizer error."""
    lines = [f"checked launch of kernel {kernel!r}: {total} {_HEAD[tool]} ({tool})"]
    lines += [_LINE[tool](r) for r in records[:10]]
    if len(records) > 10:
        lines.append(f"  ... and {len(records) - 10} more code location(s)")
    if tool in _HINT:
        lines.append(f"  hint: {_HINT[tool]}")
    also = [f"{n} {t} report(s)" for t, n in others.items() if n and t != tool]
    if also:
        lines.append("  also found: " + ", ".join(also))
    return "\n".join(lines)


def raise_for(records: list[Any], totals: list[int], module: Any, info: Any, bdim: tuple[int, int, int]) -> None:
    """Raise the error of the first tool (memcheck, synccheck, racecheck, initcheck) that has records."""
    pcs = {int(r.pc) for r in records} | {int(r.prev_pc) for r in records}
    lines = resolve(module.so_path, pcs) if module.checked else {}
    by_tool: dict[str, list[dict]] = {t: [] for t in TOOLS}
    for r in records:
        by_tool[TOOLS[r.tool]].append(record_dict(r, module, info, lines, bdim))
    reports = {t: (by_tool[t], int(totals[i])) for i, t in enumerate(TOOLS)}
    for tool in _RAISE_ORDER:
        recs, total = reports[tool]
        if total:
            others = {t: n for t, (_, n) in reports.items()}
            err = ERRORS[tool](report(info.name, tool, recs, total, others), recs, total)
            err.reports = reports  # type: ignore[attr-defined]
            raise err
