#!/usr/bin/env bash
# The one script for a GPU machine: GPU tests, every notebook on the GPU, quick benchmarks, the goal measurements
# of issues 4-7 (benchmarks/kernel_goals.py, benchmarks/moe_goals.py).
# Works without `make install` (an offline GPU box with torch/triton/cupy/numba-cuda preinstalled, see
# ../shared/gpu/README.md): it runs with $PYTHON (default: .venv/bin/python if present, else python3) and puts the
# repo on PYTHONPATH. Logs and results go to $OUT (default out/gpu-check/); copy the bench JSON into results/ after
# reading it.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
PYTHON=${PYTHON:-$([ -x .venv/bin/python ] && echo .venv/bin/python || echo python3)}
out=${OUT:-out/gpu-check}
mkdir -p "$out"
export PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 WORKBENCH_MODE=gpu
status=0
# STEPS picks and orders what runs, e.g. STEPS="doctor kernel_goals moe_goals" for the goal measurements alone.
STEPS=${STEPS:-doctor tests notebooks bench moe_goals kernel_goals}
step() {  # step NAME CMD...: run, log to $out/NAME.log, remember failure
  local name=$1; shift
  case " $STEPS " in *" $name "*) ;; *) echo "=== $name: skipped (not in STEPS)"; return 0 ;; esac
  local t0=$SECONDS
  echo "=== $name: $*"
  "$@" 2>&1 | tee "$out/$name.log"
  local rc=${PIPESTATUS[0]}
  echo "=== $name: rc=$rc in $((SECONDS - t0)) s" | tee -a "$out/summary.txt"
  [ "$rc" = 0 ] || status=1
}
step doctor "$PYTHON" -m workbench doctor
step tests "$PYTHON" -m pytest -q -p no:cacheprovider tests --ignore=tests/browser
step notebooks "$PYTHON" -m pytest -q -p no:cacheprovider --nbval-lax --nbval-current-env --nbval-cell-timeout=300 notebooks/
gpu=$("$PYTHON" -c 'import torch; print(torch.cuda.get_device_name(0).replace(" ", "-"))' 2>/dev/null || echo gpu)
step bench "$PYTHON" -m workbench bench --quick --out "$out/$gpu-$(date -u +%Y-%m-%d).json"
step moe_goals "$PYTHON" benchmarks/moe_goals.py --out-dir "$out"
step kernel_goals "$PYTHON" benchmarks/kernel_goals.py --out-dir "$out"
echo "--- summary"; cat "$out/summary.txt"
exit $status
