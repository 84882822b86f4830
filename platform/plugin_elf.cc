#include "platform/plugin_elf.h"

#include <elf.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

// Tags newer than some elf.h copies (glibc 2.36 added DT_RELR).
#ifndef DT_RELRSZ
#define DT_RELRSZ 35
#endif
#ifndef DT_RELR
#define DT_RELR 36
#endif
#ifndef DT_RELRENT
#define DT_RELRENT 37
#endif
#ifndef PT_GNU_PROPERTY
#define PT_GNU_PROPERTY 0x6474e553
#endif

namespace dsa::platform::elf {
namespace {

using Shdr = ElfW(Shdr);
using Dyn = ElfW(Dyn);
using Sym = ElfW(Sym);
using Rela = ElfW(Rela);
using Rel = ElfW(Rel);
using Addr = ElfW(Addr);
using Verdef = ElfW(Verdef);
using Verdaux = ElfW(Verdaux);
using Verneed = ElfW(Verneed);
using Vernaux = ElfW(Vernaux);

// What this host's dynamic loader accepts.
constexpr unsigned char kHostClass =
    sizeof(void*) == 8 ? ELFCLASS64 : ELFCLASS32;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
constexpr unsigned char kHostData = ELFDATA2LSB;
#else
constexpr unsigned char kHostData = ELFDATA2MSB;
#endif
#if defined(__x86_64__)
constexpr uint16_t kHostMachine = EM_X86_64;
#elif defined(__aarch64__)
constexpr uint16_t kHostMachine = EM_AARCH64;
#elif defined(__i386__)
constexpr uint16_t kHostMachine = EM_386;
#elif defined(__arm__)
constexpr uint16_t kHostMachine = EM_ARM;
#elif defined(__powerpc64__)
constexpr uint16_t kHostMachine = EM_PPC64;
#elif defined(__riscv)
constexpr uint16_t kHostMachine = EM_RISCV;
#elif defined(__s390x__)
constexpr uint16_t kHostMachine = EM_S390;
#else
#error "plugin_elf.cc: add this host's ELF e_machine"
#endif

// The relocation table kind the host's loader applies for DT_JMPREL.
#if defined(__i386__) || defined(__arm__)
constexpr int64_t kHostPltRel = DT_REL;
#else
constexpr int64_t kHostPltRel = DT_RELA;
#endif

// Relocation types whose meaning the checks need: RELATIVE and IRELATIVE
// (the value is an address in this object; IRELATIVE's is called), COPY
// (never in a shared object), the word-sized symbol references, and the
// bytes each type writes. Other hosts get the generic checks only.
#if defined(__x86_64__)
constexpr bool kKnownRelocations = true;
constexpr uint32_t kRelocNone = R_X86_64_NONE;
constexpr uint32_t kRelocRelative = R_X86_64_RELATIVE;
constexpr uint32_t kRelocIrelative = R_X86_64_IRELATIVE;
constexpr uint32_t kRelocCopy = R_X86_64_COPY;
bool IsSymbolWord(uint32_t type) {
  return type == R_X86_64_64 || type == R_X86_64_GLOB_DAT ||
         type == R_X86_64_JUMP_SLOT;
}
bool IsGotSlot(uint32_t type) {
  return type == R_X86_64_GLOB_DAT || type == R_X86_64_JUMP_SLOT;
}
uint64_t RelocationBytes(uint32_t type) {
  switch (type) {
    case R_X86_64_32:
    case R_X86_64_32S:
    case R_X86_64_PC32:
    case R_X86_64_PLT32:
    case R_X86_64_GOT32:
    case R_X86_64_GOTPCREL:
    case R_X86_64_GOTPC32:
    case R_X86_64_DTPOFF32:
    case R_X86_64_TPOFF32:
    case R_X86_64_SIZE32:
      return 4;
    case R_X86_64_TLSDESC:
      return 16;
    default:
      return 8;
  }
}
#elif defined(__aarch64__)
constexpr bool kKnownRelocations = true;
constexpr uint32_t kRelocNone = R_AARCH64_NONE;
constexpr uint32_t kRelocRelative = R_AARCH64_RELATIVE;
constexpr uint32_t kRelocIrelative = R_AARCH64_IRELATIVE;
constexpr uint32_t kRelocCopy = R_AARCH64_COPY;
bool IsSymbolWord(uint32_t type) {
  return type == R_AARCH64_ABS64 || type == R_AARCH64_GLOB_DAT ||
         type == R_AARCH64_JUMP_SLOT;
}
bool IsGotSlot(uint32_t type) {
  return type == R_AARCH64_GLOB_DAT || type == R_AARCH64_JUMP_SLOT;
}
uint64_t RelocationBytes(uint32_t type) {
  switch (type) {
    case R_AARCH64_ABS32:
    case R_AARCH64_PREL32:
      return 4;
    case R_AARCH64_TLSDESC:
      return 16;
    default:
      return 8;
  }
}
#else
constexpr bool kKnownRelocations = false;
constexpr uint32_t kRelocNone = 0;
constexpr uint32_t kRelocRelative = ~uint32_t{0};
constexpr uint32_t kRelocIrelative = ~uint32_t{0};
constexpr uint32_t kRelocCopy = ~uint32_t{0};
bool IsSymbolWord(uint32_t) { return false; }
bool IsGotSlot(uint32_t) { return false; }
uint64_t RelocationBytes(uint32_t) { return sizeof(Addr); }
#endif

constexpr uint64_t kWord = sizeof(Addr);

// r_info's halves in this host's class.
uint32_t RelocationType(uint64_t info) {
  return kWord == 8 ? static_cast<uint32_t>(ELF64_R_TYPE(info))
                    : static_cast<uint32_t>(ELF32_R_TYPE(info));
}
uint64_t RelocationSymbol(uint64_t info) {
  return kWord == 8 ? ELF64_R_SYM(info) : ELF32_R_SYM(info);
}

// The dynamic tags the checks read, and their names for messages.
#define DSA_ELF_DYNAMIC_TAGS(X) \
  X(DT_NEEDED)                  \
  X(DT_PLTRELSZ)                \
  X(DT_PLTGOT)                  \
  X(DT_HASH)                    \
  X(DT_STRTAB)                  \
  X(DT_SYMTAB)                  \
  X(DT_RELA)                    \
  X(DT_RELASZ)                  \
  X(DT_RELAENT)                 \
  X(DT_STRSZ)                   \
  X(DT_SYMENT)                  \
  X(DT_INIT)                    \
  X(DT_FINI)                    \
  X(DT_SONAME)                  \
  X(DT_RPATH)                   \
  X(DT_REL)                     \
  X(DT_RELSZ)                   \
  X(DT_RELENT)                  \
  X(DT_PLTREL)                  \
  X(DT_TEXTREL)                 \
  X(DT_JMPREL)                  \
  X(DT_INIT_ARRAY)              \
  X(DT_FINI_ARRAY)              \
  X(DT_INIT_ARRAYSZ)            \
  X(DT_FINI_ARRAYSZ)            \
  X(DT_RUNPATH)                 \
  X(DT_FLAGS)                   \
  X(DT_PREINIT_ARRAY)           \
  X(DT_PREINIT_ARRAYSZ)         \
  X(DT_RELRSZ)                  \
  X(DT_RELR)                    \
  X(DT_RELRENT)                 \
  X(DT_GNU_HASH)                \
  X(DT_VERSYM)                  \
  X(DT_RELACOUNT)               \
  X(DT_RELCOUNT)                \
  X(DT_VERDEF)                  \
  X(DT_VERDEFNUM)               \
  X(DT_VERNEED)                 \
  X(DT_VERNEEDNUM)              \
  X(DT_AUXILIARY)               \
  X(DT_FILTER)

std::string Hex(uint64_t value) {
  char text[24];
  std::snprintf(text, sizeof(text), "0x%llx",
                static_cast<unsigned long long>(value));
  return text;
}

std::string TagName(int64_t tag) {
  switch (tag) {
#define DSA_ELF_TAG_CASE(tag) \
  case tag:                   \
    return #tag;
    DSA_ELF_DYNAMIC_TAGS(DSA_ELF_TAG_CASE)
#undef DSA_ELF_TAG_CASE
    default:
      return "tag " + Hex(static_cast<uint64_t>(tag));
  }
}

bool KnownTag(int64_t tag) {
  switch (tag) {
#define DSA_ELF_TAG_CASE(tag) case tag:
    DSA_ELF_DYNAMIC_TAGS(DSA_ELF_TAG_CASE)
#undef DSA_ELF_TAG_CASE
    return true;
    default:
      return false;
  }
}

// Tags that may occur more than once (each entry names a string).
bool RepeatableTag(int64_t tag) {
  return tag == DT_NEEDED || tag == DT_AUXILIARY || tag == DT_FILTER;
}

// Tags whose value is an offset into DT_STRTAB.
bool StringTag(int64_t tag) {
  return tag == DT_NEEDED || tag == DT_SONAME || tag == DT_RPATH ||
         tag == DT_RUNPATH || tag == DT_AUXILIARY || tag == DT_FILTER;
}

std::string MachineName(uint16_t machine) {
  switch (machine) {
    case EM_X86_64:
      return "x86-64";
    case EM_AARCH64:
      return "AArch64";
    case EM_386:
      return "i386";
    case EM_ARM:
      return "ARM";
    case EM_PPC64:
      return "PowerPC64";
    case EM_RISCV:
      return "RISC-V";
    case EM_S390:
      return "s390";
    case EM_AMDGPU:
      return "AMDGPU";
    case EM_CUDA:
      return "NVIDIA CUDA";
    default:
      return "e_machine " + std::to_string(machine);
  }
}

std::string SegmentTypeName(uint32_t type) {
  switch (type) {
    case PT_LOAD:
      return "PT_LOAD";
    case PT_DYNAMIC:
      return "PT_DYNAMIC";
    case PT_INTERP:
      return "PT_INTERP";
    case PT_NOTE:
      return "PT_NOTE";
    case PT_PHDR:
      return "PT_PHDR";
    case PT_TLS:
      return "PT_TLS";
    case PT_GNU_EH_FRAME:
      return "PT_GNU_EH_FRAME";
    case PT_GNU_STACK:
      return "PT_GNU_STACK";
    case PT_GNU_RELRO:
      return "PT_GNU_RELRO";
    case PT_GNU_PROPERTY:
      return "PT_GNU_PROPERTY";
    default: {
      char text[32];
      std::snprintf(text, sizeof(text), "type 0x%x", type);
      return text;
    }
  }
}

const char* ElfTypeName(uint16_t type) {
  switch (type) {
    case ET_REL:
      return "a relocatable object (.o)";
    case ET_EXEC:
      return "an executable";
    case ET_CORE:
      return "a core file";
    default:
      return "of an unknown ELF type";
  }
}

bool IsPowerOfTwo(uint64_t x) { return x != 0 && (x & (x - 1)) == 0; }

// Checked arithmetic.
bool Add(uint64_t a, uint64_t b, uint64_t* sum) {
  return !__builtin_add_overflow(a, b, sum);
}
bool Mul(uint64_t a, uint64_t b, uint64_t* product) {
  return !__builtin_mul_overflow(a, b, product);
}

// "[begin, end)" of a range, for messages (the end saturates).
std::string Range(uint64_t offset, uint64_t size) {
  uint64_t end;
  if (!Add(offset, size, &end)) end = std::numeric_limits<uint64_t>::max();
  return "[" + std::to_string(offset) + ", " + std::to_string(end) + ")";
}

std::string AddressRange(uint64_t address, uint64_t size) {
  return Hex(address) + " (" + std::to_string(size) + " bytes)";
}

// Whether [offset, offset + size) lies within `limit` bytes.
bool Within(uint64_t offset, uint64_t size, uint64_t limit) {
  return offset <= limit && size <= limit - offset;
}

bool Fail(std::string* problem, const std::string& text) {
  if (problem != nullptr) *problem = text;
  return false;
}

// Where the program headers put things in memory, and what of it the file
// backs: the answers to "does the loader find this where it looks".
class Segments {
 public:
  explicit Segments(const std::vector<Phdr>& phdrs) {
    for (const Phdr& ph : phdrs) {
      if (ph.p_type == PT_LOAD) loads_.push_back(ph);
      if (ph.p_type == PT_TLS) tls_ = &ph;
    }
  }

