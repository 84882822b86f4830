#!/usr/bin/env bash
# The main job; the README's first command.
#
#   testing/run.sh [plan arguments]
#
# Without arguments it shows the indexer-skip plan of the seed's probe: GLM-5.1
# on ROCm (MI300X, gfx942) for a pure 1K-token prefill, where every main layer
# skips scoring and the MTP layer still scores. With arguments, they go to the
# plan tool (see `testing/run.sh --help`).
set -euo pipefail
cd "$(dirname "$0")/.."
testing/setup_debian.sh
if [ $# -eq 0 ]; then
  set -- --model=glm-5.1 --platform=rocm --arch=gfx942 --requests=0+1024
fi
exec bazel run --ui_event_filters=-info,-stdout,-stderr --noshow_progress \
  //model/deepseek_v32:plan -- "$@"
