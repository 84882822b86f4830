#!/usr/bin/env python3
"""The AMD ISA census: what every AMD kernel instance of the build compiles to.

For each code object the AMD build produced (one per offload target in each
object's .hip_fatbin), and each kernel in it: the matrix instructions
(v_mfma_*, counted by type, from llvm-objdump), the VGPR, AGPR and SGPR
counts, the static LDS, the scratch (private segment) bytes per lane and the
spill counts (from the AMDGPU metadata note, llvm-readelf --notes), and the
waves per SIMD those registers and that LDS allow. Nothing here runs a
kernel: no AMD GPU is needed, or used.

Fails (exit 1, one line per problem naming the kernel and target) when a
kernel spills (scratch, a spill count, a dynamic stack) or its static LDS
exceeds 64 KiB, or when a shared object given with --shared_object lacks a
code object for one of --targets.

  amd_isa_census.py --targets=gfx90a,gfx942 [--output=census.md]
      [--shared_object=lib.so ...] object.o ...

Run by //testing/gpu:amd_isa_census (bazel build --config=rocm), which passes
every object the ROCm plugin and the device layer's test kernels link.
"""

import argparse
import collections
import os
import re
import struct
import subprocess
import sys
import tempfile

BUNDLE_MAGIC = b"__CLANG_OFFLOAD_BUNDLE__"
LDS_LIMIT = 64 * 1024  # bytes per workgroup on CDNA (gfx90a, gfx94x)

# Occupancy on CDNA2/3 (gfx90a, gfx94x): at most 8 waves per SIMD; 512
# VGPRs per lane per SIMD, arch and accumulation registers in one file,
# allocated in granules of 8; 64 KiB of LDS per CU, 4 SIMDs per CU.
MAX_WAVES_PER_SIMD = 8
VGPRS_PER_SIMD = 512
VGPR_GRANULE = 8
SIMDS_PER_CU = 4
WAVE = 64

# Matrix-bound kernels, by name: the ones whose work is a matrix product and
# should run on MFMA. One that has no v_mfma on a target takes the FMA
# fallback there; the table says so.
MATRIX_KERNELS = [
    "IndexerLogitsMmaKernel",  # the logits Q K^T, fp8 MFMA
    "IndexerLogitsFmaKernel",  # its plain-FMA kernel
    "SparseMlaMmaKernel",  # Q K^T and P V, bf16 MFMA
    "SparseMlaFmaKernel",  # the plain-FMA kernel (shapes the MFMA one lacks)
    "WuvFmaKernel",  # W_UV of the FMA path
    "DenseAttentionKernel",  # Q K^T and P V, bf16 MFMA
    "Bf16GemmKernel",  # the K/V decompression GEMM, bf16 MFMA
    "GemmTiledKernel",  # the gemm dense op without a vendor BLAS
    "MmaBf16CheckKernel",  # the bf16 MFMA test kernel
]


def run(cmd):
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit("amd_isa_census: %s failed: %s" %
                 (" ".join(cmd), result.stderr.strip()))
    return result.stdout


def fatbin(tools, path, tmp):
    """The .hip_fatbin section of an ELF file, or None when it has none."""
    sections = run([tools.readelf, "-S", "-W", path])
    if not re.search(r"\s\.hip_fatbin\s", sections):
        return None
    out = os.path.join(tmp, "fatbin")
    run([tools.objcopy, "--dump-section=.hip_fatbin=" + out, path,
         os.devnull])
    with open(out, "rb") as f:
        return f.read()


def bundles(data):
    """The offload bundles of a .hip_fatbin section, in order.

    A linked file's section is the objects' bundles one after another, each
    aligned; a bundle is the magic, an entry count, and per entry an offset
    (from the bundle's start), a size and a target id.
    """
    found = []
    at = data.find(BUNDLE_MAGIC)
    while at >= 0:
        (count,) = struct.unpack_from("<Q", data, at + len(BUNDLE_MAGIC))
        pos = at + len(BUNDLE_MAGIC) + 8
        end = pos
        for _ in range(count):
            offset, size, id_len = struct.unpack_from("<QQQ", data, pos)
            pos += 24 + id_len
            end = max(end, at + offset + size, pos)
        found.append(data[at:end])
        at = data.find(BUNDLE_MAGIC, end)
    return found


def code_objects(tools, bundle, tmp, index):
    """{target: code object path} of one bundle (clang-offload-bundler)."""
    path = os.path.join(tmp, "bundle%d" % index)
    with open(path, "wb") as f:
        f.write(bundle)
    objects = {}
    listed = run([tools.bundler, "--list", "--type=o", "--input=" + path])
    for entry in listed.split():
        if "-amdgcn-amd-amdhsa-" not in entry:
            continue
        target = entry.split("--", 1)[1]
        out = "%s.%s.co" % (path, target.replace(":", "_"))
        run([
            tools.bundler, "--unbundle", "--type=o", "--input=" + path,
            "--targets=" + entry, "--output=" + out
        ])
        objects[target] = out
    return objects