  // The file offset of [address, address + size) when it lies in the file
  // data of one PT_LOAD segment whose flags include `flags`.
  bool FileOffset(uint64_t address, uint64_t size, uint32_t flags,
                  uint64_t* offset) const {
    for (const Phdr& ph : loads_) {
      if ((ph.p_flags & flags) != flags || address < ph.p_vaddr) continue;
      const uint64_t into = address - ph.p_vaddr;
      if (Within(into, size, ph.p_filesz)) {
        *offset = ph.p_offset + into;
        return true;
      }
    }
    return false;
  }

  // Whether [address, address + size) lies in the memory image (file data
  // and the zeroed rest) of one PT_LOAD whose flags include `flags`. A
  // zero-size range may end the image (the address of `_end`).
  bool InMemory(uint64_t address, uint64_t size, uint32_t flags) const {
    for (const Phdr& ph : loads_) {
      if ((ph.p_flags & flags) != flags || address < ph.p_vaddr) continue;
      if (Within(address - ph.p_vaddr, size, ph.p_memsz)) return true;
    }
    return false;
  }

  // Whether code at `address` would run from the file's bytes.
  bool IsCode(uint64_t address) const {
    uint64_t offset;
    return FileOffset(address, 1, PF_X, &offset);
  }

  const Phdr* tls() const { return tls_; }

 private:
  std::vector<Phdr> loads_;
  const Phdr* tls_ = nullptr;
};

// The dynamic section, read.
struct Dynamic {
  std::map<int64_t, uint64_t> values;                 // single tags
  std::vector<std::pair<int64_t, uint64_t>> strings;  // string entries
  bool has(int64_t tag) const { return values.count(tag) != 0; }
  uint64_t get(int64_t tag) const {
    auto it = values.find(tag);
    return it == values.end() ? 0 : it->second;
  }
};

// The slots of one function-pointer array (DT_INIT_ARRAY, ...), each of
// which the loader calls: each must be written by a relocation with a value
// in this object's code, or with a symbol another object defines.
struct FunctionArray {
  int64_t tag = 0;
  uint64_t address = 0;
  uint64_t slots = 0;
  std::vector<bool> relocated;
};

class DynamicChecker {
 public:
  DynamicChecker(const unsigned char* image, const std::vector<Phdr>& phdrs,
                 std::string* problem)
      : image_(image), phdrs_(phdrs), segments_(phdrs), problem_(problem) {}

  bool Check() {
    return ReadDynamic() && CheckEntrySizes() && CheckStrings() &&
           CheckSymbolCount() && CheckSymbols() && CheckVersions() &&
           CheckCode() && CheckFunctionArrays() && CheckRelocations() &&
           CheckFunctionArraysRelocated() && CheckPltGot();
  }

 private:
  template <class T>
  T Read(uint64_t offset) const {
    T value;
    std::memcpy(&value, image_ + offset, sizeof(T));
    return value;
  }

  bool Fail(const std::string& text) const {
    return ::dsa::platform::elf::Fail(problem_, text);
  }

