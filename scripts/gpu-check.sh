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
# STEPS picks what runs (in the script's order): doctor tests notebooks bench moe_goals kernel_goals, or one goal
# op at a time with gemm_goals softmax_goals attention_goals (kernel_goals runs all three in one process).
# STEP_TIMEOUT (seconds, 0 = none) bounds each step, so one slow step cannot eat a short GPU session: each goal
# op writes its files when it finishes, so what finished is kept. For a 15-minute session:
#   STEPS="doctor moe_goals gemm_goals attention_goals softmax_goals" STEP_TIMEOUT=150 bash scripts/gpu-check.sh
STEPS=${STEPS:-doctor tests notebooks bench moe_goals kernel_goals}
STEP_TIMEOUT=${STEP_TIMEOUT:-0}
: >"$out/summary.txt"
# Notebook wheels carried in .whl/ (../shared/gpu/fetch-wheels.sh) for a box that lacks jupyter/nbval/plotly.
if [ -d .whl ] && ls .whl/*.whl >/dev/null 2>&1 && ! "$PYTHON" -c 'import nbval, plotly, ipykernel' 2>/dev/null; then
  site=${WHEEL_SITE:-/tmp/site}
  echo "=== wheels: installing .whl/*.whl into $site"
  "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --target "$site" .whl/*.whl >"$out/wheels.log" 2>&1 \
    && export PYTHONPATH="$site:$PYTHONPATH" && "$PYTHON" -m ipykernel install --user --name python3 >>"$out/wheels.log" 2>&1
  echo "=== wheels: rc=$?" | tee -a "$out/summary.txt"
fi
step() {  # step NAME CMD...: run (under STEP_TIMEOUT), log to $out/NAME.log, remember failure
  local name=$1; shift
  case " $STEPS " in *" $name "*) ;; *) echo "=== $name: skipped (not in STEPS)"; return 0 ;; esac
  [ "$STEP_TIMEOUT" = 0 ] || set -- timeout -k 10 "$STEP_TIMEOUT" "$@"
  local t0=$SECONDS
  echo "=== $name: $*"
  "$@" 2>&1 | tee "$out/$name.log"
  local rc=${PIPESTATUS[0]}
  local why=""
  [ "$rc" = 124 ] && why=" (stopped by STEP_TIMEOUT=$STEP_TIMEOUT s)"
  echo "=== $name: rc=$rc in $((SECONDS - t0)) s$why" >>"$out/summary.txt"
  echo "=== $name: rc=$rc in $((SECONDS - t0)) s$why"
  [ "$rc" = 0 ] || status=1
}
step doctor "$PYTHON" -m workbench doctor
step tests "$PYTHON" -m pytest -q -p no:cacheprovider tests --ignore=tests/browser
step notebooks "$PYTHON" -m pytest -q -p no:cacheprovider --nbval-lax --nbval-current-env --nbval-cell-timeout=300 notebooks/
gpu=$("$PYTHON" -c 'import torch; print(torch.cuda.get_device_name(0).replace(" ", "-"))' 2>/dev/null || echo gpu)
step bench "$PYTHON" -m workbench bench --quick --out "$out/$gpu-$(date -u +%Y-%m-%d).json"
step moe_goals "$PYTHON" benchmarks/moe_goals.py --out-dir "$out"
step kernel_goals "$PYTHON" benchmarks/kernel_goals.py --out-dir "$out"
for op in gemm softmax attention; do
  step "${op}_goals" "$PYTHON" benchmarks/kernel_goals.py --op "$op" --out-dir "$out"
done
echo "--- summary"; cat "$out/summary.txt"
exit $status
