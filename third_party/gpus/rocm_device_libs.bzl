"""The ROCm device libraries the AMD compile actions link, gfx942's included.

Debian's rocm-device-libs (ROCm 5.2) has one bitcode file per target for the
ISA version constant, and none for gfx942 (MI300X), which came after 5.2.
That file holds a single constant, __oclc_ISA_version (major * 1000 +
minor * 100 + stepping: 9402 for gfx942), so the build makes it from gfx940's
(9400): disassembled with llvm-dis, the one number changed, assembled again
with llvm-as, into a copy of the bitcode folder that every compile action
passes to clang as --rocm-device-lib-path. Nothing is downloaded; a folder that
has the file already (a newer ROCm) is copied as it is.
"""

load(
    "@local_config_rocm//:defs.bzl",
    "HIP_CLANG_DEVICE_LIBS",
    "HIP_CLANG_INSTALL_HINT",
    "HIP_CLANG_LLVM_AS",
    "HIP_CLANG_LLVM_DIS",
)

# (target made, target it is made from, their __oclc_ISA_version values).
_DERIVED_ISA_VERSIONS = [
    ("942", "940", 9402, 9400),
]

def _derive(isa, base, version, base_version):
    made = "$out/oclc_isa_version_%s.bc" % isa
    from_file = "$src/oclc_isa_version_%s.bc" % base
    return "\n".join([
        "if [ ! -f %s ]; then" % made,
        "  [ -f %s ] || { echo \"%s not found; %s\" >&2; exit 1; }" % (
            from_file,
            from_file,
            HIP_CLANG_INSTALL_HINT,
        ),
        "  %s %s -o \"$tmp/base.ll\"" % (HIP_CLANG_LLVM_DIS, from_file),
        "  sed 's/ constant i32 %d, / constant i32 %d, /' \"$tmp/base.ll\" > \"$tmp/made.ll\"" % (
            base_version,
            version,
        ),
        # Exactly the one constant changed: anything else means the file is
        # not the single-constant library this expects.
        "  [ \"$(diff \"$tmp/base.ll\" \"$tmp/made.ll\" | grep -c '^>')\" = 1 ] ||" +
        " { echo \"%s: expected one __oclc_ISA_version = %d\" >&2; exit 1; }" % (
            from_file,
            base_version,
        ),
        "  grep -q '^@__oclc_ISA_version = .* constant i32 %d, ' \"$tmp/made.ll\" ||" % version +
        " { echo \"%s: expected one __oclc_ISA_version = %d\" >&2; exit 1; }" % (
            from_file,
            base_version,
        ),
        "  %s \"$tmp/made.ll\" -o %s" % (HIP_CLANG_LLVM_AS, made),
        "fi",
    ])

def _rocm_device_libs_impl(ctx):
    out = ctx.actions.declare_directory(ctx.label.name)
    for tool in (HIP_CLANG_LLVM_AS, HIP_CLANG_LLVM_DIS, HIP_CLANG_DEVICE_LIBS):
        if "'" in tool or "\"" in tool or "$" in tool or " " in tool:
            fail("rocm_device_libs: %r must not contain quotes, $ or spaces" % tool)
    script = "\n".join([
        "set -eu",
        "src=%s" % HIP_CLANG_DEVICE_LIBS,
        "out=%s" % out.path,
        "[ -f \"$src/ockl.bc\" ] || { echo \"$src/ockl.bc not found; %s\" >&2; exit 1; }" %
        HIP_CLANG_INSTALL_HINT,
        "for tool in %s %s; do" % (HIP_CLANG_LLVM_AS, HIP_CLANG_LLVM_DIS),
        "  [ -x \"$tool\" ] || { echo \"$tool not found; %s\" >&2; exit 1; }" %
        HIP_CLANG_INSTALL_HINT,
        "done",
        "tmp=$(mktemp -d); trap 'rm -rf \"$tmp\"' EXIT",
        "mkdir -p \"$out\"",
        "cp \"$src\"/*.bc \"$out\"/",
    ] + [_derive(*d) for d in _DERIVED_ISA_VERSIONS] + [""])
    ctx.actions.run_shell(
        outputs = [out],
        command = script,
        mnemonic = "RocmDeviceLibs",
        progress_message = "Making the ROCm device libraries for gfx942",
        # Reads the system's bitcode folder, which Bazel does not track.
        execution_requirements = {"no-remote": "1"},
    )
    return [DefaultInfo(files = depset([out]))]

rocm_device_libs = rule(
    implementation = _rocm_device_libs_impl,
    doc = "A copy of Debian's ROCm bitcode folder with gfx942's ISA version file.",
)