  std::string Entry(int64_t tag) const {
    return "dynamic entry " + TagName(tag);
  }

  // The file offset of the table that `tag` points at, `size` bytes aligned
  // to `align`, in the file data of a PT_LOAD segment.
  bool Table(int64_t tag, uint64_t address, uint64_t size, uint64_t align,
             uint64_t* offset) const {
    if (address % align != 0) {
      return Fail(Entry(tag) + " at " + Hex(address) + " is not aligned to " +
                  std::to_string(align) + " bytes");
    }
    if (!segments_.FileOffset(address, size, 0, offset)) {
      return Fail(Entry(tag) + " at " + AddressRange(address, size) +
                  " lies outside the file data of every PT_LOAD segment");
    }
    return true;
  }

  // A string offset of DT_STRTAB, named `what` in the message.
  bool StringOffset(uint64_t offset, const std::string& what) const {
    if (offset >= strsz_) {
      return Fail(what + " names string offset " + std::to_string(offset) +
                  ", outside DT_STRSZ (" + std::to_string(strsz_) + " bytes)");
    }
    return true;
  }

  // The walk of PT_DYNAMIC the loader makes (elf_get_dynamic_info): entries
  // up to DT_NULL, which must come within the segment.
  bool ReadDynamic() {
    const Phdr* dynamic = nullptr;
    for (const Phdr& ph : phdrs_) {
      if (ph.p_type == PT_DYNAMIC) dynamic = &ph;
    }
    if (dynamic == nullptr) {
      return Fail("has no dynamic section (PT_DYNAMIC); not a shared object");
    }
    uint64_t offset;
    // CheckProgramHeaders has placed it in a PT_LOAD's file data.
    if (!segments_.FileOffset(dynamic->p_vaddr, dynamic->p_filesz, 0,
                              &offset)) {
      return Fail(
          "its dynamic section (PT_DYNAMIC) lies outside every PT_LOAD "
          "segment's file data");
    }
    const uint64_t count = dynamic->p_filesz / sizeof(Dyn);
    bool terminated = false;
    for (uint64_t i = 0; i < count; ++i) {
      const Dyn d = Read<Dyn>(offset + i * sizeof(Dyn));
      const int64_t tag = static_cast<int64_t>(d.d_tag);
      if (tag == DT_NULL) {
        terminated = true;
        break;
      }
      if (!KnownTag(tag)) continue;
      if (StringTag(tag)) dynamic_.strings.emplace_back(tag, d.d_un.d_val);
      if (RepeatableTag(tag)) continue;
      if (!dynamic_.values.emplace(tag, d.d_un.d_val).second) {
        return Fail("its dynamic section has two " + TagName(tag) + " entries");
      }
    }
    if (!terminated) {
      return Fail("its dynamic section (PT_DYNAMIC, " + std::to_string(count) +
                  " entries) has no DT_NULL entry to end it");
    }
    return true;
  }

  // A table's address needs its size (the loader reads the size entry
  // without looking), entry sizes are this host's, and DT_PLTREL names the
  // kind of relocation this host applies.
  bool CheckEntrySizes() {
    static constexpr int64_t kPairs[][2] = {
        {DT_STRTAB, DT_STRSZ},
        {DT_RELA, DT_RELASZ},
        {DT_REL, DT_RELSZ},
        {DT_RELR, DT_RELRSZ},
        {DT_JMPREL, DT_PLTRELSZ},
        {DT_INIT_ARRAY, DT_INIT_ARRAYSZ},
        {DT_FINI_ARRAY, DT_FINI_ARRAYSZ},
        {DT_PREINIT_ARRAY, DT_PREINIT_ARRAYSZ},
        {DT_RELA, DT_RELAENT},
        {DT_REL, DT_RELENT},
        {DT_RELR, DT_RELRENT},
        {DT_JMPREL, DT_PLTREL},
    };
    // Either way round: a table's address entry lost (a damaged tag) leaves
    // its size behind, and the loader then skips the table silently (the
    // PLT unrelocated, versions unchecked), so a size without its table is
    // refused too; a linker writes both or neither.
    for (const auto& pair : kPairs) {
      if (dynamic_.has(pair[0]) != dynamic_.has(pair[1])) {
        const bool address_missing = !dynamic_.has(pair[0]);
        return Fail("has " + TagName(pair[address_missing]) + " without " +
                    TagName(pair[!address_missing]));
      }
    }
    static constexpr int64_t kCounts[][2] = {
        {DT_RELA, DT_RELACOUNT},
        {DT_REL, DT_RELCOUNT},
        {DT_VERDEF, DT_VERDEFNUM},
        {DT_VERNEED, DT_VERNEEDNUM},
    };
    for (const auto& pair : kCounts) {
      if (dynamic_.has(pair[1]) && !dynamic_.has(pair[0])) {
        return Fail("has " + TagName(pair[1]) + " without " + TagName(pair[0]));
      }
    }
    // The loader reads DT_VERSYM's address unchecked once either version
    // table is there.
    for (int64_t tag : {DT_VERDEF, DT_VERNEED}) {
      if (dynamic_.has(tag) && !dynamic_.has(DT_VERSYM)) {
        return Fail("has " + TagName(tag) + " without DT_VERSYM");
      }
    }
    struct EntrySize {
      int64_t tag;
      uint64_t bytes;
    };
    static constexpr EntrySize kEntrySizes[] = {
        {DT_RELAENT, sizeof(Rela)},
        {DT_RELENT, sizeof(Rel)},
        {DT_RELRENT, sizeof(Addr)},
        {DT_SYMENT, sizeof(Sym)},
    };
    for (const EntrySize& e : kEntrySizes) {
      if (dynamic_.has(e.tag) && dynamic_.get(e.tag) != e.bytes) {
        return Fail(
            Entry(e.tag) + " is " + std::to_string(dynamic_.get(e.tag)) +
            "; this host's entries are " + std::to_string(e.bytes) + " bytes");
      }
    }
    if (dynamic_.has(DT_PLTREL)) {
      const uint64_t kind = dynamic_.get(DT_PLTREL);
      if (kind != static_cast<uint64_t>(kHostPltRel)) {
        return Fail(Entry(DT_PLTREL) + " is " + std::to_string(kind) +
                    "; this host's loader applies " + TagName(kHostPltRel) +
                    " (" + std::to_string(kHostPltRel) + ")");
      }
    }
    return true;
  }

  // DT_STRTAB of DT_STRSZ bytes ending in a NUL, so that every offset below
  // DT_STRSZ starts a terminated string; then every string entry.
  bool CheckStrings() {
    if (!dynamic_.has(DT_STRTAB)) {
      return Fail("has no string table (DT_STRTAB)");
    }
    strsz_ = dynamic_.get(DT_STRSZ);
    if (strsz_ == 0) return Fail(Entry(DT_STRSZ) + " is 0");
    if (!Table(DT_STRTAB, dynamic_.get(DT_STRTAB), strsz_, 1, &strtab_)) {
      return false;
    }
    if (image_[strtab_ + strsz_ - 1] != '\0') {
      return Fail("its string table (DT_STRTAB, DT_STRSZ " +
                  std::to_string(strsz_) + ") does not end in a NUL byte");
    }
    for (const auto& [tag, offset] : dynamic_.strings) {
      if (!StringOffset(offset, Entry(tag))) return false;
    }
    return true;
  }

