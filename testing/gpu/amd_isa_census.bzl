"""amd_isa_census: the AMD ISA census of what some targets link.

An aspect walks the targets' deps and collects every object the AMD build of
a gpu_kernel_library made (attention/gpu/gpu_kernels.bzl:
`_<library>_rocm/<source>.o`), so the census sees all the kernels those
targets carry and nothing left over from an earlier build. The census itself
is testing/gpu/amd_isa_census.py, run as one action whose output is the
table; the action fails, and the build with it, when a kernel spills or its
LDS exceeds 64 KiB, or a shared object among the targets lacks a target of
$(DSA_ROCM_ARCHS).
"""

load(
    "@local_config_rocm//:defs.bzl",
    "HIP_CLANG_LLVM_CXXFILT",
    "HIP_CLANG_LLVM_OBJCOPY",
    "HIP_CLANG_LLVM_OBJDUMP",
    "HIP_CLANG_LLVM_READELF",
    "HIP_CLANG_OFFLOAD_BUNDLER",
)

_AmdObjectsInfo = provider(
    doc = "The AMD device objects a target links, transitively.",
    fields = {"objects": "depset of the gpu_kernel_library rocm objects"},
)

def _is_amd_object(f):
    return f.extension == "o" and f.dirname.endswith("_rocm")

def _amd_objects_aspect_impl(_target, ctx):
    direct = []
    if hasattr(ctx.rule.files, "srcs"):
        direct = [f for f in ctx.rule.files.srcs if _is_amd_object(f)]
    transitive = [
        dep[_AmdObjectsInfo].objects
        for dep in getattr(ctx.rule.attr, "deps", [])
        if _AmdObjectsInfo in dep
    ]
    return [_AmdObjectsInfo(objects = depset(direct, transitive = transitive))]

_amd_objects_aspect = aspect(
    implementation = _amd_objects_aspect_impl,
    attr_aspects = ["deps"],
)

def _amd_isa_census_impl(ctx):
    objects = depset(transitive = [
        t[_AmdObjectsInfo].objects
        for t in ctx.attr.deps
    ]).to_list()
    shared_objects = [
        f
        for t in ctx.attr.deps
        for f in t[DefaultInfo].files.to_list()
        if f.extension == "so"
    ]
    args = ctx.actions.args()
    args.add(ctx.file._script)
    args.add("--targets=" + ctx.var["DSA_ROCM_ARCHS"])
    args.add("--output", ctx.outputs.out)
    args.add("--bundler", HIP_CLANG_OFFLOAD_BUNDLER)
    args.add("--readelf", HIP_CLANG_LLVM_READELF)
    args.add("--objdump", HIP_CLANG_LLVM_OBJDUMP)
    args.add("--objcopy", HIP_CLANG_LLVM_OBJCOPY)
    args.add("--cxxfilt", HIP_CLANG_LLVM_CXXFILT)
    args.add_all(shared_objects, before_each = "--shared_object")
    args.add_all(objects)
    ctx.actions.run(
        executable = "/usr/bin/python3",
        arguments = [args],
        inputs = [ctx.file._script] + objects + shared_objects,
        outputs = [ctx.outputs.out],
        mnemonic = "AmdIsaCensus",
        progress_message = "AMD ISA census of %d objects" % len(objects),
    )
    return [DefaultInfo(files = depset([ctx.outputs.out]))]

amd_isa_census = rule(
    implementation = _amd_isa_census_impl,
    doc = "The AMD ISA census (markdown table) of the kernels `deps` link.",
    attrs = {
        "deps": attr.label_list(
            aspects = [_amd_objects_aspect],
            doc = "Targets whose AMD kernels to count; a shared object " +
                  "among their files must carry every offload target.",
        ),
        "out": attr.output(mandatory = True),
        "_script": attr.label(
            default = "//testing/gpu:amd_isa_census.py",
            allow_single_file = True,
        ),
    },
)
