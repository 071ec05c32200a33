#!/usr/bin/env bash
# GPU checks for a CUDA machine, about 10 minutes in all (name sections to run fewer):
#   1. the CUDA tests (tests named *cuda*, skipped elsewhere);
#   2. a bf16 mixed-precision training-step bench of a ~1B model (TinyLlama-1.1B shapes,
#      B=4, T=2048) eager and with torch.compile: tokens/s, TFLOP/s, MFU, peak memory;
#   3. forward+backward of our model vs transformers' LlamaForCausalLM on the GPU (bf16);
#   4. the inference systems live on CUDA (issue 13): int8/int4 weights' measured bytes vs the
#      prediction and decode time, naive vs fused attention kept bytes and time in bf16 over
#      T = 256 … 8192, speculative decoding's α, speedup and losslessness;
#   5. speed (issue 15): a bf16 training step of the ~1B model against an 8192² bf16 matmul
#      timed in the same process and the data sheet's dense peak (MFU), and one-token decode
#      against the bytes it must read over the measured HBM bandwidth;
#   6. the device calibration (issue 28 §3): live passes at six sizes, each predicted from the
#      passes before it (benchmarks/bench_calibration.py);
#   7. the lab's predictions for this GPU held against what it measures here: nvidia-smi's total
#      memory against the GPU table's, a bf16 training step's tokens/s against `predict train`,
#      one-token decode of Llama-3-8B shapes against `predict decode`.
# Sections to run may be named (`bash benchmarks/gpu_check.sh 1 6 7`); all by default.
# Where there is no CUDA it says so and exits 0.
set -uo pipefail
cd "$(dirname "$0")/.."

if ! python -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
    echo "gpu_check: no CUDA device on this machine (torch $(python -c 'import torch; print(torch.__version__)' 2>/dev/null || echo 'not installed')); nothing to check."
    exit 0
fi
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv
status=0
want() { [ -z "$SECTIONS" ] || [[ " $SECTIONS " == *" $1 "* ]]; }
SECTIONS="$*"

want 1 && {
echo "== 1/7 CUDA tests"
timeout 120 python -m pytest -q -k cuda tests/unit/experiments/test_experiments.py -p no:cacheprovider || status=1
}

want 2 && {
echo "== 2/7 bf16 training step, tinyllama-1.1b shapes, B=4 T=2048"
timeout 300 python - <<'PY' || status=1
import json, sys, time
import torch
from llama_lab.config import PRESETS
from llama_lab.errors import ExperimentError
from llama_lab.experiments import LiveSettings, live_pass

cfg = PRESETS["tinyllama-1.1b"]
for compile in (False, True):
    start = time.perf_counter()
    try:
        r = live_pass(cfg, 2048, 4, LiveSettings(device="cuda", dtype="bf16", iters=5, compile=compile))
    except (ExperimentError, RuntimeError) as exc:          # e.g. no Triton for torch.compile
        print(f"compile={compile}: failed: {str(exc).splitlines()[0]}")
        continue
    print(f"compile={compile}: {r.tokens_per_s:,.0f} tokens/s, step {r.step_ms:.1f} ms "
          f"(fwd {r.forward_ms:.1f} / bwd {r.backward_ms:.1f} / AdamW {r.optimizer_ms:.1f}), "
          f"{r.achieved_tflops:.1f} TFLOP/s, MFU {r.mfu:.1%} of {r.peak_flops / 1e12:.0f} TFLOP/s "
          f"({r.peak_flops_source}); peak memory {r.peak_memory_bytes / 2**30:.1f} GiB "
          f"(guard estimate {r.estimated_training_bytes / 2**30:.1f} GiB); activations saved "
          f"{r.activation_bytes_measured / 2**30:.2f} GiB vs all-bf16 estimate "
          f"{r.activation_bytes_estimated / 2**30:.2f} GiB; initial loss {r.initial_loss:.3f} "
          f"(ln V {r.ln_vocab:.3f}); warm-up {r.warmup_s:.1f} s; wall {time.perf_counter() - start:.0f} s")
    torch.cuda.empty_cache()
PY
}

want 3 && {
echo "== 3/7 ours vs transformers, forward+backward, bf16 (tinyllama shapes, 4 layers)"
timeout 60 python benchmarks/bench_vs_transformers.py --device cuda --dtype bf16 \
    --preset tinyllama-1.1b --n-layers 4 --seq-len 2048 --batch 4 --rounds 10 || status=1
}