  // The number of symbols: the loader takes symbol indices from the hash
  // tables and from relocations; the tables say how many there are.
  bool CheckSymbolCount() {
    if (!dynamic_.has(DT_SYMTAB)) {
      return Fail("has no symbol table (DT_SYMTAB)");
    }
    if (!dynamic_.has(DT_GNU_HASH) && !dynamic_.has(DT_HASH)) {
      return Fail("has no symbol hash table (DT_GNU_HASH or DT_HASH)");
    }
    if (dynamic_.has(DT_HASH) && !CheckSysvHash()) return false;
    if (dynamic_.has(DT_GNU_HASH) && !CheckGnuHash()) return false;
    // Symbol 0 (STN_UNDEF) is there whatever the tables say.
    num_symbols_ = std::max<uint64_t>(num_symbols_, 1);
    uint64_t bytes;
    if (!Mul(num_symbols_, sizeof(Sym), &bytes)) {
      return Fail("its hash tables give an impossible symbol count (" +
                  std::to_string(num_symbols_) + ")");
    }
    return Table(DT_SYMTAB, dynamic_.get(DT_SYMTAB), bytes, alignof(Sym),
                 &symtab_);
  }

  // DT_HASH: nbucket, nchain, buckets, chains; every index below nchain and
  // every chain ending (the loader follows chains until index 0).
  bool CheckSysvHash() {
    const uint64_t address = dynamic_.get(DT_HASH);
    uint64_t offset;
    if (!Table(DT_HASH, address, 8, 4, &offset)) return false;
    const uint64_t nbucket = Read<uint32_t>(offset);
    const uint64_t nchain = Read<uint32_t>(offset + 4);
    const uint64_t bytes = (2 + nbucket + nchain) * 4;  // < 2^35: no overflow
    if (!Table(DT_HASH, address, bytes, 4, &offset)) return false;
    std::vector<bool> seen(nchain, false);
    for (uint64_t b = 0; b < nbucket; ++b) {
      uint64_t index = Read<uint32_t>(offset + (2 + b) * 4);
      while (index != 0) {
        if (index >= nchain) {
          return Fail(Entry(DT_HASH) + " leads to symbol " +
                      std::to_string(index) + ", past its " +
                      std::to_string(nchain) + " symbols");
        }
        if (seen[index]) {
          return Fail(Entry(DT_HASH) + " has a chain that reaches symbol " +
                      std::to_string(index) + " twice");
        }
        seen[index] = true;
        index = Read<uint32_t>(offset + (2 + nbucket + index) * 4);
      }
    }
    num_symbols_ = std::max(num_symbols_, nchain);
    return true;
  }

  // DT_GNU_HASH: nbuckets, symoffset, bloom words (a power of two: the
  // loader masks with their count - 1), buckets, then one chain word per
  // hashed symbol; a chain ends at a word with bit 0 set. The symbol count
  // is one past the end of the last chain.
  bool CheckGnuHash() {
    const uint64_t address = dynamic_.get(DT_GNU_HASH);
    uint64_t offset;
    if (!Table(DT_GNU_HASH, address, 16, kWord, &offset)) return false;
    const uint64_t nbuckets = Read<uint32_t>(offset);
    const uint64_t symoffset = Read<uint32_t>(offset + 4);
    const uint64_t bloom_words = Read<uint32_t>(offset + 8);
    if (!IsPowerOfTwo(bloom_words)) {
      return Fail(Entry(DT_GNU_HASH) + " has " + std::to_string(bloom_words) +
                  " bloom filter words, not a power of two");
    }
    const uint64_t buckets_at = 16 + bloom_words * kWord;
    const uint64_t chains_at = buckets_at + nbuckets * 4;  // < 2^37
    if (!Table(DT_GNU_HASH, address, chains_at, kWord, &offset)) return false;
    uint64_t first = std::numeric_limits<uint64_t>::max(), last = 0;
    for (uint64_t b = 0; b < nbuckets; ++b) {
      const uint64_t start = Read<uint32_t>(offset + buckets_at + b * 4);
      if (start == 0) continue;
      if (start < symoffset) {
        return Fail(Entry(DT_GNU_HASH) + " bucket " + std::to_string(b) +
                    " starts at symbol " + std::to_string(start) +
                    ", below its first hashed symbol " +
                    std::to_string(symoffset));
      }
      first = std::min(first, start);
      last = std::max(last, start);
    }
    num_symbols_ = std::max(num_symbols_, symoffset);
    if (first > last) return true;  // no symbol is hashed
    // Every chain ends at the first terminator at or after its start, so the
    // chain words from the lowest start to the terminator after the highest
    // one are all the loader can read.
    for (uint64_t index = first;; ++index) {
      const uint64_t at = chains_at + (index - symoffset) * 4;
      uint64_t word_offset;
      if (!segments_.FileOffset(address + at, 4, 0, &word_offset)) {
        return Fail(Entry(DT_GNU_HASH) + " has a chain that runs past " +
                    Hex(address + at) +
                    ", outside the file data of every PT_LOAD segment");
      }
      if (index >= last && (Read<uint32_t>(word_offset) & 1) != 0) {
        num_symbols_ = std::max(num_symbols_, index + 1);
        return true;
      }
    }
  }

  Sym Symbol(uint64_t index) const {
    return Read<Sym>(symtab_ + index * sizeof(Sym));
  }

  std::string SymbolName(uint64_t index) const {
    const Sym sym = Symbol(index);
    if (sym.st_name >= strsz_) return "symbol " + std::to_string(index);
    return "symbol " + std::to_string(index) + " (" + EchoName(sym.st_name) +
           ")";
  }

  bool IsDefined(const Sym& sym) const {
    return sym.st_shndx != SHN_UNDEF && sym.st_shndx < SHN_LORESERVE;
  }

  // Names within DT_STRSZ; a defined function (or IFUNC resolver, which
  // the loader calls) in code; thread-local symbols within PT_TLS; other
  // defined symbols in the memory image.
  bool CheckSymbols() {
    for (uint64_t i = 1; i < num_symbols_; ++i) {
      const Sym sym = Symbol(i);
      if (!StringOffset(sym.st_name, "symbol " + std::to_string(i))) {
        return false;
      }
      if (sym.st_shndx == SHN_UNDEF) {
        // An undefined symbol that is local or not of default visibility
        // binds to this object (value 0 plus its load address): a call
        // through it jumps to the ELF header. A linker never leaves one.
        if (ELF64_ST_BIND(sym.st_info) == STB_LOCAL ||
            ELF64_ST_VISIBILITY(sym.st_other) != STV_DEFAULT) {
          return Fail(SymbolName(i) +
                      " is undefined but binds locally (local or not of "
                      "default visibility)");
        }
        continue;
      }
      if (!IsDefined(sym)) continue;
      const unsigned type = ELF64_ST_TYPE(sym.st_info);
      if (type == STT_FUNC || type == STT_GNU_IFUNC) {
        if (!segments_.IsCode(sym.st_value)) {
          return Fail(SymbolName(i) + " is a function at " + Hex(sym.st_value) +
                      ", outside every executable PT_LOAD segment's file "
                      "data");
        }
      } else if (type == STT_TLS) {
        const Phdr* tls = segments_.tls();
        if (tls == nullptr || sym.st_value > tls->p_memsz) {
          return Fail(SymbolName(i) + " is thread-local at offset " +
                      Hex(sym.st_value) + ", outside the PT_TLS segment");
        }
      } else if (!segments_.InMemory(sym.st_value, 0, 0)) {
        return Fail(SymbolName(i) + " is at " + Hex(sym.st_value) +
                    ", outside every PT_LOAD segment");
      }
    }
    return true;
  }

