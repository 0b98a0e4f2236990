"""Command line: ``python -m workbench doctor``, ``bench``, ``where OP`` and ``progress``.

``bench [--op OP] [--quick] [--out FILE] [--include-emulated]`` checks and times; ``where OP`` lists everything
about one op (``wb.where``).
"""

from __future__ import annotations

import argparse
import html
import json
import sys
from pathlib import Path

import workbench
from workbench._mode import MODE, MODE_REASON


def backend_status() -> dict[str, tuple[str, str]]:
    """Return {backend: (native|emulated|unavailable, why)} for this machine and mode."""
    from workbench.versions import versions

    v = versions()
    out: dict[str, tuple[str, str]] = {"torch": ("native", f"torch {v['torch']} on {workbench.device()}")}
    if MODE == "gpu":
        out["triton"] = (("native", f"triton {v['triton']} JIT") if v["triton"]
                         else ("unavailable", "pip install triton"))
        from workbench.numba_helpers import PROBLEM, cuda

        try:
            ok = not PROBLEM and cuda.is_available()
            out["numba"] = ("native", f"numba-cuda {v['numba_cuda']}") if ok else (
                "unavailable", PROBLEM or "numba-cuda sees no GPU: pip install 'numba-cuda[cu13]'")
        except Exception as e:  # noqa: BLE001
            out["numba"] = ("unavailable", f"numba.cuda.is_available() failed: {type(e).__name__}: {e}")
        try:
            import cupy

            cupy.cuda.runtime.getDeviceCount()
            out["cupy"] = ("native", f"cupy {v['cupy']}")
            out["cuda"] = ("native", "CUDA C through cupy.RawKernel (NVRTC)")
        except Exception as e:  # noqa: BLE001
            why = f"cupy unusable ({type(e).__name__}: {e}); pip install cupy-cuda13x"
            out["cupy"] = ("unavailable", why)
            out["cuda"] = ("unavailable", why)
    else:
        out["triton"] = ("emulated", "Triton interpreter (TRITON_INTERPRET=1): fp32/fp16 only, ~1 ms per program")
        from workbench.numba_helpers import PROBLEM

        out["numba"] = (("unavailable", PROBLEM) if PROBLEM else
                        ("emulated", "Numba CUDA simulator (NUMBA_ENABLE_CUDASIM=1): one OS thread per CUDA thread, "
                                     "no warp shuffles"))
        out["cupy"] = ("emulated", "numpy stands in for cupy")
        out["cuda"] = _cpu_engine_status()
    out["cute"] = cute_status()
    return out


def cute_status() -> tuple[str, str]:
    """Return how CuTe DSL kernels fare here: native on an sm_80+ GPU, else compile-only (no emulator), or why not.

    Reads the installed version only: importing the DSL (about a second) is left to the first compile.
    """
    from workbench.versions import _dist

    ver = _dist("nvidia-cutlass-dsl")
    if not ver:
        missing = "nvidia-cutlass-dsl is not installed (pip install nvidia-cutlass-dsl==4.8.1)"
        if MODE != "gpu":
            return "unavailable", missing
        from kernels import _cute_aot  # a GPU machine without the DSL runs the ahead-of-time builds

        why = _cute_aot.problem("cute_wgmma_tma")
        return ("unavailable", f"{missing} and {why}") if why else (
            "native", f"no CuTe DSL here: the ahead-of-time sm_90a builds in {_cute_aot.aot_dir()} run")
    if MODE == "gpu":
        import torch

        major, minor = torch.cuda.get_device_capability()
        if major >= 8:
            return "native", f"CuTe DSL {ver}: kernels compile for sm_{major}{minor} and run on this GPU"
        return "unavailable", f"CuTe DSL {ver} needs an sm_80+ GPU; this one is sm_{major}{minor}"
    return "compile-only", (f"CuTe DSL {ver}: no CPU emulator, so its kernels do not run here; they compile for "
                            "sm_90a (wb.inspect reads them)")


def _cpu_engine_status() -> tuple[str, str]:
    """Return how CUDA C runs without a GPU: the CPU engine with the compiler it would use, or why not."""
    from workbench.cuda.errors import ToolchainNotFoundError
    from workbench.cuda.toolchain import find_cxx

    try:
        return "emulated", f"CPU engine: CUDA C compiled with {find_cxx()}, one fiber per CUDA thread"
    except ToolchainNotFoundError:
        return "unavailable", "no C++ compiler: apt-get install g++ (or set $CXX)"


