#!/usr/bin/env python3
"""Compares the device code nvcc embedded in two builds' GPU objects.

    compare_device_code.py [--objects] OLD_DIR NEW_DIR

Each directory is a bazel-bin (or any tree) holding the `--config=cuda`
objects of gpu_kernel_library targets (`_<target>_cuda/<source>.o`). The
`.nv_fatbin` section of each object is split into its entries: the cubins
(the SASS that runs, one per target architecture) and the PTX (kept for
newer GPUs to JIT).

By default the comparison is per kernel, across all objects of each tree, so
that it still holds when a refactor moves kernels between source files: a
kernel is named by its demangled name with the translation unit's anonymous
namespace and the kernel family's namespace removed (`dsa::attention::gpu::`
followed by `dense_mha::`, `(anonymous namespace)::`, ...), and two kernels
are the same when their machine code (`.text.<kernel>`), register count,
stack frame, static shared memory, parameter size and relocations (by symbol
name) are identical. One line per kernel that differs or is in one tree
only, then a count. Exit status 0 when no kernel present in both differs
(kernels added or removed are listed, not failed: a restructure that deletes
a variant says so), 1 when one differs, 2 on bad input.

`--objects` compares whole cubins object by object instead (byte-identical,
or identical but for the anonymous namespace's name), for changes that move
no kernel.

A refactor whose kernels are identical needs no new GPU run to show it is
correct: the GPU executes exactly what it executed before. "Differ" proves
nothing either way: nvcc's register numbering moves with small source
changes, so such a change wants the GPU tests and timings again. No CUDA
tools are needed (objcopy from binutils extracts the section; c++filt
demangles).
"""
import collections
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
# Namespaces a kernel may move between without changing what it is.
_FAMILY_NAMESPACES = re.compile(
    r"\(anonymous namespace\)::|"
    r"\b(?:dense_mha|sparse_mla|indexer|cache|dense_ops|device)::")
_EIATTR_REGCOUNT = 0x2F
_EIATTR_FRAME_SIZE = 0x11
_EIATTR_MAX_STACK_SIZE = 0x23
_SHT_SYMTAB = 2
_SHT_RELA = 4
_SHT_REL = 9


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


