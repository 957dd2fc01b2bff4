#!/usr/bin/env bash
# The GPU path, checked on a machine with CUDA (there is none here or in CI). From the repository
# root, with edge_hf importable (`pip install -e '.[gpu,train,dev]'`, or PYTHONPATH=.):
#
#     OUT=gpu-check bash benchmarks/gpu_check.sh
#
# 1. what the machine has: GPU, driver, torch's CUDA, ONNX Runtime's providers;
# 2. tests/test_hyperframe.py with CUDA present (test_cuda_matches_cpu runs instead of skipping:
#    windows stacked and normalised on the GPU equal the CPU's);
# 3. `edge-hf bench --sections prep`: window preparation per window, CPU and CUDA side by side;
# 4. the demo replayed through the daemon asking for [tensorrt, cuda, cpu]: the provider really
#    used is logged (an onnxruntime without GPU providers says so in one line and runs on the CPU),
#    the events are those of the CPU replay, and the time per window of each.
set -uo pipefail
out=${OUT:-gpu-check}
py=${PYTHON:-python3}
mkdir -p "$out"
status=0

echo "== machine" | tee "$out/check.txt"
{
    if command -v nvidia-smi >/dev/null; then
        nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    else
        echo "nvidia-smi: not found (no NVIDIA driver on this machine)"
    fi
    "$py" - <<'EOF'
import platform

import onnxruntime as ort
import torch

gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
print(f"python {platform.python_version()}, torch {torch.__version__} (CUDA {torch.version.cuda}), "
      f"GPU {gpu}; onnxruntime {ort.__version__}: {', '.join(ort.get_available_providers())}")
EOF
} 2>&1 | tee -a "$out/check.txt"

echo "== tests/test_hyperframe.py with CUDA" | tee -a "$out/check.txt"
"$py" -m pytest -q -p no:cacheprovider -rs tests/test_hyperframe.py 2>&1 | tail -n 6 |
    tee -a "$out/check.txt" || status=1

echo "== window preparation, CPU vs CUDA (edge-hf bench --sections prep)" | tee -a "$out/check.txt"
"$py" -m edge_hf.cli --log-level warning bench --sections prep --repeats 7 --out "$out" \
    >>"$out/check.txt" 2>&1 || status=1
[ -f "$out/bench.md" ] && cat "$out/bench.md" >>"$out/check.txt"

echo "== the demo through the daemon: [tensorrt, cuda, cpu] vs [cpu]" | tee -a "$out/check.txt"
"$py" -m edge_hf.cli synth --demo --out "$out/demo" >/dev/null 2>&1 || status=1
for providers in "tensorrt, cuda, cpu" "cpu"; do
    tag=${providers//[, ]/}
    cat >"$out/demo_$tag.yaml" <<EOF
device_id: gpu-check
model:
  path: models/fall-synth-mobilenet_v3_small-t3.onnx
  providers: [$providers]
  threshold: 0.75
cameras:
  - name: fall_demo
    source: $out/demo/fall_demo.mp4
state_dir: $out/state_$tag
EOF
    start=$(date +%s.%N)
    "$py" -m edge_hf.cli replay --config "$out/demo_$tag.yaml" >"$out/replay_$tag.txt" 2>&1 ||
        status=1
    end=$(date +%s.%N)
    echo "[$providers] $(grep -c '"type": "start"' "$out/replay_$tag.txt") start event(s), \
$(awk "BEGIN{printf \"%.1f\", $end - $start}") s; log: $(grep -m1 -io 'model .* on [A-Za-z]*ExecutionProvider' \
"$out/replay_$tag.txt")" | tee -a "$out/check.txt"
done
grep -ih "provider" "$out"/replay_*.txt | sort -u | head -n 8 | tee -a "$out/check.txt"
if diff <(grep '^{' "$out/replay_tensorrtcudacpu.txt") <(grep '^{' "$out/replay_cpu.txt") >/dev/null; then
    echo "events (ids, times, scores): the same with either provider list" | tee -a "$out/check.txt"
else
    echo "events DIFFER between the provider lists" | tee -a "$out/check.txt"
    status=1
fi
exit $status
