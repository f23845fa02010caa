#!/usr/bin/env bash
# Every committed result whose joules come from the zeroeval-math / llmrouter builds, rerun after the
# energy law (issue 26) changed their default derived energy (models priced by the parameter-count fit
# before: see experiments/results/energy_laws/README.md). Cached builds of an older energy law are
# re-priced automatically (no regrading). Run from the repository root:
#
#   bash experiments/energy_laws_rerun.sh            # ROUTING_GYM_DATA_DIR defaults to ../shared/data
set -euo pipefail
export OMP_NUM_THREADS=1 ROUTING_GYM_DATA_DIR="${ROUTING_GYM_DATA_DIR:-../shared/data}"
python experiments/energy_laws.py --seeds 2 --out experiments/results/energy_laws
for t in llmrouter zeroeval-math; do
  python experiments/compare.py --tournament "$t" --seeds 5 --out "experiments/results/compare-$t"
  routing-gym frontier --tournament "$t" --out "experiments/results/frontier-$t"
done
python experiments/energy_model_study.py --seeds 2 --out experiments/results/energy_models
