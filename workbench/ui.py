"""Notebook helpers driven by the registry: show a variant's source, explore an op, tabulate checks and timings."""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

from workbench.registry import Variant, get_op, variants


def show_source(v: Variant, cu: bool = True, full: bool = False) -> str:
    """Display the code of rung ``v``: its launcher, the kernels it launches and the helpers they call; return it.

    For CUDA C the ``__device__`` helpers it calls from ``kernels/include/*.cuh`` follow in a folded section.
    ``full=True`` shows the whole files instead (the Python file, and the ``.cu`` file when ``cu``).
    """
    from workbench.rung_source import full_source, rung

    if full:
        parts = full_source(v, cu)
        md = "\n\n".join(f"`{p.path.name}`\n```{p.lang}\n{p.text}```" for p in parts)
        _display_markdown(md)
        return "\n".join(p.text for p in parts)
    r = rung(v)
    if not cu:
        r.parts = [p for p in r.parts if p.lang == "python"]
    _display_markdown(r.markdown())
    return r.text()


def diff(a: Variant | str, b: Variant | str, op: str | None = None, context: int = 3) -> str:
    """Display what changed from rung ``a`` to rung ``b`` as a unified diff of their kernels; return the diff.

    ``a`` and ``b`` are variants, or names of ``op``'s variants (``wb.diff("cuda_smem", "cuda_padded",
    op="transpose")``). Only the rungs' own code is compared (launcher, kernels, helpers), not the files around it.
    """
    from workbench.registry import variant
    from workbench.rung_source import diff_text

    if isinstance(a, str) or isinstance(b, str):
        if op is None:
            raise TypeError("wb.diff: give variants, or names with op= (wb.diff('cuda_smem', 'cuda_padded', "
                            "op='transpose'))")
        a = variant(op, a) if isinstance(a, str) else a
        b = variant(op, b) if isinstance(b, str) else b
    text = diff_text(a, b, context)
    _display_markdown(f"`{a.op}/{a.name}` → `{b.op}/{b.name}`\n```diff\n{text or '(no change)'}\n```")
    return text


def _display_markdown(md: str) -> None:
    try:
        from IPython import get_ipython
        from IPython.display import Markdown, display

        if get_ipython() is not None:
            display(Markdown(md))
            return
    except ImportError:
        pass
    print(md)


def explore(op: str, names: Sequence[str] | None = None, records: list[dict] | None = None,
            device: str | None = None) -> Any:
    """Return the interactive explorer of ``op``: variants, dtype and size controls over a roofline and timings.

    Sizes are the op's GPU benchmark shapes; each selected variant appears at its napkin-math intensity, and
    recorded real-GPU results from ``results/`` appear as measured points. Emulated times are never plotted.
    """
    from workbench.explorers import explorer

    spec = get_op(op)
    vs = [v for v in variants(op) if names is None or v.name in names]
    shapes = spec.bench_shapes.get("gpu") or spec.check_shapes
    by_size = {spec.size_of(s): s for s in shapes}
    return explorer(op, vs, spec.flops, spec.bytes, sizes=list(by_size), dtypes=list(spec.dtypes),
                    shape_fn=lambda size: by_size[size], records=records, device=device)


def check_table(op: str, include_wrong: bool = True, **check_kw: Any) -> Any:
    """Check every variant of ``op`` that runs here and display one row per variant; return the reports."""
    from workbench.checker import check

    reports = []
    for v in variants(op, include_wrong=include_wrong):
        if v.gpu_only and not v.runs_here():
            reports.append((v, None))
            continue
        reports.append((v, check(v, **check_kw)))
    rows = []
    for v, r in reports:
        if r is None:
            verdict, detail = "skipped", html.escape(v.why_not_here() or "")
        elif not r.cases:  # nothing it supports was asked for (e.g. a tensor-core kernel checked in fp32 only)
            verdict, detail = "skipped", html.escape("; ".join(dict.fromkeys(r.skipped)) or "no runnable case")
        else:
            verdict = "pass" if r.ok else "FAIL"
            detail = (f"{len(r.cases)} runs" if r.ok else
                      f"{len(r.failures)}/{len(r.cases)} runs wrong; diagnosis <b>{r.diagnosis}</b>")
            if v.known_wrong:
                caught = r.diagnosis == v.expected_diagnosis
                detail += f" (known-wrong: expected {v.expected_diagnosis}: {'caught' if caught else 'MISSED'})"
        rows.append(f"<tr><td>{v.name}</td><td>{v.backend}</td><td>{verdict}</td><td>{detail}</td></tr>")
    table = ("<table><tr><th>variant</th><th>backend</th><th>check</th><th>details</th></tr>"
             + "".join(rows) + "</table>")
    _display_html(table, "\n".join(f"{v.name}: {'skipped' if r is None else r.summary().splitlines()[0]}"
                                    for v, r in reports))
    return reports


def bench_table(records: list[dict]) -> None:
    """Display timing records, saying plainly when times are CPU emulation rather than GPU measurements."""
    rows = []
    for r in records:
        if r["emulated"]:
            perf = "<i>emulated: not a GPU time</i>"
        else:
            perf = f"{r['tflops']:.2f} TFLOP/s, {r['gbps']:.0f} GB/s"
        rows.append(f"<tr><td>{r['variant']}</td><td>{r['shape']}</td><td>{r['dtype']}</td>"
                    f"<td>{r['time_ms']:.3f} ms</td><td>{perf}</td></tr>")
    head = ("<p><b>cpu mode: emulated wall times.</b> They show the emulator's cost, not the GPU's; recorded "
            "real-GPU results are in the plots below.</p>" if records and records[0]["emulated"] else "")
    table = (head + "<table><tr><th>variant</th><th>shape</th><th>dtype</th><th>median</th><th>throughput</th></tr>"
             + "".join(rows) + "</table>")
    _display_html(table, "\n".join(f"{r['variant']} {r['time_ms']:.3f} ms{' (emulated)' if r['emulated'] else ''}"
                                   for r in records))


def _display_html(markup: str, text: str) -> None:
    try:
        from IPython import get_ipython
        from IPython.display import display

        if get_ipython() is not None:
            display({"text/html": markup, "text/plain": text}, raw=True)
            return
    except ImportError:
        pass
    print(text)
