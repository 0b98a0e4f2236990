#!/usr/bin/env bash
# The one prepared GPU run: a single command of at most 570 s on the offline H200 box (../shared/gpu/README.md).
#
#   bash scripts/gpu-run.sh            # on the GPU box, from the project root (nothing to install first)
#   bash scripts/gpu-run.sh --smoke    # the same script as a cpu-mode dry run (make test runs it: < 1 minute)
#
# Everything is written to a scratch folder; a trap tars it into ONE file, $OUT/gpu-run-<UTC stamp>.tar.gz, on any
# exit (a step's timeout, SIGTERM from an outer timeout, an error) and copies summary.txt beside it: two files,
# within the box's 8-file limit. In order, each step under its own timeout, none past the budget:
#   1. smoke (30 s): versions, numba.cuda.is_available(), a cupy bf16 round trip; then one cuda_wgmma_tma GEMM
#      against torch in its own process under `timeout 60` (an mbarrier wait that never completes cannot hang us);
#   2. the GPU unit tests that need no notebook wheels (plotly-free), under a budget;
#   3. the goal measurements: gemm, softmax, attention, decode, norms, cute (benchmarks/kernel_goals.py --op X) and moe
#      (benchmarks/moe_goals.py), each its own process and timeout; each saves its JSON after every measurement,
#      so a step stopped by its timeout keeps what it measured;
#   4. whatever time is left: the notebooks under nbval, if the wheels were carried in .whl/.
# The box has no CuTe DSL: carry out/cute-aot (python -m kernels._cute_aot, here) for the cute step and variants.
# Knobs: GPU_RUN_BUDGET (s, default 555), STEPS (default "smoke tests gemm softmax attention decode norms cute moe
# notebooks"), T_<STEP> (a step's cap in s), PYTHON (default python3, or .venv/bin/python when present).
#
# Turning the tarball into committed records (results/README.md, "From a GPU run"):
#   python scripts/import-gpu-results.py gpu-run-<stamp>.tar.gz     # validates, refuses emulated, adds provenance
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
smoke=0
[ "${1:-}" = "--smoke" ] && smoke=1
PYTHON=${PYTHON:-$([ -x .venv/bin/python ] && echo .venv/bin/python || echo python3)}
BUDGET=${GPU_RUN_BUDGET:-555}
STEPS=${STEPS:-smoke tests gemm softmax attention decode norms cute moe notebooks}
RESERVE=12  # seconds kept for the trap: tar, summary
stamp=$(date -u +%Y%m%dT%H%M%SZ)
out=${OUT:-$root/out/gpu-run}
mkdir -p "$out"
scratch=$(mktemp -d "${TMPDIR:-/tmp}/gpu-run.XXXXXX")
run_name=gpu-run-$stamp
dir=$scratch/$run_name
mkdir -p "$dir/logs" "$dir/results"
summary=$dir/summary.txt
status=0

say() { echo "$*" | tee -a "$summary"; }

finish() {  # on EXIT, whatever caused it: one tarball + summary.txt under $out
  local rc=$?
  trap - EXIT TERM INT
  [ "$rc" = 0 ] && rc=$status
  say "=== end: exit $rc after $SECONDS s (budget $BUDGET s)"
  say "tarball: $run_name.tar.gz (unpack: tar -xzf $run_name.tar.gz; import: python scripts/import-gpu-results.py $run_name.tar.gz)"
  tar -czf "$out/$run_name.tar.gz" -C "$scratch" "$run_name" && cp "$summary" "$out/summary.txt"
  rm -rf "$scratch"
  exit "$rc"
}
child=""
stopped() {  # SIGTERM/SIGINT from outside (an outer timeout): stop the running step (timeout forwards the
  # signal, so a goal script saves what it has), then leave through finish
  say "=== stopped by a signal after $SECONDS s"
  [ -n "$child" ] && kill -TERM "$child" 2>/dev/null && { wait "$child" 2>/dev/null || true; }
  status=143
  exit 143
}
trap finish EXIT
trap stopped TERM INT

export PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
if [ "$smoke" = 1 ]; then
  export WORKBENCH_MODE=cpu WORKBENCH_CPU_THREADS=${WORKBENCH_CPU_THREADS:-1}
else
  export WORKBENCH_MODE=gpu
fi
say "=== gpu-run $stamp: mode $WORKBENCH_MODE$([ "$smoke" = 1 ] && echo ' (--smoke dry run: emulated, nothing here is a GPU figure)'), python $PYTHON, budget $BUDGET s"
say "git: $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet 2>/dev/null || echo ' (uncommitted changes)')"

left() { echo $((BUDGET - SECONDS - RESERVE)); }
wanted() { case " $STEPS " in *" ${1%_gemm} "*) return 0 ;; *) return 1 ;; esac; }  # smoke_gemm: with smoke

# step NAME CAP CMD...: run CMD under min(CAP, what is left) seconds, log to logs/NAME.log, one summary line.
# SIGINT first (pytest and the goal scripts then save and report what finished), SIGKILL 8 s later.
step() {
  local name=$1 cap=$2; shift 2
  local var="T_${name^^}"; cap=${!var:-$cap}
  if ! wanted "$name"; then say "=== $name: skipped (not in STEPS)"; return 0; fi
  local t=$(( $(left) < cap ? $(left) : cap ))
  if [ "$t" -lt 5 ]; then say "=== $name: skipped (budget spent: $(left) s left)"; status=1; return 0; fi
  local t0=$SECONDS
  echo "=== $name (timeout $t s): $*"
  timeout -s INT -k 8 "$t" "$@" >"$dir/logs/$name.log" 2>&1 &  # in the background: a signal's trap runs at once
  child=$!
  wait "$child"
  local rc=$?
  child=""
  local why=""
  case $rc in 124|137) why=" (stopped by its ${t} s timeout)" ;; esac
  say "=== $name: rc=$rc in $((SECONDS - t0)) s$why"
  tail -n 4 "$dir/logs/$name.log" | sed 's/^/    /' | tee -a "$summary"
  [ "$rc" = 0 ] || status=1
}

