#!/usr/bin/env bash
# The main job; the README's first command.
#
#   testing/run.sh [prefill_bench flags]   # the seed's measurements (--help)
#   testing/run.sh plan [plan flags]       # the per-layer plan tool
#
# Without arguments it runs prefill_bench (bench/prefill/) with its
# defaults: the seed's four workloads (1k_c1, 1900_c1, 1k_c32, 8k_c1) on a
# whole attention stack, the arms main / skip / no_indexer in ABBA order, on
# a GPU when one is present and otherwise on emulated-rocm (ROCm's
# capabilities executing the CPU kernels, with a small preset). `plan` shows what every layer does for one
# batch; without further arguments, the seed's probe (GLM-5.1 on ROCm, a
# pure 1K-token prefill).
set -euo pipefail
# Paths given relative to where the command was typed stay relative to it.
args=()
for arg in "$@"; do
  case "$arg" in
    --json=[!/]*|--plot=[!/]*) args+=("${arg%%=*}=$PWD/${arg#*=}") ;;
    *) args+=("$arg") ;;
  esac
done
set -- ${args[@]+"${args[@]}"}
cd "$(dirname "$0")/.."
quiet=(--ui_event_filters=-info,-stdout,-stderr --noshow_progress)

if [ "${1:-}" = plan ]; then
  shift
  testing/setup_debian.sh
  if [ $# -eq 0 ]; then
    set -- --model=glm-5.1 --platform=rocm --arch=gfx942 --requests=0+1024
  fi
  exec bazel run "${quiet[@]}" //model/deepseek_v32:plan -- "$@"
fi

setup=()
for arg in "$@"; do
  case "$arg" in
    --plot=*) setup=(--plot) ;;  # matplotlib from Debian, on first use
  esac
done
testing/setup_debian.sh "${setup[@]}"
exec bazel run "${quiet[@]}" //bench/prefill:prefill_bench -- "$@"
