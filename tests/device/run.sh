#!/usr/bin/env bash
# On a machine with an NVIDIA GPU (the `run` tool's H200): the CUDA tests, then the
# benchmarks, logs and figures into OUTDIR. Needs .device-carry/ from tests/device/prepare.sh
# (that machine cannot build ember: no network, no FlatBuffers/CLI11/doctest/libzip);
# python3 with torch there makes the bench checkpoints and runs the PyTorch peer.
# Budget: under 6 minutes; each step has its own time limit and later steps are skipped
# when the total passes 5 minutes.
#   tests/device/run.sh OUTDIR            the tests, the command line, the benchmarks
#   tests/device/run.sh OUTDIR --profile  instead: where a decode step's time goes (kernel
#       times from Nsight Compute, SM clocks while decoding, decode at short and long context)
#   tests/device/run.sh OUTDIR --sanitize instead: the kernel tests under compute-sanitizer
#       (memcheck: out-of-bounds and misaligned accesses; racecheck: shared-memory races)
#   tests/device/run.sh OUTDIR --peer DIR  the full run, then CUDA decode and prefill of this
#       build and of an older one alternated, 3 rounds (DIR/bin/ember with DIR/lib/libember-cuda.so,
#       e.g. .device-carry/peer: copy a previous .device-carry's bin and lib there)
# Writes OUTDIR/run.log (everything), cuda_tests.log, bench.jsonl, figures.md, machine.txt.
set -uo pipefail
out=${1:?usage: tests/device/run.sh OUTDIR [--profile|--sanitize|--peer DIR]}
mode=${2:-}
peer=""
case $mode in
  "" | --profile | --sanitize) ;;
  --peer)
    peer=${3:?tests/device/run.sh OUTDIR --peer DIR}
    [[ -x $peer/bin/ember && -f $peer/lib/libember-cuda.so ]] || { echo "tests/device/run.sh: no $peer/bin/ember or $peer/lib/libember-cuda.so" >&2; exit 2; }
    peer=$(cd "$peer" && pwd) ;;
  *) echo "tests/device/run.sh: unknown mode $mode (--profile, --sanitize or --peer DIR)" >&2; exit 2 ;;
esac
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$(dirname "$0")/../.."
root=$(pwd)
exec > >(tee -a "$out/run.log") 2>&1
t_start=$(date +%s)
elapsed() { echo $(( $(date +%s) - t_start )); }
step() { echo; echo "=== [$(elapsed)s] $*"; }
in_budget() {
  if (( $(elapsed) > 300 )); then echo "SKIPPED (time budget): $*"; return 1; fi
}
status=0

step "machine"
{
  echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "host: $(uname -srm)"
  [[ -f /etc/os-release ]] && grep PRETTY_NAME /etc/os-release
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.memory,clocks.max.sm --format=csv 2>&1
  command -v nvcc > /dev/null && nvcc --version | tail -2
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())' 2>&1
  echo "cores: $(nproc)"
  [[ -f .device-carry/BUILD_INFO ]] && cat .device-carry/BUILD_INFO
} | tee "$out/machine.txt"

step "binaries and libraries"
bin=$root/.device-carry/bin
if [[ ! -x $bin/ember || ! -x $bin/ember_cuda_tests ]]; then
  echo "FAIL: $bin/ember or ember_cuda_tests missing: run tests/device/prepare.sh on the development machine and carry .device-carry"
  exit 2
fi
# cuBLASLt 13: the system's, CUDA's own folders, the pip wheel beside torch, or wherever it is.
cublas_dir=""
for d in $(ldconfig -p 2>/dev/null | awk '/libcublasLt\.so\.13/ {print $NF}' | xargs -r -n1 dirname) \
         /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda-13*/lib64 \
         $(python3 -c 'import nvidia, os; print(" ".join(os.path.join(p, s) for p in nvidia.__path__ for s in ("cu13/lib", "cublas/lib")))' 2>/dev/null) \
         $(find /usr/local /opt /usr/lib -name 'libcublasLt.so.13*' 2>/dev/null | head -1 | xargs -r dirname); do
  if compgen -G "$d/libcublasLt.so.13*" > /dev/null; then cublas_dir=$d; break; fi
