"""The glossary defines every piece of jargon the notebooks use, and each notebook links a term's first use to it.

``JARGON`` is the list of jargon words the notebooks are scanned for, kept here and not derived from the glossary:
a term a notebook uses that the glossary lacks fails, and so does a notebook whose first use of a term (in its
markdown) is not a link to that term's entry. Acronyms and SASS/PTX mnemonics found in the prose are checked too,
so new jargon cannot slip in unlisted. The scanner itself is tested on small hand-made notebooks.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import workbench as wb
from workbench import glossary_terms

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]-*.ipynb"))
CS = "(?-i:{})"  # a case-sensitive part inside a case-insensitive pattern

# term (as the glossary is asked for it) -> pattern of its uses in a notebook. Case-insensitive unless CS-wrapped.
JARGON: dict[str, str] = {
    # execution model
    "warp": r"\bwarps?\b(?![- ]?(?:group|speciali[sz]|til))",
    "lane": r"\blanes?\b",
    "warpgroup": r"\bwarp ?groups?\b(?! MMAs?\b)",
    "thread block": r"\bthread[- ]blocks?\b|\bCTAs?\b",
    "grid": r"\bgrids?\b",
    "program": r"\bprograms?\b",
    "SM": CS.format(r"\bSMs?\b"),
    "SIMT": r"\bSIMT\b|\bCUDA cores?\b",
    "barrier": r"__syncthreads|\bsyncthreads\b|\bbarriers?\b",
    "warp shuffle": r"\bshuffles?\b|__shfl\w*",
    "occupancy": r"\boccupancy\b",
    # memory
    "registers": r"\bregisters?\b(?! (?:blocking|tile))",
    "register spill": r"\bspill(?:s|ed|ing)?\b",
    "shared memory": r"\bshared[- ]memory\b|\bsmem\b",
    "L1": CS.format(r"\bL1\b"),
    "L2": CS.format(r"\bL2\b"),
    "HBM": CS.format(r"\bHBM\w*"),
    "DRAM": CS.format(r"\bDRAM\b"),
    "global memory": r"\bglobal memory\b",
    "sector": r"\bsectors?\b",
    "coalescing": r"(?<!`)\b(?:un)?coalesc\w*",  # not CuTe's `coalesce` of a layout (09), a code span
    "bank conflict": r"\bbank[- ]conflicts?\b|\bbank-conflict-free\b|\bbanks?\b",
    "vectorized load": r"\bvectori[sz]ed\b|\bfloat4\b",
    "atomic": r"\batomics?\b",
    "wavefront": r"\bwavefronts?\b",
    # performance model
    "napkin math": r"\bnapkin\b",
    "arithmetic intensity": r"\bintensity\b",
    "roofline": r"\brooflines?\b",
    "ridge point": r"\bridge\b",
    "memory-bound": r"\b(?:memory|compute|bandwidth)-bound\b",
    "copy bandwidth": r"\bcopy bandwidth\b|\bmeasured copy\b",
    "traffic amplification": r"\b(?:traffic )?amplification\b",
    "compulsory bytes": r"\bcompulsory (?:bytes|traffic)\b",
    # techniques
    "GEMM": r"(?<!grouped )\b[SH]?GEMMs?\b",
    "tile": r"\btil(?:e|es|ed|ing)\b",
    "register blocking": r"\bregister blocking\b|\bmicro-tiles?\b|\bblock-?tiling\b",
    "warptiling": r"\bwarp-?til(?:e|es|ing)\b",
    "split-K": r"\bsplit-K\b",
    "grouped program order": r"\bgrouped (?:program )?order(?:ing)?\b",
    "persistent kernel": r"\bpersistent\b",
    "autotuning": r"\bautotun\w*",
    "pipeline stages": r"\b\d+-stages?\b|\bmulti-stage\b|\b\d+ stages\b|\bstages? (?:in flight|ring)\b|\bper stage\b"
                       r"|\bpipeline stages?\b",
    "epilogue": r"\bepilogues?\b",
    "fusion": r"\bfus(?:ion|ed|es|ing)\b",
    "FMA": r"\bFMAs?\b|\bmultiply-adds?\b",
    # tensor cores and Hopper
    "tensor core": r"\btensor[- ]cores?\b",
    "wmma": r"\bwmma\b",
    "mma.sync": r"\bmma\.sync\b",
    "ldmatrix": r"\bldmatrix\b",
    "cp.async": r"\bcp\.async\b(?!\.bulk)",
    "wgmma": r"\bwgmma\b|\bwarpgroup MMAs?\b",
    "TMA": CS.format(r"\bTMA\b") + r"|\btensor (?:map|descriptor)s?\b",
    "mbarrier": r"\bmbarriers?\b",
    "swizzle": r"\bswizzl\w*",
    "warp specialisation": r"\bwarp[- ]speciali[sz]\w*",
    "setmaxnreg": r"\bsetmaxnreg\b",
    "thread block cluster": r"\bclusters?\b|\bmulticast\b",
    "compute capability": r"\bcompute capability\b|\bsm_\d+a?\b",
    # CuTe
    "CuTe": r"\bCuTe\b",
    "atom": r"\batoms?\b",
    "TV layout": r"\bTV layouts?\b|\bthread-value layouts?\b",
    "TiledMMA": r"\bTiledMMAs?\b",
    "TiledCopy": r"\bTiledCop(?:y|ies)\b",
    # SASS and PTX
    "SASS": CS.format(r"\bSASS\b"),
    "PTX": CS.format(r"\bPTX\b"),
    "FFMA": r"\bFFMA\b",
    "HMMA": r"\bHMMA\b",
    "HGMMA": r"\bHGMMA\b",
    "QGMMA": r"\bQGMMA\b",
    "LDG.128": r"\bLDG(?:\.E)?\.128\b",
    "LDS.128": r"\bLDS(?:\.128)?\b",
    "STG.128": r"\bSTG(?:\.E)?\.128\b",
    "LDGSTS": r"\bLDGSTS\b",
    "LDSM": r"\bLDSM\b",
    "UTMALDG": r"\bUTMALDG\b",
    "SHFL.BFLY": r"\bSHFL\.BFLY\b",
    # tools
    "nvcc": r"\bnvcc\b",
    "NVRTC": r"\bNVRTC\b",
    "cuBLAS": r"\bcuBLAS\b",
    "CUTLASS": r"\bCUTLASS\b",
    "SDPA": r"\bSDPA\b",
    "Triton interpreter": r"\binterpreter\b",
    "Numba CUDA simulator": r"\bsimulator\b",
    "CPU engine": r"\bCPU engine\b",
    "ElementwiseKernel": r"\bElementwiseKernels?\b",
    "ReductionKernel": r"\bReductionKernels?\b",
    # softmax and attention
    "safe softmax": r"\bsubtract(?:s|ing)? (?:the )?(?:row )?max\b",
    "tree reduction": r"\btree\b",
    "butterfly reduction": r"\bbutterfly\b",
    "online softmax": r"\bonline softmax\b|\bonline recurrence\b",
    "logsumexp": r"\blogsumexp\b",
    "FlashAttention": r"\bFlashAttention(?:-\d)?\b|\bFA[123]\b",
    "causal mask": r"\bcausal\b",
    "score matrix": r"\bscore matrix\b",
    "GQA": CS.format(r"\bGQA\b|\bMQA\b") + r"|\bgrouped-query\b",
    "MLA": CS.format(r"\bMLA\b") + r"|\blatent attention\b",
    "paged attention": r"\bpaged (?:attention|KV)\b|\bPagedAttention\b|\bblock[- ]tables?\b",
    "split-KV": CS.format(r"\bsplit-KV\b") + r"|\bflash-decoding\b",
    "log-sum-exp merge": r"\b(?:log-sum-exp|lse) merge\b",
    # number formats
    "tf32": r"\btf32\b",
    "fp16": r"\bfp16\b|\bfloat16\b",
    "bf16": r"\bbf16\b|\bbfloat16\b",
    "fp32": r"\bfp32\b|\bfloat32\b",
    "fp8 e4m3": r"\bfp8\b|\be4m3\b",
    "mantissa": r"\bmantissa\b",
    "subnormal": r"\bsubnormals?\b",
    "per-tensor scale": r"\bper-tensor\b",
    "block scales": r"\bblock scales?\b|\b1x128\b",
    "quantization": r"\b(?:de|re)?quantiz\w*",
    "promotion": r"\bpromotion\b",
    # mixture of experts
    "MoE": CS.format(r"\bMoE\b") + r"|\bMixture[- ]of[- ]Experts\b",
    "expert": r"\bexperts?\b(?! parallelism)",
    "router": r"\brout(?:er|ers|ing)\b",
    "top-k": r"\btop-?k\b|\btop_k\b",
    "SwiGLU": r"\bSwiGLU\b|\bSiLU\b",
    "align block size": r"\balign[- ]block[- ]size\b",
    "grouped GEMM": r"\bgrouped GEMMs?\b",
    "combine": r"\b(?:the|a|weighted|atomic|top-k) combine\b",
    "prefill": r"\bprefill\b",
    "decode": r"\bdecode\b",
    "KV cache": r"\bKV[- ]cache\b",
    "load imbalance": r"\bimbalance\b",
    "expert parallelism": r"\bexpert parallelism\b",
    "all-to-all": r"\ball-to-alls?\b",
    # communication
    "collective": r"\bcollectives?\b",
    "NVLink": r"\bNVLink\b",
    "InfiniBand": r"\bInfiniBand\b",
    "alpha-beta model": r"\balpha-beta\b",
    "context parallelism": r"\bcontext parallel\w*",
    "data parallelism": r"\bdata parallel\w*",
    "deadlock": r"\bdeadlock\w*",
    # workbench words
    "known-wrong kernel": r"\bknown-wrong\b",
    "poison": r"\bpoison\w*",
    "cpu mode": r"\bcpu mode\b|\bemulat\w*",
    "variant": r"\bvariants?\b",
    "float64 reference": r"\bfloat64 reference\b",
}

# Upper-case words that are plain English or units, not jargon to define. Any other acronym or SASS/PTX-style
# mnemonic in a notebook's prose must resolve in the glossary.
PLAIN = {"GPU", "CPU", "CUDA", "NVIDIA", "API", "IEEE", "OS", "TODO", "FLOP", "GFLOP", "TFLOP", "MFLOP", "PFLOP",
         "KB", "MB", "GB", "TB", "MLP", "LLM", "OCP", "H100", "H200", "H800", "A100", "A6000", "SXM", "NVL", "QK",
         "PV", "QKV", "ISA", "RTX", "T4", "L4"}

LINK = re.compile(r"\[([^\]\n]*)\]\(([^)\s]+)\)")
ACRONYM = re.compile(r"(?<![\w.-])[A-Z][A-Z0-9]+(?:\.[A-Z0-9]+)*(?![\w.-])")
CODE_SPAN = re.compile(r"`[^`\n]*`|\$\$.*?\$\$|\$[^$\n]*\$", re.S)  # inline code and LaTeX: not prose
HEADING_LINE = re.compile(r"^#{1,6} .*$", re.M)  # headings (titles included)
HEADING = re.compile(r"^##\s+(\d+)\s+·", re.M)
REF = re.compile(r"^(\d\d) §(\d+)$")


def _compiled() -> dict[str, re.Pattern]:
    return {t: re.compile(p, re.I) for t, p in JARGON.items()}


def _masked(text: str) -> tuple[str, list[tuple[int, int, str]]]:
    """Return ``text`` with link targets blanked (so their words are no uses) and the links' text spans."""
    spans, out = [], list(text)
    for m in LINK.finditer(text):
        spans.append((m.start(1), m.end(1), m.group(2)))
        for i in range(m.end(1), m.end()):
            out[i] = " "
    return "".join(out), spans


