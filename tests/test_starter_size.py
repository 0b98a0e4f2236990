"""Exercise starters hold what the learner writes plus a call: the given code lives in the op's kernel folder.

A starter is its solution file outside the ``# >>> learner`` regions (workbench/practice/starters.py). Every code
line out there is one the learner reads but does not write: imports, the signatures of the functions they fill in,
and the call into the given kernel and launch (``kernels/<op>/ex_common.py``). Counted here, so that the loads,
loops and launch plumbing of a kernel cannot drift back into a notebook's starter cell.
"""

from __future__ import annotations

import pytest

import workbench as wb
from workbench.practice import starters

MAX_GIVEN = 15  # imports, decorators, signatures, docstrings, returns and the call

# Starters that still carry their kernel's given code (issue 28), each with the most given lines it may have: moving
# the given part into the op's ex_common.py lowers the count; then lower the number here, or drop the entry once
# the starter fits MAX_GIVEN. These two solution files hold the whole kernel that a spot-the-bug drill names as its
# correct counterpart (kernels/moe/drills.toml, kernels/moe_fp8/drills.toml): moving their given code out needs
# those drills' known-wrong kernels (wrong.py) restructured the same way.
NOT_YET = {
    "moe-fp8-requant": 44,
    "moe-weighted-combine": 37,
}


def given_lines(ex_id: str) -> list[str]:
    """Return the code lines of ``ex_id``'s starter outside its learner regions (no blanks, no comment lines)."""
    text = wb.exercise(ex_id).solution_file.read_text()
    out, inside = [], False
    for line in text.splitlines():
        if starters._OPEN.match(line) or starters._CLOSE.match(line):
            inside = bool(starters._OPEN.match(line))
            continue
        s = line.strip()
        if not inside and s and not s.startswith(("#", "//")):
            out.append(s)
    return out


@pytest.mark.parametrize("ex_id", wb.exercises())
def test_starter_gives_only_signatures_and_a_call(ex_id):
    n = len(given_lines(ex_id))
    most = NOT_YET.get(ex_id, MAX_GIVEN)
    assert n <= most, (
        f"{ex_id}: its starter gives {n} code lines besides the learner's part (at most {most}); move the given "
        f"kernel code into kernels/{wb.exercise(ex_id).op}/ex_common.py and call it from the starter")
    if ex_id in NOT_YET:
        assert n > MAX_GIVEN, f"{ex_id}: its starter fits MAX_GIVEN = {MAX_GIVEN} now ({n}): drop it from NOT_YET"


def test_not_yet_names_only_exercises():
    assert set(NOT_YET) <= set(wb.exercises())


def test_attention_starters_call_the_given_kernel():
    for ex_id, call in (("attention-online-softmax", "return flash_forward("),
                        ("attention-causal-skip", "return flash_forward("),
                        ("attention-bwd-dkdv", "return flash_backward(")):
        starter = wb.exercise(ex_id).starter
        assert call in starter and "tl.load(" not in starter and "[grid](" not in starter, ex_id