def _elf(body):
    """(sections, symbol names) of a cubin (ELF64, little-endian)."""
    shoff, = struct.unpack_from("<Q", body, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", body, 0x3A)
    fields = ("name", "type", "flags", "addr", "off", "size", "link", "info",
              "align", "entsize")
    secs = [dict(zip(fields, struct.unpack_from("<IIQQQQIIQQ", body,
                                                 shoff + i * shentsize)))
            for i in range(shnum)]

    def cstr(table, offset):
        start = secs[table]["off"] + offset
        return body[start:body.index(b"\0", start)].decode()

    for s in secs:
        s["sname"] = cstr(shstrndx, s["name"])
    symtab = next(s for s in secs if s["type"] == _SHT_SYMTAB)
    syms = []
    for i in range(symtab["size"] // 24):
        name, = struct.unpack_from("<I", body, symtab["off"] + 24 * i)
        syms.append(cstr(symtab["link"], name))
    return secs, syms


def _attributes(body, sec):
    """(attribute, payload) records of a .nv.info section."""
    out, o, end = [], sec["off"], sec["off"] + sec["size"]
    while o + 4 <= end:
        fmt, attr = body[o], body[o + 1]
        if fmt == 4:  # a sized value
            size, = struct.unpack_from("<H", body, o + 2)
            out.append((attr, body[o + 4:o + 4 + size]))
            o += 4 + size
        else:
            out.append((attr, body[o + 2:o + 4]))
            o += 4
    return out


def _demangle(names):
    if not names:
        return {}
    text = subprocess.run(["c++filt"], input="\n".join(names), check=True,
                          capture_output=True, text=True).stdout
    return dict(zip(names, text.splitlines()))


def kernels(obj):
    """{(arch, kernel): record} of every cubin of one object."""
    out = {}
    for kind, body in fatbin_entries(obj):
        if kind != "cubin":
            continue
        arch = "sm_%d" % ((struct.unpack_from("<I", body, 0x30)[0] >> 8) & 0xFF)
        secs, syms = _elf(body)
        names = [s["sname"][len(".text."):] for s in secs
                 if s["sname"].startswith(".text.")]
        pretty = _demangle(sorted(set(names) | set(syms)))

        def norm(name):
            masked = _ANON_NAMESPACE.sub(b"_GLOBAL__N__", name.encode())
            return _FAMILY_NAMESPACES.sub("", pretty.get(name, name)) \
                if name in pretty else masked.decode()

        per_symbol = collections.defaultdict(dict)
        info = next((s for s in secs if s["sname"] == ".nv.info"), None)
        if info is not None:
            for attr, payload in _attributes(body, info):
                if attr in (_EIATTR_REGCOUNT, _EIATTR_FRAME_SIZE,
                            _EIATTR_MAX_STACK_SIZE) and len(payload) == 8:
                    sym, value = struct.unpack("<II", payload)
                    per_symbol[syms[sym]][attr] = value
        by_name = {s["sname"]: s for s in secs}
        for s in secs:
            if not s["sname"].startswith(".text."):
                continue
            name = s["sname"][len(".text."):]
            relocs = []
            for r in secs:
                if r["type"] in (_SHT_REL, _SHT_RELA) and \
                        r["info"] == secs.index(s):
                    step = 24 if r["type"] == _SHT_RELA else 16
                    for i in range(r["size"] // step):
                        offset, rinfo = struct.unpack_from(
                            "<QQ", body, r["off"] + step * i)
                        addend = struct.unpack_from(
                            "<q", body, r["off"] + step * i + 16)[0] \
                            if step == 24 else 0
                        relocs.append((offset, rinfo & 0xFFFFFFFF,
                                       norm(syms[rinfo >> 32]), addend))
            shared = by_name.get(".nv.shared." + name)
            params = by_name.get(".nv.constant0." + name)
            attrs = per_symbol.get(name, {})
            out[(arch, norm(name))] = {
                "code": body[s["off"]:s["off"] + s["size"]],
                "registers": attrs.get(_EIATTR_REGCOUNT),
                "stack frame": attrs.get(_EIATTR_FRAME_SIZE),
                "max stack": attrs.get(_EIATTR_MAX_STACK_SIZE),
                "shared memory": shared["size"] if shared else 0,
                "parameters": params["size"] if params else 0,
                "relocations": relocs,
            }
    return out


def tree_kernels(root):
    found = {}
    for obj in objects(root).values():
        found.update(kernels(obj))
    return found


def short(name, width=110):
    return name if len(name) <= width else name[:width - 3] + "..."


def compare_kernels(old_dir, new_dir):
    old, new = tree_kernels(old_dir), tree_kernels(new_dir)
    if not old or not new:
        print("compare_device_code: no kernels in the --config=cuda objects "
              "under %s" % (old_dir if not old else new_dir), file=sys.stderr)
        return 2
    same, differ = 0, 0
    for key in sorted(set(old) & set(new)):
        a, b = old[key], new[key]
        what = [field for field in a if a[field] != b[field]]
        if what:
            differ += 1
            print("DIFFERS %s %s: %s" % (key[0], short(key[1]),
                                         ", ".join(what)))
        else:
            same += 1
    removed = sorted(set(old) - set(new))
    added = sorted(set(new) - set(old))
    for key in removed:
        print("only in %s: %s %s" % (old_dir, key[0], short(key[1])))
    for key in added:
        print("only in %s: %s %s" % (new_dir, key[0], short(key[1])))
    print("kernels: %d same, %d differ, %d only in %s, %d only in %s" %
          (same, differ, len(removed), old_dir, len(added), new_dir))
    return 1 if differ else 0


def compare_objects(old_dir, new_dir):
    old, new = objects(old_dir), objects(new_dir)
    if not old or not new:
        print("compare_device_code: no --config=cuda objects under %s" %
              (old_dir if not old else new_dir), file=sys.stderr)
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
        print("%s: only in %s" % (name, old_dir if name in old else new_dir))
    return status


def main(argv):
    args = argv[1:]
    whole = "--objects" in args
    args = [a for a in args if a != "--objects"]
    if len(args) != 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    return (compare_objects if whole else compare_kernels)(*args)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