def _cells(nb: dict) -> list[tuple[str, str]]:
    """Return (kind, source) of each cell, leaving out the closing "## Sources" list (document titles, not uses)."""
    cells = [(c["cell_type"], "".join(c["source"])) for c in nb["cells"]]
    return [(k, s) for k, s in cells if not (k == "markdown" and s.lstrip().startswith("## Sources"))]


def _glossary_anchor(url: str) -> str | None:
    m = re.fullmatch(r"(?:\./)?glossary\.md#(.+)", url)
    return m.group(1) if m else None


def first_use_problems(nb: dict, name: str, jargon: dict[str, re.Pattern], lookup=glossary_terms.lookup) -> list[str]:
    """Return what is wrong with ``nb``: jargon the glossary lacks, first uses that do not link to their entry."""
    problems, seen_md = [], set()
    for kind, src in _cells(nb):
        text, links = _masked(src) if kind == "markdown" else (src, [])
        if kind == "markdown":  # headings carry no links: the first use in the text does
            text = HEADING_LINE.sub(lambda t: " " * len(t.group()), text)
        for term, pat in jargon.items():
            m = pat.search(text)
            if m is None:
                continue
            try:
                entry = lookup(term)
            except glossary_terms.UnknownTerm:
                problems.append(f"{name}: uses {m.group(0)!r} ({term}) but the glossary has no entry for {term!r}")
                continue
            if kind != "markdown" or term in seen_md:
                continue
            seen_md.add(term)
            target = next((url for a, b, url in links if a <= m.start() and m.end() <= b), None)
            if target is None or _glossary_anchor(target) != entry.anchor:
                ctx = src[max(0, m.start() - 40):m.end() + 40].replace("\n", " ")
                problems.append(f"{name}: first use of {term!r} is not linked to glossary.md#{entry.anchor} "
                                f"(found {target!r}): ...{ctx}...")
    return sorted(set(problems))