done
echo "cuBLASLt: ${cublas_dir:-NOT FOUND}"
# Only ember's binaries get the carried libraries (python and torch keep their own).
libpath="$root/.device-carry/lib${cublas_dir:+:$cublas_dir}"
if ! LD_LIBRARY_PATH="$libpath" "$bin/ember" --version > /dev/null 2>&1; then
  echo "ember does not start with the system's libstdc++: adding the carried one"
  libpath="$libpath:$root/.device-carry/lib-std"
fi
LD_LIBRARY_PATH="$libpath" ldd "$bin/ember_cuda_tests" | grep -E "not found|cublas|libstdc|libc\.so" || true
echo "the CUDA module (opened with dlopen by ember; ember itself needs no CUDA library):"
LD_LIBRARY_PATH="$libpath" ldd "$root/.device-carry/lib/libember-cuda.so" | grep -E "not found|cublas|libstdc" || true
readelf -d "$bin/ember" 2>/dev/null | grep NEEDED | grep -i cu && { echo "FAIL: ember has a CUDA NEEDED entry"; status=1; }
LD_LIBRARY_PATH="$libpath" "$bin/ember" --version || { echo "FAIL: ember does not start here"; status=1; }
export EMBER_SOURCE_DIR=$root EMBER_SHARED_DIR=$root/.device-carry/shared
ember() { LD_LIBRARY_PATH="$libpath" "$bin/ember" "$@"; }

work=$(mktemp -d /tmp/ember-device.XXXXXX)
finish() {
  rm -rf "$work"
  step "done in $(elapsed)s, status $status"
  exit $status
}

if [[ $mode == --sanitize ]]; then
  step "compute-sanitizer on the CUDA kernel tests and one end-to-end test"
  if ! command -v compute-sanitizer > /dev/null; then
    echo "FAIL: no compute-sanitizer on this machine"; exit 1
  fi
  kernels='cuda embedding*,cuda layernorm*,cuda linear_gemv*,cuda dequantize*,cuda attention*,cuda kv_store*'
  LD_LIBRARY_PATH="$libpath" timeout 200 compute-sanitizer --tool memcheck --error-exitcode 1 --print-limit 20 \
    "$bin/ember_cuda_tests" -tc="$kernels,cuda context policies*" 2>&1 | tail -25
  rc=${PIPESTATUS[0]}; echo "memcheck exit status: $rc"; (( rc != 0 )) && status=1
  LD_LIBRARY_PATH="$libpath" timeout 120 compute-sanitizer --tool racecheck --error-exitcode 1 --print-limit 20 \
    "$bin/ember_cuda_tests" -tc="cuda attention*,cuda layernorm_linear_gemv*" 2>&1 | tail -25
  rc=${PIPESTATUS[0]}; echo "racecheck exit status: $rc"; (( rc != 0 )) && status=1
  finish
fi

if [[ $mode == --profile ]]; then
  step "profile: decode at short and long context, SM clocks, kernel times (Nsight Compute)"
  timeout 120 python3 tools/make_bench_model.py -o "$work/lecture.pt" --text models/shakespeare_char.vocab.txt > /dev/null
  timeout 120 python3 tools/make_bench_nanogpt.py -o "$work/gpt2.pt" --vocab "$work/gpt2.vocab.txt" > /dev/null
  ember convert "$work/lecture.pt" --vocab-text models/shakespeare_char.vocab.txt -o "$work/lecture.ember" > /dev/null
  ember convert "$work/gpt2.pt" --vocab-text "$work/gpt2.vocab.txt" -o "$work/gpt2.ember" > /dev/null
  for m in lecture gpt2; do
    for n in 15 $([[ $m == gpt2 ]] && echo 1023 || echo 255); do
      nvidia-smi --query-gpu=clocks.sm,clocks.mem,utilization.gpu --format=csv,noheader -lms 200 > "$work/clocks.$m.$n.txt" 2>&1 &
      smi=$!
      echo "$m int8, -p 1 -n $n: $(ember bench -m "$work/$m.ember" --backend cuda -p 1 -n $n --runs 5 | grep -E '^(prefill|decode):' | tr '\n' ' ')"
      kill $smi 2> /dev/null; wait $smi 2> /dev/null
      echo "  SM MHz, memory MHz, utilization while it ran: $(sort "$work/clocks.$m.$n.txt" | uniq -c | sort -rn | head -4 | tr -s ' ' | tr '\n' ';')"
    done
  done
  if command -v ncu > /dev/null; then
    for m in lecture gpt2; do
      # Skip the first token's eager step and the capture; then about four decode steps.
      LD_LIBRARY_PATH="$libpath" timeout 150 ncu --clock-control none --metrics gpu__time_duration.sum --csv --print-units base \
        --launch-skip 200 --launch-count 260 "$bin/ember" generate -m "$work/$m.ember" --backend cuda -n 40 --temperature 0 \
        > "$work/ncu.$m.csv" 2> "$work/ncu.$m.err" || { echo "ncu $m failed:"; tail -5 "$work/ncu.$m.err"; }
      cp "$work/ncu.$m.csv" "$out/" 2> /dev/null
      python3 - "$work/ncu.$m.csv" "$m" <<'PY'
