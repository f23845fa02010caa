#!/usr/bin/env bash
# The text controller at the reference paper's scale (ControllerConfig preset "paper":
# Qwen2.5-1.5B-Instruct in bf16 from a local model directory, LoRA on every layer, SFT over the
# whole training split, GRPO for 1,500 steps), compared on one tournament. Needs a GPU and the
# model directory (nothing is downloaded); nothing else in the project depends on it.
#
#   experiments/run_paper_controller.sh /models/Qwen2.5-1.5B-Instruct [tournament] [out]
#
# Writes compare's outputs to OUT (default: paper-controller-<tournament>) and each
# controller's training report to OUT/reports/<agent>/seed-<seed>/.
set -euo pipefail
model_dir=${1:?usage: $0 MODEL_DIR [TOURNAMENT] [OUT]}
tournament=${2:-specialist-pool}
out=${3:-paper-controller-$tournament}
kwargs=$(python3 - "$model_dir" "$out" <<'PY'
import json, sys
model, out = sys.argv[1], sys.argv[2]
print(json.dumps({a: {"preset": "paper", "model": model, "report_dir": f"{out}/reports/{a}"}
                  for a in ("sft", "grpo", "kl-grpo")}))
PY
)
exec routing-gym compare --tournament "$tournament" --agents sft,grpo,kl-grpo,knn,per-benchmark --seeds 1 \
  --agent-kwargs "$kwargs" --out "$out"
