#!/usr/bin/env python3
"""Compares the device code nvcc embedded in two builds' GPU objects.

    compare_device_code.py OLD_DIR NEW_DIR

Each directory is a bazel-bin (or any tree) holding the `--config=cuda`
objects of gpu_kernel_library targets (`_<target>_cuda/<source>.o`). For every
object present in both, the `.nv_fatbin` section is split into its entries:
the cubins (the SASS that runs) and the PTX (kept for newer GPUs to JIT).
Prints one line per object: "same" when every cubin is byte-identical, else
which entries differ. Exit status 0 when all cubins are identical, 1 when one
differs, 2 on bad input.

A refactor of device code whose cubins are byte-identical needs no new GPU
run to show it is correct: the GPU executes exactly what it executed before.
nvcc names a file's anonymous namespace after a hash of its source, so
symbol names move with any edit; cubins equal but for that name count as the
same. "Differ" proves nothing either way: nvcc's register numbering moves
with small source changes too, so such a change wants the GPU tests and
timings again. No CUDA
tools are needed (objcopy from binutils extracts the section).
"""
import os
import re
import struct
import subprocess
import sys
import tempfile

_FATBIN_MAGIC = 0xBA55ED50
_KINDS = {1: "ptx", 2: "cubin"}
# nvcc names a translation unit's anonymous namespace after a hash that moves
# with the source; the hash has a fixed length, so masking it leaves every
# other byte (code, offsets, sizes) in place.
_ANON_NAMESPACE = re.compile(rb"_GLOBAL__N__[0-9a-f]{8}")


def mask_names(cubins):
    return [_ANON_NAMESPACE.sub(b"_GLOBAL__N__xxxxxxxx", c) for c in cubins]


def fatbin_entries(obj):
    """(kind, payload) of each entry of obj's .nv_fatbin section."""
    with tempfile.NamedTemporaryFile() as out:
        subprocess.run(["objcopy", "-O", "binary", "--only-section=.nv_fatbin",
                        obj, out.name], check=True)
        data = open(out.name, "rb").read()
    entries, offset = [], 0
    while offset + 16 <= len(data):
        magic, _, header, size = struct.unpack_from("<IHHQ", data, offset)
        if magic != _FATBIN_MAGIC:
            break
        p, end = offset + header, offset + header + size
        while p + 16 <= end:
            kind, _, entry_header, entry_size = struct.unpack_from(
                "<HHIQ", data, p)
            body = data[p + entry_header:p + entry_header + entry_size]
            entries.append((_KINDS.get(kind, str(kind)), body))
            p += entry_header + entry_size
        offset = end
    return entries


def objects(root):
    found = {}
    for dirpath, _, files in os.walk(root):
        if not os.path.basename(dirpath).endswith("_cuda"):
            continue
        for f in files:
            if f.endswith(".o"):
                path = os.path.join(dirpath, f)
                found[os.path.relpath(path, root)] = path
    return found


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    old, new = objects(argv[1]), objects(argv[2])
    if not old or not new:
        print("compare_device_code: no --config=cuda objects under %s" %
              (argv[1] if not old else argv[2]), file=sys.stderr)
        return 2
    status = 0
    for name in sorted(set(old) & set(new)):
        a, b = fatbin_entries(old[name]), fatbin_entries(new[name])
        cubins_a = [body for kind, body in a if kind == "cubin"]
        cubins_b = [body for kind, body in b if kind == "cubin"]
        if not cubins_a and not cubins_b:
            continue
        ptx_same = ([body for kind, body in a if kind == "ptx"] ==
                    [body for kind, body in b if kind == "ptx"])
        if cubins_a == cubins_b:
            print("%s: same cubins (%d)%s" %
                  (name, len(cubins_a), "" if ptx_same else ", PTX differs"))
        elif mask_names(cubins_a) == mask_names(cubins_b):
            print("%s: same cubins (%d) but for the anonymous namespace's "
                  "name" % (name, len(cubins_a)))
        else:
            status = 1
            print("%s: CUBINS DIFFER (%d vs %d entries)" %
                  (name, len(cubins_a), len(cubins_b)))
    for name in sorted(set(old) ^ set(new)):
        print("%s: only in %s" % (name, argv[1] if name in old else argv[2]))
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