def kernel_metadata(tools, code_object):
    """The amdhsa.kernels entries of the metadata note: [{key: value}]."""
    kernels = []
    in_kernels = False
    for line in run([tools.readelf, "--notes", code_object]).splitlines():
        if line.startswith("amdhsa.kernels:"):
            in_kernels = True
            continue
        if in_kernels and re.match(r"^\S", line):
            in_kernels = False
        if not in_kernels:
            continue
        # A kernel's scalar fields sit at indentation 4 ("  - " opens one);
        # deeper lines are its arguments.
        m = re.match(r"^(  - |    )\.([a-z_]+):\s+(\S.*)?$", line)
        if not m:
            continue
        if m.group(1) == "  - ":
            kernels.append({})
        if m.group(3) is not None:
            kernels[-1][m.group(2)] = m.group(3).strip()
    return kernels


def instructions(tools, code_object):
    """{symbol: Counter of mnemonics} from the disassembly of .text."""
    counts = collections.defaultdict(collections.Counter)
    symbol = None
    text = run([tools.objdump, "-d", "--no-show-raw-insn", code_object])
    for line in text.splitlines():
        m = re.match(r"^[0-9a-f]+ <(.+)>:$", line)
        if m:
            symbol = m.group(1)
            continue
        if symbol and line.startswith("\t"):
            fields = line.split()
            if fields and fields[0] != "...":  # "..." marks padding
                counts[symbol][fields[0]] += 1
    return counts


def demangle(tools, names):
    """{symbol: short name}: demangled, without parameters or namespaces."""
    if not names:
        return {}
    out = subprocess.run([tools.cxxfilt],
                         input="\n".join(names),
                         capture_output=True,
                         text=True,
                         check=True).stdout.splitlines()
    short = {}
    for name, pretty in zip(names, out):
        # The parameter list (its types may hold one level of parentheses).
        pretty = re.sub(r"\((?:[^()]|\([^()]*\))*\)$", "", pretty)
        pretty = re.sub(r"^void ", "", pretty)
        pretty = re.sub(r"[a-z_:]*\(anonymous namespace\)::", "", pretty)
        pretty = re.sub(r"\bdsa::[a-z_:]*::", "", pretty)
        pretty = re.sub(r"\(Fp8Format\)0", "e4m3fn", pretty)
        pretty = re.sub(r"\(Fp8Format\)1", "e4m3fnuz", pretty)
        short[name] = pretty
    return short


