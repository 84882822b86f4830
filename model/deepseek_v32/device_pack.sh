#!/bin/bash
# Packs the device binaries of the layer step (built here with
#   bazel build --config=cuda --dynamic_mode=off //attention:dense_ops_test \
#     //attention/gpu:dense_bench //model/deepseek_v32:model_runner_test \
#     //model/deepseek_v32:layer_step_bench
# ) and the shared objects they need into payload.tar.xz beside
# device_run.sh, which unpacks and runs them on the GPU machine (no Bazel
# there). Extra binaries (a build of a merged tree, say) are passed as
# arguments. Usage: device_pack.sh [extra binaries...]; DEST sets the payload
# directory.
set -e
P="${DEST:-/work/main/.device/step}"
S=/tmp/step_pack
rm -rf $S && mkdir -p $S/bin $S/lib
cd "$(dirname "$0")/../.."
cp bazel-bin/attention/dense_ops_test bazel-bin/attention/gpu/dense_bench bazel-bin/model/deepseek_v32/model_runner_test bazel-bin/model/deepseek_v32/layer_step_bench "$@" $S/bin/
chmod u+w $S/bin/*; strip $S/bin/*
for f in $(ldd $S/bin/* | grep -o '/lib/x86_64-linux-gnu/lib[^ ]*' | grep -v "libc.so\|libm.so\|libgcc_s\|libstdc++\|ld-linux" | sort -u); do cp -n $f $S/lib/; done
rm -f $P/READY
tar cJf $P/payload.tar.xz -C $S bin lib
cp attention/gpu/dense_torch_reference.py $P/
cp model/deepseek_v32/device_run.sh $P/run.sh
du -sh $P