def link_problems(nb: dict, name: str) -> list[str]:
    """Return glossary links in ``nb`` whose anchor names no glossary heading."""
    anchors = {e.anchor for e in glossary_terms.entries().values()}
    out = []
    for kind, src in _cells(nb):
        for m in LINK.finditer(src if kind == "markdown" else ""):
            a = _glossary_anchor(m.group(2))
            if "#" in m.group(2) and m.group(2).split("#")[0].endswith("glossary.md") and a not in anchors:
                out.append(f"{name}: link {m.group(0)!r} points at no glossary heading")
    return out


def acronym_problems(nb: dict, name: str) -> list[str]:
    """Return acronyms and mnemonics in ``nb``'s prose that are neither plain words nor glossary glossary_terms."""
    out = set()
    for kind, src in _cells(nb):
        if kind != "markdown":
            continue
        for word in ACRONYM.findall(CODE_SPAN.sub(" ", _masked(src)[0])):
            if word in PLAIN:
                continue
            try:
                glossary_terms.lookup(word)
            except glossary_terms.UnknownTerm:
                out.add(f"{name}: {word!r} is neither in the glossary nor a plain word (PLAIN)")
    return sorted(out)


def _load(p: Path) -> dict:
    return json.loads(p.read_text(encoding="utf-8"))