  // DT_VERDEF and DT_VERNEED: chains inside the file data (the loader
  // follows vd_next / vn_next / vna_next until 0), names within DT_STRSZ.
  // They define the version indices; DT_VERSYM gives each symbol one, and
  // the loader indexes its version array with it unchecked.
  bool CheckVersions() {
    uint64_t highest = 0;
    if (dynamic_.has(DT_VERDEF)) {
      uint64_t address = dynamic_.get(DT_VERDEF);
      for (uint64_t i = 0;; ++i) {
        uint64_t offset;
        if (!VersionEntry(DT_VERDEF, i, address, sizeof(Verdef), &offset)) {
          return false;
        }
        const Verdef def = Read<Verdef>(offset);
        highest = std::max<uint64_t>(highest, def.vd_ndx & 0x7fff);
        uint64_t aux_address;
        if (!Add(address, def.vd_aux, &aux_address)) {
          return VersionOverflow(DT_VERDEF, i);
        }
        // The loader reads each definition's first name only.
        uint64_t aux_offset;
        if (!VersionEntry(DT_VERDEF, i, aux_address, sizeof(Verdaux),
                          &aux_offset)) {
          return false;
        }
        const Verdaux aux = Read<Verdaux>(aux_offset);
        const std::string what =
            TagName(DT_VERDEF) + " entry " + std::to_string(i);
        if (!StringOffset(aux.vda_name, what) ||
            !VersionHash(def.vd_hash, aux.vda_name, what)) {
          return false;
        }
        if (def.vd_next == 0) break;
        if (!Add(address, def.vd_next, &address)) {
          return VersionOverflow(DT_VERDEF, i);
        }
      }
    }
    if (dynamic_.has(DT_VERNEED)) {
      uint64_t address = dynamic_.get(DT_VERNEED);
      for (uint64_t i = 0;; ++i) {
        uint64_t offset;
        if (!VersionEntry(DT_VERNEED, i, address, sizeof(Verneed), &offset)) {
          return false;
        }
        const Verneed need = Read<Verneed>(offset);
        const std::string what =
            TagName(DT_VERNEED) + " entry " + std::to_string(i);
        if (!StringOffset(need.vn_file, what)) return false;
        // The loader looks the file up among the objects loaded for
        // DT_NEEDED, and asserts that it finds it.
        bool needed = false;
        for (const auto& [tag, offset] : dynamic_.strings) {
          needed =
              needed ||
              (tag == DT_NEEDED &&
               std::strcmp(
                   reinterpret_cast<const char*>(image_ + strtab_ + offset),
                   reinterpret_cast<const char*>(image_ + strtab_ +
                                                 need.vn_file)) == 0);
        }
        if (!needed) {
          return Fail(what + " needs versions of " + EchoName(need.vn_file) +
                      ", which no DT_NEEDED entry names");
        }
        uint64_t aux_address;
        if (!Add(address, need.vn_aux, &aux_address)) {
          return VersionOverflow(DT_VERNEED, i);
        }
        while (true) {
          uint64_t aux_offset;
          if (!VersionEntry(DT_VERNEED, i, aux_address, sizeof(Vernaux),
                            &aux_offset)) {
            return false;
          }
          const Vernaux aux = Read<Vernaux>(aux_offset);
          if (!StringOffset(aux.vna_name, what) ||
              !VersionHash(aux.vna_hash, aux.vna_name, what)) {
            return false;
          }
          highest = std::max<uint64_t>(highest, aux.vna_other & 0x7fff);
          if (aux.vna_next == 0) break;
          if (!Add(aux_address, aux.vna_next, &aux_address)) {
            return VersionOverflow(DT_VERNEED, i);
          }
        }
        if (need.vn_next == 0) break;
        if (!Add(address, need.vn_next, &address)) {
          return VersionOverflow(DT_VERNEED, i);
        }
      }
    }
    if (!dynamic_.has(DT_VERSYM)) return true;
    uint64_t offset;
    if (!Table(DT_VERSYM, dynamic_.get(DT_VERSYM), num_symbols_ * 2, 2,
               &offset)) {
      return false;
    }
    for (uint64_t i = 0; i < num_symbols_; ++i) {
      const uint64_t version = Read<uint16_t>(offset + 2 * i) & 0x7fff;
      if (version != 0 && version > highest) {
        return Fail(Entry(DT_VERSYM) + " gives " + SymbolName(i) + " version " +
                    std::to_string(version) +
                    ", which neither DT_VERDEF nor DT_VERNEED defines");
      }
    }
    return true;
  }

  // The loader finds versions by this hash first, then by name; a linker
  // always writes the name's ELF hash.
  bool VersionHash(uint32_t hash, uint64_t name, const std::string& what) {
    uint32_t h = 0;
    for (const unsigned char* c = image_ + strtab_ + name; *c != 0; ++c) {
      h = (h << 4) + *c;
      const uint32_t high = h & 0xf0000000u;
      if (high != 0) h ^= high >> 24;
      h &= ~high;
    }
    if (h != hash) {
      return Fail(what + " gives hash " + Hex(hash) + " for version " +
                  EchoName(name) + ", whose hash is " + Hex(h));
    }
    return true;
  }

  // A string of DT_STRTAB for a message: at most 64 characters, escaped.
  std::string EchoName(uint64_t name) const {
    const char* text = reinterpret_cast<const char*>(image_ + strtab_ + name);
    std::string shown(text,
                      strnlen(text, std::min<uint64_t>(64, strsz_ - name)));
    for (char& c : shown) {
      if (static_cast<unsigned char>(c) < 0x20 ||
          static_cast<unsigned char>(c) >= 0x7f) {
        c = '?';
      }
    }
    return shown;
  }

  // One entry of a version chain. Chains only run forward, so they end;
  // the budget keeps chains that share their tails from costing more than a
  // linear walk would.
  bool VersionEntry(int64_t tag, uint64_t index, uint64_t address,
                    uint64_t size, uint64_t* offset) {
    if (++version_entries_ > kMaxVersionEntries) {
      return Fail("its version tables (DT_VERDEF, DT_VERNEED) have more than " +
                  std::to_string(kMaxVersionEntries) + " entries");
    }
    if (address % 4 != 0 || !segments_.FileOffset(address, size, 0, offset)) {
      return Fail(TagName(tag) + " entry " + std::to_string(index) + " at " +
                  Hex(address) +
                  " lies outside the file data of every PT_LOAD segment or "
                  "is misaligned");
    }
    return true;
  }

  bool VersionOverflow(int64_t tag, uint64_t index) const {
    return Fail(TagName(tag) + " entry " + std::to_string(index) +
                " points past the end of the address space");
  }

  // DT_INIT and DT_FINI are called.
  bool CheckCode() {
    for (int64_t tag : {DT_INIT, DT_FINI}) {
      if (dynamic_.has(tag) && !segments_.IsCode(dynamic_.get(tag))) {
        return Fail(Entry(tag) + " at " + Hex(dynamic_.get(tag)) +
                    " lies outside every executable PT_LOAD segment's file "
                    "data");
      }
    }
    return true;
  }

  // The arrays of functions the loader calls, in the file data, a whole
  // number of pointers.
  bool CheckFunctionArrays() {
    static constexpr int64_t kArrays[][2] = {
        {DT_INIT_ARRAY, DT_INIT_ARRAYSZ},
        {DT_FINI_ARRAY, DT_FINI_ARRAYSZ},
        {DT_PREINIT_ARRAY, DT_PREINIT_ARRAYSZ},
    };
    for (const auto& pair : kArrays) {
      if (!dynamic_.has(pair[0])) continue;
      const uint64_t bytes = dynamic_.get(pair[1]);
      if (bytes % kWord != 0) {
        return Fail(Entry(pair[1]) + " is " + std::to_string(bytes) +
                    ", not a multiple of the pointer size (" +
                    std::to_string(kWord) + " bytes)");
      }
      uint64_t offset;
      if (!Table(pair[0], dynamic_.get(pair[0]), bytes, kWord, &offset)) {
        return false;
      }
      FunctionArray array;
      array.tag = pair[0];
      array.address = dynamic_.get(pair[0]);
      array.slots = bytes / kWord;
      array.relocated.assign(array.slots, false);
      arrays_.push_back(std::move(array));
    }
    return true;
  }