# ---- 1. smoke
step smoke 30 "$PYTHON" scripts/gpu_smoke.py --out "$dir/smoke.json"
step smoke_gemm 60 "$PYTHON" scripts/gpu_smoke.py --gemm --out "$dir/smoke-gemm.json"
"$PYTHON" - "$dir/smoke.json" >>"$summary" 2>/dev/null <<'EOF' || say "versions: smoke.json missing"
import json, sys
f = json.load(open(sys.argv[1]))["facts"]
v = f.get("versions", {})
print("device: {} (cc {})".format(f["device"]["name"], f["device"]["cc"]))
print("versions: " + ", ".join(f"{k} {v.get(k)}" for k in ("torch", "triton", "cupy", "driver", "cuda", "nvrtc",
                                                             "numba", "numba_cuda", "python")))
print("triton guard: " + ("ok: " if f["triton_guard"]["ok"] else "PROBLEM: ") + f["triton_guard"]["detail"])
EOF

# ---- 2. unit tests that need no notebook wheels
if [ "$smoke" = 1 ]; then
  # -p no:nbval: the box has no nbval while this step runs (the wheels come in step 4), so its plugin (nbformat,
  # jsonschema, jupyter_client: ~2 s of CPU at pytest's start) is not loaded here either
  tests=(-p no:nbval tests/test_interop.py)
else
  tests=(tests/test_gemm.py tests/test_softmax.py tests/test_rmsnorm.py tests/test_attention_triton.py
         tests/test_attention_contract.py tests/test_moe_triton.py tests/test_moe_fp8.py tests/test_moe_contracts.py
         tests/test_tma.py tests/test_interop.py tests/test_versions.py tests/test_registry.py tests/test_checker.py)
fi
step tests 110 "$PYTHON" -m pytest -q -p no:cacheprovider -o addopts= -rfE --junitxml="$dir/tests.xml" "${tests[@]}"

# ---- 3. the goal measurements
if [ "$smoke" = 1 ]; then  # the dry run: the same scripts at cpu-mode sizes, the four kernel ops in one process
  ops=$(for o in gemm softmax attention decode norms cute; do wanted "$o" && printf '%s,' "$o"; done)
  [ -z "$ops" ] || STEPS="$STEPS kernel_goals" step kernel_goals 120 "$PYTHON" benchmarks/kernel_goals.py --op "$ops" \
    --out-dir "$dir/results" --smoke
  step moe 110 "$PYTHON" benchmarks/moe_goals.py --out-dir "$dir/results" --smoke
else
  for op in gemm softmax attention decode norms cute; do
    cap=$(case $op in gemm) echo 120 ;; softmax) echo 60 ;; attention) echo 90 ;; decode) echo 90 ;; norms) echo 75 ;;
          cute) echo 60 ;; esac)  # cute: the DSL detects the GPU's arch itself (CUTE_DSL_ARCH is for no-GPU compiles)
    step "$op" "$cap" "$PYTHON" benchmarks/kernel_goals.py --op "$op" --out-dir "$dir/results"
  done
  step moe 110 "$PYTHON" benchmarks/moe_goals.py --out-dir "$dir/results"
fi
"$PYTHON" - "$dir/results" >>"$summary" 2>/dev/null <<'EOF'
import json, pathlib, sys
for g in sorted(pathlib.Path(sys.argv[1]).glob("goals/*.json")):
    doc = json.loads(g.read_text())
    print(f"goals {g.name}: " + ("; ".join(f"{k} {v['ratio']:.2f} (goal {v['goal']}, {'met' if v['met'] else 'NOT met'})"
                                           for k, v in doc["goals"].items()) or "no ratio (see notes)"))
    for n in doc.get("notes", [])[:6]:
        print(f"    note: {n[:200]}")
EOF

# ---- 4. notebooks, with whatever is left, if the wheels were carried
if wanted notebooks; then
  if [ "$smoke" = 1 ]; then
    say "=== notebooks: skipped (--smoke: cpu-mode notebooks run in make test, not here)"
  elif ! ls .whl/*.whl >/dev/null 2>&1; then
    say "=== notebooks: skipped (no .whl/ carried: ../shared/gpu/fetch-wheels.sh, then carry .whl)"
  else
    site=${WHEEL_SITE:-/tmp/site}
    "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --target "$site" .whl/*.whl >"$dir/logs/wheels.log" 2>&1 \
      && export PYTHONPATH="$site:$PYTHONPATH" \
      && "$PYTHON" -m ipykernel install --user --name python3 >>"$dir/logs/wheels.log" 2>&1 \
      || say "=== wheels: install failed (logs/wheels.log)"
    # Notebook 09 builds layouts with the CuTe DSL itself, which this box lacks (its wheel is over the carry limit).
    nb_skip=()
    if ! "$PYTHON" -c 'import cutlass' >/dev/null 2>&1; then
      nb_skip=(--ignore=notebooks/09-cute-layouts.ipynb)
      say "=== notebooks: 09-cute-layouts skipped (no CuTe DSL here: nvidia-cutlass-dsl is not installed)"
    fi
    step notebooks 100000 "$PYTHON" -m pytest -q -p no:cacheprovider -o addopts= --nbval-lax --nbval-current-env \
      --nbval-cell-timeout=240 --junitxml="$dir/notebooks.xml" "${nb_skip[@]}" notebooks/
  fi
fi
exit $status