import csv, collections, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 5]
if not rows: sys.exit(print("no ncu rows"))
h = rows[0]; kn = h.index("Kernel Name"); mv = h.index("Metric Value")
tot = collections.defaultdict(float); cnt = collections.Counter()
for r in rows[1:]:
    try: v = float(r[mv].replace(",", ""))
    except ValueError: continue
    name = r[kn].split("(")[0].split("<")[0][-60:]
    tot[name] += v; cnt[name] += 1
all_ns = sum(tot.values())
print(f"{sys.argv[2]}: {sum(cnt.values())} kernels, {all_ns/1e3:.1f} us in all")
for name, ns in sorted(tot.items(), key=lambda kv: -kv[1]):
    print(f"  {ns/all_ns*100:5.1f}%  {cnt[name]:4d} x {ns/cnt[name]/1e3:7.2f} us  {name}")
PY
    done
  else
    echo "no ncu on this machine"
  fi
  finish
fi

step "CUDA tests (ember_cuda_tests)"
LD_LIBRARY_PATH="$libpath" timeout 240 "$bin/ember_cuda_tests" --duration=true 2>&1 | tee "$out/cuda_tests.log"
rc=${PIPESTATUS[0]}
echo "ember_cuda_tests exit status: $rc (0 passed, 77 skipped: no device, other: failed)"
(( rc != 0 )) && status=1

step "the command line: the default model with --backend cuda against --backend cpu (f32 and int8 files)"
# f32: the same text byte for byte. int8: the CPU backend's activations are 8-bit (its integer
# dot products), CUDA's fp16, so the greedy texts may part at a near-tie (the CUDA test
# "int8 file, logits along 200 greedy tokens" holds that to a bound); shown, not failed.
for dt in f32 int8; do
  ember convert models/shakespeare_char.pt --vocab-text models/shakespeare_char.vocab.txt --dtype $dt -o "$work/default.$dt.ember" > /dev/null || { echo "FAIL: convert $dt"; status=1; continue; }
  for b in cpu cuda; do
    LD_LIBRARY_PATH="$libpath" timeout 60 "$bin/ember" generate -m "$work/default.$dt.ember" --backend $b -n 200 --temperature 0 > "$work/gen.$dt.$b.txt"
    echo "generate $dt --backend $b: exit $?"
  done
  if cmp -s "$work/gen.$dt.cpu.txt" "$work/gen.$dt.cuda.txt"; then
    echo "greedy text ($dt), 200 tokens: CUDA identical to CPU"
  elif [[ $dt == f32 ]]; then
    echo "greedy text (f32), 200 tokens: CUDA DIFFERS from CPU"; status=1
  else
    echo "greedy text (int8), 200 tokens: CUDA parts from CPU at byte $(cmp "$work/gen.$dt.cpu.txt" "$work/gen.$dt.cuda.txt" | awk '{print $5}' | tr -d ,) (8-bit activations on the CPU)"
  fi
done
head -c 300 "$work/gen.int8.cuda.txt"; echo
if [[ -f $work/default.int8.ember ]]; then
  ember generate -m "$work/default.int8.ember" --backend cuda -n 100 --temperature 0.8 --top-k 20 --seed 7 | head -c 200; echo
  for b in cpu cuda; do
    echo "eval int8 --backend $b: $(LD_LIBRARY_PATH="$libpath" timeout 90 "$bin/ember" eval -m "$work/default.int8.ember" --text .device-carry/shared/data/tinyshakespeare.txt --backend $b 2>&1)"
  done