  // A relocation writes a function pointer into an array slot: the value
  // must be this object's code unless it comes from another object's
  // symbol (`value_is_code` is then true).
  bool NoteArrayWrite(uint64_t target, bool value_is_code,
                      const std::string& what) {
    for (FunctionArray& array : arrays_) {
      if (target < array.address ||
          target - array.address >= array.slots * kWord) {
        continue;
      }
      const uint64_t into = target - array.address;
      if (into % kWord != 0 || !value_is_code) {
        return Fail(what + " sets slot " + std::to_string(into / kWord) +
                    " of " + TagName(array.tag) +
                    " to something other than code");
      }
      array.relocated[into / kWord] = true;
    }
    return true;
  }

  bool CheckFunctionArraysRelocated() {
    if (!kKnownRelocations) return true;
    for (const FunctionArray& array : arrays_) {
      for (uint64_t s = 0; s < array.slots; ++s) {
        if (!array.relocated[s]) {
          return Fail("slot " + std::to_string(s) + " of " +
                      TagName(array.tag) +
                      " is set by no relocation; the loader would call its "
                      "raw value");
        }
      }
    }
    return true;
  }

  // The word the file holds at `address` (0 in the zeroed part).
  uint64_t WordAt(uint64_t address) const {
    uint64_t offset;
    if (!segments_.FileOffset(address, kWord, 0, &offset)) return 0;
    return Read<Addr>(offset);
  }

  // DT_RELA, DT_REL, DT_JMPREL and DT_RELR: whole tables of this host's
  // entries in the file data; every target inside a writable segment (any
  // segment with DT_TEXTREL); every symbol in the symbol table; IRELATIVE
  // resolvers in code; no COPY relocation.
  bool CheckRelocations() {
    text_relocations_ =
        dynamic_.has(DT_TEXTREL) || (dynamic_.get(DT_FLAGS) & DF_TEXTREL) != 0;
    if (dynamic_.has(DT_RELA) &&
        !CheckRelocationTable(DT_RELA, dynamic_.get(DT_RELA),
                              dynamic_.get(DT_RELASZ), true,
                              dynamic_.get(DT_RELACOUNT))) {
      return false;
    }
    if (dynamic_.has(DT_REL) &&
        !CheckRelocationTable(DT_REL, dynamic_.get(DT_REL),
                              dynamic_.get(DT_RELSZ), false,
                              dynamic_.get(DT_RELCOUNT))) {
      return false;
    }
    if (dynamic_.has(DT_JMPREL) &&
        !CheckRelocationTable(DT_JMPREL, dynamic_.get(DT_JMPREL),
                              dynamic_.get(DT_PLTRELSZ), kHostPltRel == DT_RELA,
                              0)) {
      return false;
    }
    return !dynamic_.has(DT_RELR) || CheckRelr();
  }

  bool CheckTarget(const std::string& what, uint64_t target, uint64_t bytes) {
    if (!segments_.InMemory(target, bytes, text_relocations_ ? 0 : PF_W)) {
      return Fail(what + " writes " + std::to_string(bytes) + " bytes at " +
                  Hex(target) + ", outside every " +
                  (text_relocations_ ? "" : "writable ") + "PT_LOAD segment");
    }
    return true;
  }

  bool CheckRelocationTable(int64_t tag, uint64_t address, uint64_t bytes,
                            bool with_addend, uint64_t relative_count) {
    const uint64_t entry = with_addend ? sizeof(Rela) : sizeof(Rel);
    const int64_t size_tag = tag == DT_RELA  ? DT_RELASZ
                             : tag == DT_REL ? DT_RELSZ
                                             : DT_PLTRELSZ;
    if (bytes % entry != 0) {
      return Fail(Entry(size_tag) + " is " + std::to_string(bytes) +
                  ", not a multiple of the entry size (" +
                  std::to_string(entry) + " bytes)");
    }
    uint64_t offset;
    if (!Table(tag, address, bytes, kWord, &offset)) return false;
    const uint64_t count = bytes / entry;
    for (uint64_t i = 0; i < count; ++i) {
      const uint64_t at = offset + i * entry;
      const Rel rel = Read<Rel>(at);  // a Rela begins with a Rel
      const uint64_t addend =
          with_addend ? static_cast<uint64_t>(Read<Rela>(at).r_addend)
                      : WordAt(rel.r_offset);
      const uint32_t type = RelocationType(rel.r_info);
      const uint64_t symbol = RelocationSymbol(rel.r_info);
      const std::string what =
          "relocation " + std::to_string(i) + " of " + TagName(tag);
      // The loader applies the first DT_RELACOUNT (DT_RELCOUNT) entries as
      // RELATIVE without a lookup, and Debian's aborts the process when one
      // is not.
      if (kKnownRelocations && i < relative_count && type != kRelocRelative) {
        return Fail(what + " is of type " + std::to_string(type) + ", but " +
                    TagName(tag == DT_RELA ? DT_RELACOUNT : DT_RELCOUNT) +
                    " (" + std::to_string(relative_count) +
                    ") says it is RELATIVE");
      }
      if (kKnownRelocations && type == kRelocNone) continue;
      if (symbol >= num_symbols_) {
        return Fail(what + " names symbol " + std::to_string(symbol) +
                    ", but the symbol table holds " +
                    std::to_string(num_symbols_));
      }
      if (!CheckTarget(what, rel.r_offset, RelocationBytes(type))) {
        return false;
      }
      if (!kKnownRelocations) continue;
      // GOT slots are words; a linker aligns them.
      if ((IsGotSlot(type) || type == kRelocIrelative) &&
          rel.r_offset % kWord != 0) {
        return Fail(what + " writes a GOT slot at " + Hex(rel.r_offset) +
                    ", which is not aligned to " + std::to_string(kWord) +
                    " bytes");
      }
      if (type == kRelocCopy) {
        return Fail(what +
                    " is a COPY relocation, which a shared object "
                    "never has");
      }
      bool value_is_code = false;
      if (type == kRelocRelative || type == kRelocIrelative) {
        value_is_code = segments_.IsCode(addend);
        if (type == kRelocIrelative && !value_is_code) {
          return Fail(what + " calls a resolver at " + Hex(addend) +
                      ", outside every executable PT_LOAD segment's file "
                      "data");
        }
      } else if (IsSymbolWord(type) && symbol != 0) {
        const Sym sym = Symbol(symbol);
        uint64_t value;
        value_is_code = !IsDefined(sym) || (Add(sym.st_value, addend, &value) &&
                                            segments_.IsCode(value));
      }
      if (!NoteArrayWrite(rel.r_offset, value_is_code, what)) return false;
    }
    return true;
  }

  // DT_RELR: an even word is the address of a word to relocate; an odd word
  // is a bitmap of the next 63 (or 31) words after the last address.
  bool CheckRelr() {
    const uint64_t bytes = dynamic_.get(DT_RELRSZ);
    if (bytes % kWord != 0) {
      return Fail(Entry(DT_RELRSZ) + " is " + std::to_string(bytes) +
                  ", not a multiple of the entry size (" +
                  std::to_string(kWord) + " bytes)");
    }
    uint64_t offset;
    if (!Table(DT_RELR, dynamic_.get(DT_RELR), bytes, kWord, &offset)) {
      return false;
    }
    bool have_base = false;
    uint64_t next = 0;  // the word after the last one relocated
    for (uint64_t i = 0; i < bytes / kWord; ++i) {
      const uint64_t entry = Read<Addr>(offset + i * kWord);
      const std::string what =
          "relocation " + std::to_string(i) + " of DT_RELR";
      std::vector<uint64_t> targets;
      if ((entry & 1) == 0) {
        targets.push_back(entry);
        have_base = true;
        next = entry + kWord;
      } else {
        if (!have_base) {
          return Fail(what + " is a bitmap before any address");
        }
        uint64_t bits = entry >> 1;
        for (uint64_t k = 0; bits != 0; ++k, bits >>= 1) {
          if ((bits & 1) != 0) targets.push_back(next + k * kWord);
        }
        next += (8 * kWord - 1) * kWord;
      }
      for (uint64_t target : targets) {
        if (!CheckTarget(what, target, kWord) ||
            !NoteArrayWrite(target, segments_.IsCode(WordAt(target)), what)) {
          return false;
        }
      }
    }
    return true;
  }

