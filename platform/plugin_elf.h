// The checks of an ELF shared object that come before the dynamic loader
// sees it: what ld.so (glibc's elf/dl-load.c, dl-map-segments.h,
// get-dynamic-info.h, dl-version.c, do-rel.h) reads or writes because the
// file's headers or its dynamic section say so lies where the loader will
// find it, so that a corrupt file is refused with a message instead of
// crashing the host inside dlopen.
//
// What is checked, on the bytes the loader will map:
//  - the ELF header and program header table (this host's class, byte
//    order, machine, ET_DYN; every segment's file range within the file;
//    PT_LOAD segments ascending and disjoint; PT_PHDR, PT_TLS, PT_NOTE,
//    PT_GNU_PROPERTY and PT_GNU_EH_FRAME inside some PT_LOAD's file data,
//    PT_GNU_RELRO inside a writable PT_LOAD);
//  - the dynamic section: inside a PT_LOAD's file data, terminated by DT_NULL
//    within its size, no address or size entry given twice, no table's
//    address without its size and entry size or the other way round (the
//    loader reads the one without looking for the other, or skips the
//    table), DT_VERSYM with any version table;
//  - every table the loader reads through it (DT_STRTAB/DT_STRSZ,
//    DT_SYMTAB, DT_HASH, DT_GNU_HASH, DT_RELA, DT_REL, DT_RELR, DT_JMPREL,
//    DT_INIT_ARRAY, DT_FINI_ARRAY, DT_PREINIT_ARRAY, DT_VERSYM, DT_VERNEED,
//    DT_VERDEF) lies inside a PT_LOAD's file data, aligned, with the sizes
//    that go with it, sizes multiples of their entry sizes, entry sizes this
//    host's; DT_INIT and DT_FINI in an executable segment;
//  - the tables' contents as far as the loader follows them: string offsets
//    (DT_NEEDED, DT_SONAME, DT_RPATH, DT_RUNPATH, symbol, version and file
//    names) within DT_STRSZ; hash buckets and chains within the symbol
//    table; version chains inside the file, their hashes those of their
//    names, every file they name a DT_NEEDED one; every symbol version
//    defined; every relocation's target inside a writable PT_LOAD (GOT
//    slots aligned) and its symbol in the symbol table; the first
//    DT_RELACOUNT relocations RELATIVE; no undefined symbol that binds
//    locally; defined functions and IFUNC resolvers in executable segments;
//    every slot of the init/fini arrays set by a relocation to code.
// All arithmetic on the file's numbers is checked 64-bit arithmetic.
//
// What is not and cannot be checked: the machine code itself, and what a
// value means to the code that uses it (a relocation's addend or target
// moved within the data, DT_INIT moved within the code). The checks guard
// against a file that is damaged or cut, not against one written to run
// code: whoever can write the plugin can run code as the host anyway.
//
// Messages name the entry at fault ("dynamic entry DT_STRTAB at 0x..."),
// without the path, which the caller adds (plugin_file.h).
#ifndef DSA_PLATFORM_PLUGIN_ELF_H_
#define DSA_PLATFORM_PLUGIN_ELF_H_

#include <link.h>

#include <cstdint>
#include <string>
#include <vector>

namespace dsa::platform::elf {

using Ehdr = ElfW(Ehdr);
using Phdr = ElfW(Phdr);

// The widest page the loader may map a segment with: a copy of a file keeps
// the bytes of every page a PT_LOAD segment touches.
inline constexpr uint64_t kMaxPageSize = 64 * 1024;

// The most bytes the program header table and the ELF header may take
// together (a shared object has about ten program headers).
inline constexpr uint64_t kMaxHeaderBytes = 64 * 1024;

// A range of file bytes.
struct FileRange {
  uint64_t offset = 0;
  uint64_t size = 0;
};

// The ELF header of a file of `file_size` bytes: this host's class, byte
// order, ELF version, ET_DYN, this host's machine; a program header table of
// this host's entry size within the file and within kMaxHeaderBytes; a
// section header table, when present, within the file.
bool CheckElfHeader(const Ehdr& ehdr, uint64_t file_size, std::string* problem);

// The program headers of an accepted ELF header: see the file comment.
bool CheckProgramHeaders(const Ehdr& ehdr, const std::vector<Phdr>& phdrs,
                         uint64_t file_size, std::string* problem);

// The file bytes the dynamic loader reads of an accepted file: the ELF header,
// the program header table and each PT_LOAD's file bytes widened to whole
// kMaxPageSize pages (within the file), and the section header table (which
// no loader reads, kept so that a copy passes the same checks). Sorted and
// disjoint.
std::vector<FileRange> LoadedFileRanges(const Ehdr& ehdr,
                                        const std::vector<Phdr>& phdrs,
                                        uint64_t file_size);

// All of the above and the dynamic section's checks, on `image`, the `size`
// bytes of a whole file (bytes outside LoadedFileRanges are not read).
bool CheckElfImage(const unsigned char* image, uint64_t size,
                   std::string* problem);

}  // namespace dsa::platform::elf

#endif  // DSA_PLATFORM_PLUGIN_ELF_H_