def _md(*cells: str) -> dict:
    return {"cells": [{"cell_type": "markdown", "source": [c]} for c in cells]}


# ------------------------------------------------------------------------------------------------ the glossary
def test_glossary_parses_with_unique_terms_and_anchors():
    es = glossary_terms.entries()
    assert len(es) >= 100
    anchors = [e.anchor for e in es.values()]
    assert len(set(anchors)) == len(anchors)
    spellings: dict[str, str] = {}
    for e in es.values():
        for s in (e.term, *e.aliases):
            k = re.sub(r"[\s\-_]+", " ", s.casefold())
            assert spellings.setdefault(k, e.term) == e.term, f"{s!r} names both {spellings[k]!r} and {e.term!r}"


def _sentences(text: str) -> int:
    t = re.sub(r"`[^`]*`", "x", text)
    t = re.sub(r"\bet al\.", "et al", t)
    return len(re.findall(r"[.!?](?=\s|$)", t))


@pytest.mark.parametrize("entry", list(glossary_terms.entries().values()), ids=lambda e: e.anchor)
def test_each_entry_is_one_to_three_sentences_and_says_where(entry):
    assert 1 <= _sentences(entry.text) <= 3, entry.text
    assert entry.where, f"{entry.term}: no *Where:* line"


def _sections() -> dict[tuple[str, str], str]:
    """Return the text of every numbered section: (notebook number, section number) -> its cells' sources."""
    out: dict[tuple[str, str], list[str]] = {}
    for p in NOTEBOOKS:
        current = None
        for c in _load(p)["cells"]:
            src = "".join(c["source"])
            m = HEADING.search(src)
            current = m.group(1) if m else current
            if current:
                out.setdefault((p.name[:2], current), []).append(src)
    return {k: "\n".join(v) for k, v in out.items()}


def _uses(entry: glossary_terms.Entry) -> list[re.Pattern]:
    names = (entry.term, *entry.aliases)
    spellings = [re.compile(r"(?<![\w.])" + re.escape(n) + r"(?:s|es)?(?!\w)", re.I) for n in names]
    return spellings + [p for t, p in _compiled().items() if _entry_term(t) == entry.term]


def _entry_term(term: str) -> str | None:
    try:
        return glossary_terms.lookup(term).term
    except glossary_terms.UnknownTerm:  # reported by test_every_jargon_term_has_an_entry
        return None


def test_every_where_reference_is_a_section_that_uses_the_term():
    sections, bad = _sections(), []
    for e in glossary_terms.entries().values():
        uses = _uses(e)
        for ref in e.where:
            m = REF.match(ref)
            text = sections.get((m.group(1), m.group(2))) if m else None
            if text is None:
                bad.append(f"{e.term}: {ref!r} is no notebook section")
            elif not any(u.search(text) for u in uses):
                bad.append(f"{e.term}: {ref!r} never uses the term")
    assert not bad, bad