def waves_per_simd(vgprs, sgprs, lds, workgroup):
    """Waves per SIMD the registers and the static LDS allow."""
    alloc = -(-max(vgprs, 1) // VGPR_GRANULE) * VGPR_GRANULE
    waves = min(MAX_WAVES_PER_SIMD, VGPRS_PER_SIMD // alloc)
    # GFX9's SGPR table (LLVM's getOccupancyWithNumSGPRs).
    waves = min(waves, 10 if sgprs <= 80 else 9 if sgprs <= 88 else
                8 if sgprs <= 100 else 7)
    if lds > 0:
        # Workgroups per CU that the LDS holds, their waves over 4 SIMDs.
        groups = LDS_LIMIT // lds
        waves_per_group = -(-workgroup // WAVE)
        by_lds = groups * waves_per_group // SIMDS_PER_CU
        waves = min(waves, max(by_lds, min(groups, 1)))
    return waves


def mfma_summary(counter):
    """"f32_32x32x8_bf16 x16, ...": the v_mfma_* instructions by type."""
    found = sorted((k[len("v_mfma_"):], v)
                   for k, v in counter.items()
                   if k.startswith("v_mfma_"))
    return ", ".join("%s x%d" % (k, v) for k, v in found)


def census(args, tmp):
    """The table's rows, the summary lines and the problems found."""
    problems = []
    summary = []
    rows = {}  # (object, target, kernel symbol) -> (metadata, mnemonics)
    index = 0
    for path in args.shared_object + args.objects:
        shared = path in args.shared_object
        label = os.path.basename(path)
        data = fatbin(args, path, tmp)
        if data is None:
            if shared:
                problems.append(
                    "%s: no .hip_fatbin section (no AMD code objects)" % label)
            continue
        found = bundles(data)
        targets = set()
        for bundle in found:
            index += 1
            objects = code_objects(args, bundle, tmp, index)
            targets.update(objects)
            missing = [t for t in args.targets if t not in objects]
            if missing:
                problems.append(
                    "%s: an offload bundle lacks code objects for %s (has %s)" %
                    (label, ", ".join(missing), ", ".join(sorted(objects)) or
                     "none"))
            if shared:
                continue  # its kernels are the objects' (given too)
            for target, code_object in sorted(objects.items()):
                insns = instructions(args, code_object)
                for meta in kernel_metadata(args, code_object):
                    rows[(label, target, meta["name"])] = (
                        meta, insns.get(meta["name"], {}))
        if shared:
            summary.append(
                "%s: %d offload bundles (one per object), each with code "
                "objects for %s." %
                (label, len(found), ", ".join(sorted(targets))))
    names = demangle(args, sorted({k[2] for k in rows}))
    table = []
    fallbacks = collections.defaultdict(list)
    for (source, target, name), (meta, insns) in sorted(
            rows.items(), key=lambda kv: (kv[0][0], names[kv[0][2]], kv[0][1])):
        kernel = names[name]
        vgprs = int(meta.get("vgpr_count", 0))
        agprs = int(meta.get("agpr_count", 0))
        sgprs = int(meta.get("sgpr_count", 0))
        lds = int(meta.get("group_segment_fixed_size", 0))
        scratch = int(meta.get("private_segment_fixed_size", 0))
        vspill = int(meta.get("vgpr_spill_count", 0))
        sspill = int(meta.get("sgpr_spill_count", 0))
        workgroup = int(meta.get("max_flat_workgroup_size", 1024))
        body = sum(n for m, n in insns.items()
                   if m not in ("s_endpgm", "s_nop", "s_code_end"))
        mfma = mfma_summary(insns)
        notes = []
        what = "%s %s (%s)" % (target, kernel, source)
        if scratch > 0:
            problems.append("%s: %d bytes of scratch per lane "
                            "(private segment)" % (what, scratch))
        if vspill or sspill:
            problems.append("%s: spills %d VGPRs and %d SGPRs" %
                            (what, vspill, sspill))
            notes.append("spills %d VGPRs" % vspill if not sspill else
                         "spills %d VGPRs, %d SGPRs" % (vspill, sspill))
        if meta.get("uses_dynamic_stack") == "true":
            problems.append("%s: uses a dynamic stack" % what)
        if lds > LDS_LIMIT:
            problems.append("%s: %d bytes of static LDS, more than %d" %
                            (what, lds, LDS_LIMIT))
        if insns.get("s_swappc_b64"):
            notes.append("calls functions")
        if body == 0:
            notes.append("empty on AMD (a body for NVIDIA only)")
        elif not mfma and any(
                re.match(k + r"\b", kernel) for k in MATRIX_KERNELS):
            notes.append("**FMA fallback** (matrix-bound, no v_mfma)")
            fallbacks[target].append(kernel)
        table.append([
            source, kernel, target, mfma or "-",
            str(max(vgprs - agprs, 0)),
            str(agprs),
            str(sgprs),
            str(lds),
            str(scratch),
            str(workgroup),
            str(waves_per_simd(vgprs, sgprs, lds, workgroup)),
            "; ".join(notes)
        ])
    for target in args.targets:
        count = sum(1 for row in table if row[2] == target)
        summary.append(
            "%s: %d kernels; matrix-bound on FMAs (no v_mfma): %s." %
            (target, count, ", ".join(fallbacks[target]) or "none"))
    return table, summary, problems


_HEADER = [
    "object", "kernel", "target", "v_mfma (by type)", "VGPR", "AGPR", "SGPR",
    "LDS", "scratch", "max WG", "waves/SIMD", "note"
]


def markdown(table, summary):
    lines = ["- " + line for line in summary] + [""]
    lines.append("| " + " | ".join(_HEADER) + " |")
    lines.append("|" + "|".join(["---"] * len(_HEADER)) + "|")
    for row in table:
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in row) +
                     " |")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets",
                        required=True,
                        help="offload targets every bundle must have")
    parser.add_argument("--output", help="markdown table (default: stdout)")
    parser.add_argument("--shared_object",
                        action="append",
                        default=[],
                        help="a linked file whose bundles to check")
    parser.add_argument("objects",
                        nargs="*",
                        help="objects whose kernels to count")
    for tool, default in [("bundler", "clang-offload-bundler-19"),
                          ("readelf", "llvm-readelf-19"),
                          ("objdump", "llvm-objdump-19"),
                          ("objcopy", "llvm-objcopy-19"),
                          ("cxxfilt", "llvm-cxxfilt-19")]:
        parser.add_argument("--" + tool, default=default)
    args = parser.parse_args()
    args.targets = [t for t in args.targets.split(",") if t]
    with tempfile.TemporaryDirectory() as tmp:
        table, summary, problems = census(args, tmp)
    if not table:
        problems.append("no AMD kernels in %s" % " ".join(args.objects))
    text = markdown(table, summary)
    if args.output:
        with open(args.output, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    if problems:
        if args.output:
            sys.stderr.write(text)
        for p in problems:
            print("amd_isa_census: FAIL: " + p, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