fi

jsonl=$out/bench.jsonl
: > "$jsonl"
# bench_one NAME DTYPE FILE BACKEND [more ember bench args]: the human form into the log, the JSON line into bench.jsonl.
bench_one() {
  local name=$1 dtype=$2 file=$3 backend=$4; shift 4
  LD_LIBRARY_PATH="$libpath" timeout 120 "$bin/ember" bench -m "$file" --backend "$backend" "$@" || { echo "FAIL: ember bench $name $dtype $backend"; status=1; return; }
  LD_LIBRARY_PATH="$libpath" timeout 120 "$bin/ember" bench -m "$file" --backend "$backend" --json "$@" | sed "s/^{/{\"model\":\"$name\",\"dtype\":\"$dtype\",/" >> "$jsonl"
}

step "bench: the lecture's full configuration (n_layer 6, n_head 6, n_embd 384, block_size 256, vocab 65)"
if in_budget "lecture bench"; then
  timeout 120 python3 tools/make_bench_model.py -o "$work/gptpy_full.pt" --text models/shakespeare_char.vocab.txt
  for dt in int8 f16; do
    ember convert "$work/gptpy_full.pt" --vocab-text models/shakespeare_char.vocab.txt --dtype $dt -o "$work/full.$dt.ember" > /dev/null &&
      bench_one lecture $dt "$work/full.$dt.ember" cuda --runs 5
  done
  bench_one lecture int8 "$work/full.int8.ember" cpu --runs 3
  timeout 120 python3 bench/peer_torch_cuda.py "$work/gptpy_full.pt" --arch gptpy | sed 's/^{/{"model":"lecture",/' | tee -a "$jsonl"
  timeout 120 python3 bench/peer_torch_cuda.py "$work/gptpy_full.pt" --arch gptpy --dtype float16 | sed 's/^{/{"model":"lecture",/' | tee -a "$jsonl"
fi

step "bench: GPT-2 124M-sized nanoGPT (n_layer 12, n_head 12, n_embd 768, block_size 1024, vocab 50257)"
if in_budget "GPT-2 bench"; then
  timeout 120 python3 tools/make_bench_nanogpt.py -o "$work/gpt2.pt" --vocab "$work/gpt2.vocab.txt"
  ember convert "$work/gpt2.pt" --vocab-text "$work/gpt2.vocab.txt" --dtype int8 -o "$work/gpt2.int8.ember" > /dev/null &&
    bench_one gpt2-124m int8 "$work/gpt2.int8.ember" cuda --runs 3
  if in_budget "GPT-2 PyTorch peer"; then
    timeout 150 python3 bench/peer_torch_cuda.py "$work/gpt2.pt" --arch nanogpt | sed 's/^{/{"model":"gpt2-124m",/' | tee -a "$jsonl"
  fi
fi

if [[ -n $peer ]]; then
  step "this build against the peer $peer, alternated (CUDA, int8, decode from one token and a block_size prefill)"
  [[ -f $peer/BUILD_INFO ]] && cat "$peer/BUILD_INFO"
  # Each build with its own CUDA module (EMBER_CUDA_MODULE), the peer's libraries first.
  for round in 1 2 3; do
    for who in this peer; do
      if [[ $who == this ]]; then
        b=$bin/ember; module=$root/.device-carry/lib/libember-cuda.so; lp=$libpath
      else
        b=$peer/bin/ember; module=$peer/lib/libember-cuda.so; lp="$peer/lib:$libpath"
      fi
      for m in full gpt2; do
        [[ -f $work/$m.int8.ember ]] || continue
        echo "round $round, $m, $who: $(EMBER_CUDA_MODULE="$module" LD_LIBRARY_PATH="$lp" timeout 60 "$b" bench -m "$work/$m.int8.ember" --backend cuda --runs 3 | grep -E '^(prefill|decode):' | tr -s ' ' | tr '\n' ' ')"
      done
    done
  done
fi

step "figures"
python3 tests/device/figures.py "$jsonl" "$out/machine.txt" > "$out/figures.md" && cat "$out/figures.md"
finish