def test_wb_glossary_shows_everything_or_one_term():
    whole = wb.glossary()
    assert whole._repr_markdown_() == glossary_terms.path().read_text(encoding="utf-8")
    one = wb.glossary("WGMMA")._repr_markdown_()
    assert one.startswith("### wgmma\n") and "warpgroup" in one and "*Where:*" in one
    assert wb.glossary("CTA")._repr_markdown_().startswith("### thread block")
    assert wb.glossary("warps")._repr_markdown_().startswith("### warp\n")
    assert wb.glossary("Bank-Conflicts")._repr_markdown_().startswith("### bank conflict")


def test_unknown_term_names_the_closest():
    with pytest.raises(glossary_terms.UnknownTerm, match="closest: wgmma"):
        wb.glossary("wgmmma")
    with pytest.raises(glossary_terms.UnknownTerm, match="expected a term"):
        wb.glossary("  ")


def test_anchor_is_jupyterlabs_heading_id():
    # JupyterLab's rendermime: header id = the heading's text with every space replaced by "-".
    assert glossary_terms.anchor("warp specialisation") == "warp-specialisation"
    assert glossary_terms.anchor("LDS.128") == "LDS.128"
    assert glossary_terms.lookup("fp8").anchor == "fp8-e4m3"


# ------------------------------------------------------------------------------------------------ the notebooks
@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_jargon_is_defined_and_first_use_links_to_it(nb):
    problems = first_use_problems(_load(nb), nb.stem, _compiled()) + link_problems(_load(nb), nb.stem)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_undefined_acronym_in_prose(nb):
    problems = acronym_problems(_load(nb), nb.stem)
    assert not problems, "\n".join(problems)


FILE_NUMBER = re.compile(r"\bv\d+\b")  # v5, v11: file numbers that no name a learner sees uses


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_prose_names_variants_not_file_numbers(nb):
    found = [m.group(0) for kind, src in _cells(_load(nb)) if kind == "markdown"
             for m in FILE_NUMBER.finditer(CODE_SPAN.sub(" ", src))]
    assert not found, f"{nb.stem} refers to {found}: name the variant instead"


def test_idea_strings_name_no_file_numbers():
    bad = [f"{op}/{v.name}: {v.idea}" for op in wb.ops() for v in wb.variants(op) if FILE_NUMBER.search(v.idea)]
    assert not bad, bad


def test_every_jargon_term_has_an_entry():
    missing = []
    for t in JARGON:
        try:
            glossary_terms.lookup(t)
        except glossary_terms.UnknownTerm:
            missing.append(t)
    assert not missing


# ------------------------------------------------------------------------------------------------ the scanner
WARP = {"warp": re.compile(JARGON["warp"], re.I)}


def test_scanner_accepts_a_linked_first_use():
    nb = _md("Each [warp](glossary.md#warp) runs 32 lanes.", "A warp again, unlinked: fine.")
    assert first_use_problems(nb, "t", WARP) == []


def test_scanner_rejects_an_unlinked_first_use():
    nb = _md("Each warp runs 32 lanes.", "Later: [warps](glossary.md#warp).")
    (p,) = first_use_problems(nb, "t", WARP)
    assert "first use of 'warp' is not linked" in p


def test_scanner_rejects_a_link_to_the_wrong_entry():
    (p,) = first_use_problems(_md("Each [warp](glossary.md#SM) runs."), "t", WARP)
    assert "glossary.md#warp" in p and "glossary.md#SM" in p


def test_scanner_ignores_words_inside_link_targets():
    # The URL mentions warp; the first real use of the word comes later, unlinked.
    nb = _md("See [the page](glossary.md#warp).", "A warp of 32 threads.")
    assert len(first_use_problems(nb, "t", WARP)) == 1


def test_scanner_reports_jargon_the_glossary_lacks():
    def lookup(term):
        raise glossary_terms.UnknownTerm(term)

    nb = {"cells": [{"cell_type": "code", "source": ["x = 1  # one QGMMA per k-step\n"]}]}
    pats = {"QGMMA": re.compile(JARGON["QGMMA"], re.I)}
    (p,) = first_use_problems(nb, "t", pats, lookup=lookup)
    assert "glossary has no entry for 'QGMMA'" in p


def test_link_and_acronym_checks_catch_bad_links_and_unknown_acronyms():
    nb = _md("A [warp](glossary.md#warps) issues an XYZZY.128 and a GPU op.")
    assert link_problems(nb, "t") == ["t: link '[warp](glossary.md#warps)' points at no glossary heading"]
    assert acronym_problems(nb, "t") == ["t: 'XYZZY.128' is neither in the glossary nor a plain word (PLAIN)"]