def doctor() -> str:
    """Return the doctor report: mode, GPU, versions and how each backend runs here."""
    from workbench.versions import device_info, versions

    lines = [f"mode: {MODE}  ({MODE_REASON})"]
    d = device_info()
    if MODE == "gpu":
        lines.append(f"gpu: {d['name']}  compute capability {d['cc']}, {d['sm_count']} SMs, {d['mem_gb']} GiB")
    else:
        lines.append(f"gpu: none usable  ({d['name']}); kernels run emulated, times are not GPU times")
    lines.append("versions:")
    missing = {"cuda": "none (torch is a CPU build)", "driver": "none (no NVIDIA driver in use)",
               "nvcc": "not found (needed by workbench.inspect: install the CUDA toolkit or nvidia-cuda-nvcc)",
               "nvrtc": "not found (cupy compiles CUDA C with it; the NVRTC test needs it: pip install "
                        "nvidia-cuda-nvrtc)"}
    for k, val in versions().items():
        lines.append(f"  {k:<10} {val or missing.get(k, 'not installed')}")
    from workbench.versions import triton_guard

    ok, line = triton_guard()
    lines.append(f"triton guard: {'ok' if ok else 'PROBLEM'}: {line}")
    lines.append("backends:")
    for b, (how, why) in backend_status().items():
        lines.append(f"  {b:<7} {how:<12} {why}")
    return "\n".join(lines)


def run_bench(op: str | None, quick: bool, out: Path | None, command: str, include_emulated: bool = False,
              progress: bool | None = None) -> tuple[list[dict], list[str]]:
    """Check every variant that runs here, then time those that run natively; return (records, notes).

    In cpu mode only torch runs natively; emulated variants are checked but timed only with ``include_emulated``
    (their times measure the emulator, and are labelled so). Each record line and note prints as it happens,
    under a bar of the (op, variant, dtype) steps done, the one running and an ETA (``progress``; see
    :mod:`workbench.progressbar`).
    """
    from workbench import progressbar as pg
    from workbench.checker import check
    from workbench.timer import bench

    records: list[dict] = []
    notes: list[str] = []

    def note(line: str) -> None:
        notes.append(line)
        pg.write(line)

    ops = [op] if op else workbench.ops()
    for name in [o for o in ops if workbench.get_op(o).distributed]:  # collectives run on ranks, not under wb.bench
        note(f"skip {name}: a collective; time it with workbench.comm_time or benchmarks/comm_busbw.py")
    ops = [o for o in ops if not workbench.get_op(o).distributed]
    bar = pg.bar(sum(len(v.dtypes) for name in ops for v in workbench.variants(name)), "bench", unit="step",
                 progress=progress, leave=True)
    for name in ops:
        spec = workbench.get_op(name)
        shapes = spec.bench_shapes.get("cpu" if MODE != "gpu" else ("quick" if quick else "gpu"), [])
        for v in workbench.variants(name):
            for dt in pg.steps(bar, v.dtypes, lambda d, at=f"{name}/{v.name}": f"{at} {d}".replace("torch.", "")):
                if not v.runs_here(dt):
                    note(f"skip {name}/{v.name} {workbench.registry.dtype_name(dt)}: {v.why_not_here(dt)}")
                    continue
                rep = check(v, dtypes=[dt], quick=True, progress=progress)
                if not rep.ok:
                    note(f"FAIL {name}/{v.name}: not timed\n{rep.summary()}")
                    continue
                if not v.native and not include_emulated:
                    note(f"checked {name}/{v.name} {rep.cases[0].dtype}: pass; not timed (emulated here)")
                    continue
                for shape in shapes:
                    if not v.runs_here(dt, shape):
                        continue
                    try:
                        rec = bench(v, dtype=dt, check=False, command=command, progress=progress, **shape)
                    except Exception as e:  # noqa: BLE001  (one kernel's failure must not end the sweep)
                        note(f"error {name}/{v.name} {shape}: {type(e).__name__}: {e}")
                        continue
                    records.append(rec)
                    t = f"{rec['tflops']:.1f} TFLOP/s" if rec["tflops"] is not None else "emulated"
                    pg.write(f"{name:<10} {v.name:<28} {rec['dtype']:<9} {json.dumps(shape):<60} "
                             f"{rec['time_ms']:10.4f} ms  {t}")
    bar.close()
    return records, notes


def _plots_html(gpu_records: list[dict]) -> str:
    """Return the throughput and roofline figures of real-GPU records as HTML; a note when plotly is missing."""
    if not gpu_records:
        return ""
    try:
        from workbench import plots
    except ImportError as e:  # a GPU box without the notebook wheels: the table and the JSON still have it all
        return (f"<p>No plots: plotly is not installed here ({html.escape(str(e))}); the table above and the JSON "
                "file hold every number.</p>")
    figs = ""
    for op in sorted({r["op"] for r in gpu_records}):
        recs = [r for r in gpu_records if r["op"] == op]
        for fig in (plots.throughput_vs_size(recs), plots.roofline(recs)):
            figs += fig.to_html(full_html=False, include_plotlyjs=not figs)
    return figs