want 4 && {
echo "== 4/7 inference systems on CUDA: quantisation, attention kept bytes, speculative decoding"
timeout 240 python - <<'PY' || status=1
from llama_lab.config import PRESETS
from llama_lab.experiments.flash import flash_sweep
from llama_lab.experiments.quantize import quantize_run
from llama_lab.experiments.speculative import speculative_run

for dtype in ("int8", "int4"):
    q = quantize_run("seed-demo", dtype, device="cuda")
    print(f"quantize {dtype}: measured {q.measured_weight_bytes:,} B, predicted "
          f"{q.predicted_weight_bytes:,} B (equal: {q.measured_weight_bytes == q.predicted_weight_bytes}); "
          f"logit max error {q.logit_max_abs_error:.4f}; loss {q.loss_fp:.4f} -> {q.loss_quantized:.4f}; "
          f"decode s {q.decode_s}")
cfg = PRESETS["llama-3-8b"].replace(n_layers=1)          # the 8B's heads (32 × 128, 8 KV), one layer
sweep = flash_sweep(cfg, (256, 1024, 4096, 8192), 1, "bf16", "cuda", "H200 141GB")
for row in sweep.rows:
    print(f"attention {row['path']:>5} T={row['seq_len']:>5}: kept {row['measured_bytes']:,} B "
          f"(predicted {row['predicted_bytes']:,}), {row['fwd_bwd_ms']:.2f} ms")
s = speculative_run(device="cuda")
for r in s.results:
    print(f"speculative {r.label}: alpha {r.measured_alpha:.3f}, speedup {r.measured_speedup:.2f}x "
          f"(formula {r.predicted_speedup:.2f}x, measured costs {r.predicted_speedup_measured_costs:.2f}x), "
          f"identical {r.identical_to_target_greedy}, time draft {r.draft_share:.0%} / verify "
          f"{r.verify_share:.0%} / loop {r.overhead_share:.0%}")
PY
}

want 5 && {
echo "== 5/7 speed: MFU of a bf16 training step (tinyllama shapes, B=4 T=2048), decode at the roof"
timeout 150 python benchmarks/bench_mfu.py --device cuda --dtype bf16 --preset tinyllama-1.1b \
    --seq-len 2048 --batch 4 --rounds 5 --matmul 8192 || status=1
timeout 90 python benchmarks/bench_decode_roof.py --device cuda --dtype bf16 \
    --preset tinyllama-1.1b --context 2048 --steps 64 || status=1
}

want 6 && {
echo "== 6/7 device calibration: live passes predicted from the ones before (tinyllama shapes, bf16)"
timeout 150 python benchmarks/bench_calibration.py --device cuda --dtype bf16 --preset tinyllama-1.1b \
    --sizes 1x512,4x512,2x2048,8x1024,4x2048,16x2048 --iters 5 ${OUT:+--json "$OUT/calibration.json"} || status=1
}

want 7 && {
echo "== 7/7 predictions for this GPU against what it measures"
command -v nvidia-smi >/dev/null && python - <<'PY' || status=1
import subprocess, torch
from llama_lab.runtime.hardware import gpu_for_device_name
gpu = gpu_for_device_name(torch.cuda.get_device_name(0))
total = subprocess.run(["nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,nounits"],
                       capture_output=True, text=True).stdout.split()[0]
table = f"{gpu.name}: {gpu.memory_bytes:,} B" if gpu else "not in the table"
print(f"nvidia-smi total {int(total) * 2**20:,} B; the GPU table's {table}; "
      f"torch total {torch.cuda.get_device_properties(0).total_memory:,} B")
PY
GPU_NAME=$(python -c "import torch; from llama_lab.runtime.hardware import gpu_for_device_name as g; x = g(torch.cuda.get_device_name(0)); print(x.name if x else '')")
if [ -n "$GPU_NAME" ]; then
    timeout 60 python -m llama_lab predict train --preset tinyllama-1.1b --gpu "$GPU_NAME" --gpus 1 --seq-len 2048 || status=1
    timeout 60 python -m llama_lab predict decode --preset llama-3-8b --gpu "$GPU_NAME" --batch 1 --prompt-len 512 --new-tokens 64 || status=1
fi
timeout 150 python benchmarks/bench_decode_roof.py --device cuda --dtype bf16 --preset llama-3-8b --context 512 --steps 64 || status=1
}

echo "gpu_check: done (status $status)"
exit $status
