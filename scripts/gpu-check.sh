#!/usr/bin/env bash
# `make gpu-check`: the prepared GPU run, scripts/gpu-run.sh (see there for its steps, budget and knobs), then its
# tarball unpacked under out/gpu-check/ for reading. Everything the run writes still goes through one tarball and
# summary.txt in $OUT (default out/gpu-check), so on the GPU box, whose $OUT brings back at most 8 files, this is
# as safe as calling gpu-run.sh; the unpacked copy goes to out/gpu-check/, never to $OUT.
#   bash scripts/gpu-check.sh            # on a GPU machine
#   bash scripts/gpu-check.sh --smoke    # the cpu-mode dry run
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-out/gpu-check}
OUT=$out bash scripts/gpu-run.sh "$@"
rc=$?
latest=$(ls -t "$out"/gpu-run-*.tar.gz 2>/dev/null | head -n 1)
if [ -n "$latest" ]; then
  mkdir -p out/gpu-check && tar -xzf "$latest" -C out/gpu-check \
    && echo "unpacked: out/gpu-check/$(basename "$latest" .tar.gz)/ (import: python scripts/import-gpu-results.py $latest)"
fi
exit $rc