def html_report(records: list[dict], notes: list[str]) -> str:
    """Return a standalone HTML report: a table of every record, and plots of real-GPU records."""
    def num(x: float | None, fmt: str) -> str:
        return "" if x is None else format(x, fmt)

    rows = "".join(
        f"<tr><td>{r['op']}</td><td>{r['variant']}</td><td>{html.escape(json.dumps(r['shape']))}</td>"
        f"<td>{r['dtype']}</td><td>{r['time_ms']:.4f}{' (emulated)' if r['emulated'] else ''}</td>"
        f"<td>{num(r['tflops'], '.2f')}</td><td>{num(r['gbps'], '.0f')}</td><td>{num(r['pct_peak'], '.0f')}</td></tr>"
        for r in records)
    dev = records[0]["device"]["name"] if records else "-"
    gpu = [r for r in records if not r["emulated"]]
    figs = _plots_html(gpu)
    warn = ("" if gpu else "<p><b>Emulated run (cpu mode): these times are CPU emulation, not GPU performance; "
            "no throughput plots are drawn.</b></p>")
    return (f"<html><head><meta charset='utf-8'><title>Kernel Workbench bench</title></head><body>"
            f"<h1>Kernel Workbench benchmark</h1><p>device: {html.escape(dev)}; mode: {MODE}</p>{warn}"
            "<table border=1 cellpadding=3><tr><th>op</th><th>variant</th><th>shape</th><th>dtype</th>"
            f"<th>median ms</th><th>TFLOP/s</th><th>GB/s</th><th>% of roofline</th></tr>{rows}</table>{figs}"
            f"<pre>{html.escape(chr(10).join(notes))}</pre></body></html>")


def out_problem(out: Path) -> str | None:
    """Return why ``out`` (and the .html beside it) cannot be written, or None: checked before the run starts."""
    import os

    if out.suffix.lower() == ".html":
        return "name the JSON file (its .html report is written beside it), not the .html"
    for target in (out, out.with_suffix(".html")):
        if target.is_dir():
            return f"{target} is a folder, not a file"
        if target.exists() and not os.access(target, os.W_OK):
            return f"{target} exists and is not writable"
    folder = out.parent
    for up in (folder, *folder.parents):
        if up.exists():
            break
    if not up.is_dir():
        return f"{up} is a file, so the folder {folder} cannot be made"
    if not os.access(up, os.W_OK | os.X_OK):
        return f"the folder {up} is not writable"
    return None


def show_progress(home: Path | None = None) -> int:
    """Print the drill progress table and the weakest topics; 1 with the reason when the record is unreadable."""
    import os

    from workbench.practice import progress
    from workbench.practice.store import ProgressStoreError

    if home is not None:
        os.environ["WORKBENCH_HOME"] = str(home)
    try:
        print(progress().text())
    except ProgressStoreError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


def show_where(parser: argparse.ArgumentParser, op: str) -> int:
    """Print everything about ``op`` (an unknown op: the parser's error naming the known ones)."""
    try:
        workbench.get_op(op)
    except KeyError as e:
        parser.error(str(e.args[0]))
    print(workbench.where(op))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run the workbench command line."""
    p = argparse.ArgumentParser(prog="python -m workbench", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("doctor", help="print the mode, GPU, versions and how each backend runs here")
    b = sub.add_parser("bench", help="check every variant that runs here, time those that run natively; "
                                     "write JSON and HTML")
    b.add_argument("--op", help=f"one op (default: all of {workbench.ops()})")
    b.add_argument("--quick", action="store_true", help="a few shapes per op (gpu mode)")
    b.add_argument("--out", type=Path, help="JSON file to write (an .html report is written beside it)")
    b.add_argument("--include-emulated", action="store_true",
                   help="cpu mode: also time emulated variants (labelled emulated; never GPU performance)")
    pr = sub.add_parser("progress", help="show your interview-drill progress: drills passed by topic and level, "
                                          "the weakest topics")
    pr.add_argument("--home", type=Path, help="the folder holding progress.sqlite3 (default: $WORKBENCH_HOME)")
    w = sub.add_parser("where", help="list everything about one op: contract, variants and their files, CUDA C, "
                                     "known-wrong kernels, exercises, drills, tests, benchmarks, notebook sections")
    w.add_argument("op", help=f"the op's name (one of {workbench.ops()})")
    args = p.parse_args(argv)
    if args.cmd == "where":
        return show_where(p, args.op)
    if args.cmd == "doctor":
        print(doctor())
        return 0
    if args.cmd == "progress":
        return show_progress(args.home)
    if args.op is not None:
        if not args.op.strip():
            p.error(f"--op needs an op's name: one of {workbench.ops()} (leave --op out to bench every op)")
        try:
            workbench.get_op(args.op)  # unknown op: one clear line before any work
        except KeyError as e:
            p.error(str(e.args[0]))
    if args.out is not None:
        why = out_problem(args.out)
        if why:
            p.error(f"--out {args.out}: {why} (checked before any work starts)")
    command = "python -m workbench " + " ".join(argv if argv is not None else sys.argv[1:])
    records, notes = run_bench(args.op, args.quick, args.out, command, args.include_emulated)
    failed = sum(n.startswith("FAIL") for n in notes)
    print(f"bench: {len(records)} record(s), {len(notes)} note(s) above, {failed} variant(s) failed the check")
    if args.out:
        from workbench.results import save_results

        args.out.parent.mkdir(parents=True, exist_ok=True)
        save_results(records, args.out, command=command)
        html_path = args.out.with_suffix(".html")
        html_path.write_text(html_report(records, notes))
        print(f"wrote {args.out} and {html_path}")
    return 1 if any(n.startswith("FAIL") for n in notes) else 0


if __name__ == "__main__":
    sys.exit(main())