  // With DT_JMPREL, the loader may write the lazy-binding words at the start
  // of DT_PLTGOT.
  bool CheckPltGot() {
    if (!dynamic_.has(DT_JMPREL) || !dynamic_.has(DT_PLTGOT)) return true;
    const uint64_t address = dynamic_.get(DT_PLTGOT);
    if (!segments_.InMemory(address, 3 * kWord, text_relocations_ ? 0 : PF_W)) {
      return Fail(Entry(DT_PLTGOT) + " at " + Hex(address) +
                  " lies outside every writable PT_LOAD segment");
    }
    return true;
  }

  // Every offset read lies in a PT_LOAD's file data, which
  // CheckProgramHeaders placed within the image.
  const unsigned char* image_;
  const std::vector<Phdr>& phdrs_;
  Segments segments_;
  std::string* problem_;
  Dynamic dynamic_;
  uint64_t strtab_ = 0, strsz_ = 0;
  uint64_t symtab_ = 0, num_symbols_ = 0;
  bool text_relocations_ = false;
  std::vector<FunctionArray> arrays_;
  static constexpr uint64_t kMaxVersionEntries = uint64_t{1} << 20;
  uint64_t version_entries_ = 0;
};

}  // namespace

bool CheckElfHeader(const Ehdr& ehdr, uint64_t file_size,
                    std::string* problem) {
  const std::string size_text = std::to_string(file_size) + " bytes";
  if (ehdr.e_ident[EI_CLASS] != kHostClass) {
    const unsigned char c = ehdr.e_ident[EI_CLASS];
    return Fail(problem, std::string("is ") +
                             (c == ELFCLASS32   ? "a 32-bit"
                              : c == ELFCLASS64 ? "a 64-bit"
                                                : "an unknown-class") +
                             " ELF object; this host loads " +
                             (kHostClass == ELFCLASS64 ? "64-bit" : "32-bit") +
                             " ones");
  }
  if (ehdr.e_ident[EI_DATA] != kHostData) {
    return Fail(
        problem,
        std::string("is a ") +
            (ehdr.e_ident[EI_DATA] == ELFDATA2MSB   ? "big-endian"
             : ehdr.e_ident[EI_DATA] == ELFDATA2LSB ? "little-endian"
                                                    : "unknown-byte-order") +
            " ELF object; this host is " +
            (kHostData == ELFDATA2LSB ? "little-endian" : "big-endian"));
  }
  if (ehdr.e_ident[EI_VERSION] != EV_CURRENT || ehdr.e_version != EV_CURRENT) {
    return Fail(problem, "has an unknown ELF version");
  }
  if (ehdr.e_type != ET_DYN) {
    return Fail(problem, std::string("is ") + ElfTypeName(ehdr.e_type) +
                             ", not a shared object (ET_DYN)");
  }
  if (ehdr.e_machine != kHostMachine) {
    return Fail(problem, "is built for " + MachineName(ehdr.e_machine) +
                             "; this host is " + MachineName(kHostMachine));
  }

  // The program header table: what the dynamic loader maps.
  if (ehdr.e_phnum == 0) {
    return Fail(problem, "has no program headers; nothing to load");
  }
  if (ehdr.e_phnum == PN_XNUM) {
    return Fail(problem,
                "uses extended program header numbering (65535 or more "
                "headers); not a plugin");
  }
  if (ehdr.e_phentsize != sizeof(Phdr)) {
    return Fail(problem,
                "has program headers of " + std::to_string(ehdr.e_phentsize) +
                    " bytes; this host's are " + std::to_string(sizeof(Phdr)));
  }
  const uint64_t ph_bytes = uint64_t{ehdr.e_phnum} * sizeof(Phdr);
  if (!Within(ehdr.e_phoff, ph_bytes, file_size)) {
    return Fail(problem, "program header table at bytes " +
                             Range(ehdr.e_phoff, ph_bytes) +
                             " lies past the end of the file (" + size_text +
                             "): truncated?");
  }
  if (sizeof(ehdr) + ph_bytes > kMaxHeaderBytes) {
    return Fail(problem, "has " + std::to_string(ehdr.e_phnum) +
                             " program headers, more than a plugin may have (" +
                             std::to_string((kMaxHeaderBytes - sizeof(ehdr)) /
                                            sizeof(Phdr)) +
                             ")");
  }
  if (ehdr.e_phoff % alignof(Phdr) != 0) {
    return Fail(problem, "program header table at byte " +
                             std::to_string(ehdr.e_phoff) +
                             " is not aligned to " +
                             std::to_string(alignof(Phdr)) + " bytes");
  }

  // The section header table: not used by dlopen, but a linker always writes
  // it last, so a cut anywhere after the code shows up here first.
  if (ehdr.e_shoff != 0) {
    if (ehdr.e_shentsize != sizeof(Shdr)) {
      return Fail(problem, "has section headers of " +
                               std::to_string(ehdr.e_shentsize) +
                               " bytes; this host's are " +
                               std::to_string(sizeof(Shdr)));
    }
    if (ehdr.e_shnum == 0) {
      return Fail(problem,
                  "uses extended section numbering (65280 or more "
                  "sections); not a plugin");
    }
    const uint64_t sh_bytes = uint64_t{ehdr.e_shnum} * sizeof(Shdr);
    if (!Within(ehdr.e_shoff, sh_bytes, file_size)) {
      return Fail(problem, "section header table at bytes " +
                               Range(ehdr.e_shoff, sh_bytes) +
                               " lies past the end of the file (" + size_text +
                               "): truncated?");
    }
    if (ehdr.e_shstrndx != SHN_UNDEF && ehdr.e_shstrndx >= ehdr.e_shnum) {
      return Fail(problem, "names section " + std::to_string(ehdr.e_shstrndx) +
                               " as its section name table, but has " +
                               std::to_string(ehdr.e_shnum) + " sections");
    }
  }
  return true;
}

bool CheckProgramHeaders(const Ehdr& ehdr, const std::vector<Phdr>& phdrs,
                         uint64_t file_size, std::string* problem) {
  const std::string size_text = std::to_string(file_size) + " bytes";
  int num_load = 0;
  const Phdr* dynamic = nullptr;
  const Phdr* previous_load = nullptr;
  for (size_t i = 0; i < phdrs.size(); ++i) {
    const Phdr& ph = phdrs[i];
    if (ph.p_type == PT_NULL) continue;
    const std::string segment = "segment " + std::to_string(i) + " (" +
                                SegmentTypeName(ph.p_type) + ")";
    // Any segment the loader reads comes from the file; a linker never
    // writes one past the end, so none may be.
    if (!Within(ph.p_offset, ph.p_filesz, file_size)) {
      return Fail(problem, segment + " covers file bytes " +
                               Range(ph.p_offset, ph.p_filesz) +
                               ", past the end of the file (" + size_text +
                               "): truncated?");
    }
    if (ph.p_type == PT_LOAD) {
      ++num_load;
      if (ph.p_filesz > ph.p_memsz) {
        return Fail(problem, segment + " holds more file bytes (" +
                                 std::to_string(ph.p_filesz) +
                                 ") than memory bytes (" +
                                 std::to_string(ph.p_memsz) + ")");
      }
      if (ph.p_memsz > std::numeric_limits<Addr>::max() - ph.p_vaddr) {
        return Fail(problem, segment + " wraps the address space");
      }
      if (ph.p_align > 1 && (!IsPowerOfTwo(ph.p_align) ||
                             (ph.p_vaddr - ph.p_offset) % ph.p_align != 0)) {
        return Fail(problem, segment + " is not aligned as its p_align (" +
                                 std::to_string(ph.p_align) + ") says");
      }
      // The loader reserves the span from the first segment to the end of
      // the last and maps each at its place in it: a segment out of order
      // would land outside the reservation, over other mappings.
      if (previous_load != nullptr &&
          ph.p_vaddr < previous_load->p_vaddr + previous_load->p_memsz) {
        return Fail(problem,
                    segment + " starts at " + Hex(ph.p_vaddr) +
                        ", before the end of the PT_LOAD segment before it (" +
                        Hex(previous_load->p_vaddr + previous_load->p_memsz) +
                        ")");
      }
      previous_load = &ph;
    } else if (ph.p_type == PT_DYNAMIC) {
      if (dynamic != nullptr) {
        return Fail(problem, "has two PT_DYNAMIC segments");
      }
      dynamic = &ph;
    }
  }
  if (num_load == 0) {
    return Fail(problem, "has no PT_LOAD segment; nothing to load");
  }
  if (dynamic == nullptr || dynamic->p_filesz == 0) {
    return Fail(problem,
                "has no dynamic section (PT_DYNAMIC); not a shared object");
  }
  const Segments segments(phdrs);
  uint64_t offset;
  // The loader reads the dynamic section through the mapping, so it must lie
  // in the file-backed part of some PT_LOAD segment.
  if (!segments.FileOffset(dynamic->p_vaddr, dynamic->p_filesz, 0, &offset)) {
    return Fail(problem,
                "its dynamic section (PT_DYNAMIC) lies outside every PT_LOAD "
                "segment's file data");
  }
  if (dynamic->p_filesz % sizeof(Dyn) != 0 ||
      dynamic->p_vaddr % alignof(Dyn) != 0) {
    return Fail(problem, "its dynamic section (PT_DYNAMIC) of " +
                             std::to_string(dynamic->p_filesz) + " bytes at " +
                             Hex(dynamic->p_vaddr) +
                             " is not a whole, aligned array of " +
                             std::to_string(sizeof(Dyn)) + "-byte entries");
  }
  // What else the loader (and later the unwinder, through dl_iterate_phdr)
  // reads from the mapped image.
  const uint64_t ph_bytes = uint64_t{ehdr.e_phnum} * sizeof(Phdr);
  for (size_t i = 0; i < phdrs.size(); ++i) {
    const Phdr& ph = phdrs[i];
    const std::string segment = "segment " + std::to_string(i) + " (" +
                                SegmentTypeName(ph.p_type) + ")";
    switch (ph.p_type) {
      case PT_PHDR:
        if (!segments.FileOffset(ph.p_vaddr, ph_bytes, 0, &offset) ||
            offset != ehdr.e_phoff) {
          return Fail(problem, segment + " at " + Hex(ph.p_vaddr) +
                                   " does not map the program header table "
                                   "(file byte " +
                                   std::to_string(ehdr.e_phoff) + ")");
        }
        break;
      case PT_TLS:
      case PT_NOTE:
      case PT_GNU_PROPERTY:
      case PT_GNU_EH_FRAME: {
        // The TLS initialisation image is p_filesz bytes; notes and the
        // unwind table index are read whole.
        const uint64_t bytes = ph.p_type == PT_TLS ? ph.p_filesz : ph.p_memsz;
        if (ph.p_type == PT_TLS &&
            (ph.p_filesz > ph.p_memsz ||
             (ph.p_align > 1 && !IsPowerOfTwo(ph.p_align)))) {
          return Fail(problem, segment + " has " + std::to_string(ph.p_filesz) +
                                   " file bytes, " +
                                   std::to_string(ph.p_memsz) +
                                   " memory bytes and alignment " +
                                   std::to_string(ph.p_align));
        }
        if (bytes != 0 && !segments.FileOffset(ph.p_vaddr, bytes, 0, &offset)) {
          return Fail(problem, segment + " at " +
                                   AddressRange(ph.p_vaddr, bytes) +
                                   " lies outside the file data of every "
                                   "PT_LOAD segment");
        }
        break;
      }
      case PT_GNU_RELRO:
        // Made read-only after relocation: it must be this object's memory.
        if (!segments.InMemory(ph.p_vaddr, ph.p_memsz, PF_W)) {
          return Fail(problem, segment + " at " +
                                   AddressRange(ph.p_vaddr, ph.p_memsz) +
                                   " lies outside every writable PT_LOAD "
                                   "segment");
        }
        break;
      default:
        break;
    }
  }
  return true;
}

std::vector<FileRange> LoadedFileRanges(const Ehdr& ehdr,
                                        const std::vector<Phdr>& phdrs,
                                        uint64_t file_size) {
  std::vector<FileRange> ranges;
  ranges.push_back({0, sizeof(Ehdr)});
  ranges.push_back({ehdr.e_phoff, uint64_t{ehdr.e_phnum} * sizeof(Phdr)});
  if (ehdr.e_shoff != 0) {
    ranges.push_back({ehdr.e_shoff, uint64_t{ehdr.e_shnum} * sizeof(Shdr)});
  }
  for (const Phdr& ph : phdrs) {
    if (ph.p_type != PT_LOAD || ph.p_filesz == 0) continue;
    // Within the file (CheckProgramHeaders), so nothing here overflows.
    const uint64_t begin = ph.p_offset / kMaxPageSize * kMaxPageSize;
    uint64_t end = ph.p_offset + ph.p_filesz;
    end = std::min(file_size,
                   (end + kMaxPageSize - 1) / kMaxPageSize * kMaxPageSize);
    ranges.push_back({begin, end - begin});
  }
  std::sort(ranges.begin(), ranges.end(),
            [](const FileRange& a, const FileRange& b) {
              return a.offset < b.offset;
            });
  std::vector<FileRange> merged;
  for (const FileRange& r : ranges) {
    if (!merged.empty() &&
        r.offset <= merged.back().offset + merged.back().size) {
      FileRange& last = merged.back();
      last.size =
          std::max(last.offset + last.size, r.offset + r.size) - last.offset;
    } else {
      merged.push_back(r);
    }
  }
  return merged;
}

bool CheckElfImage(const unsigned char* image, uint64_t size,
                   std::string* problem) {
  Ehdr ehdr;
  if (size < sizeof(ehdr)) {
    return Fail(problem, "is " + std::to_string(size) +
                             " bytes, shorter than an ELF header (" +
                             std::to_string(sizeof(ehdr)) +
                             " bytes): truncated?");
  }
  std::memcpy(&ehdr, image, sizeof(ehdr));
  if (std::memcmp(ehdr.e_ident, ELFMAG, SELFMAG) != 0) {
    return Fail(problem, "is not an ELF file (no \\x7fELF magic)");
  }
  if (!CheckElfHeader(ehdr, size, problem)) return false;
  std::vector<Phdr> phdrs(ehdr.e_phnum);
  std::memcpy(phdrs.data(), image + ehdr.e_phoff, phdrs.size() * sizeof(Phdr));
  if (!CheckProgramHeaders(ehdr, phdrs, size, problem)) return false;
  return DynamicChecker(image, phdrs, problem).Check();
}

}  // namespace dsa::platform::elf
