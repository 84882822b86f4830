// Edits of an ELF shared object's bytes for tests that need a corrupt one: a
// copy of a real plugin with one entry of its dynamic section, one table
// entry or one program header changed. The edits assume a well-formed input
// (a plugin the build made) and report misuse through gtest failures.
#ifndef DSA_PLATFORM_ELF_TEST_UTIL_H_
#define DSA_PLATFORM_ELF_TEST_UTIL_H_

#include <elf.h>
#include <link.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace dsa::platform::testing {

class ElfEditor {
 public:
  using Ehdr = ElfW(Ehdr);
  using Phdr = ElfW(Phdr);
  using Dyn = ElfW(Dyn);
  using Sym = ElfW(Sym);
  using Rela = ElfW(Rela);

  explicit ElfEditor(std::string bytes) : bytes_(std::move(bytes)) {}

  const std::string& bytes() const { return bytes_; }

  template <class T>
  T Get(uint64_t offset) const {
    T value;
    EXPECT_LE(offset + sizeof(T), bytes_.size());
    std::memcpy(&value, bytes_.data() + offset, sizeof(T));
    return value;
  }
  template <class T>
  void Put(uint64_t offset, const T& value) {
    EXPECT_LE(offset + sizeof(T), bytes_.size());
    std::memcpy(bytes_.data() + offset, &value, sizeof(T));
  }

  Ehdr header() const { return Get<Ehdr>(0); }

  // The file offset of program header i.
  uint64_t PhdrOffset(int i) const {
    return header().e_phoff + static_cast<uint64_t>(i) * sizeof(Phdr);
  }
  Phdr Segment(int i) const { return Get<Phdr>(PhdrOffset(i)); }
  // The index of the n-th program header of `type`, or -1.
  int FindSegment(uint32_t type, int n = 0) const {
    for (int i = 0; i < header().e_phnum; ++i) {
      if (Segment(i).p_type == type && n-- == 0) return i;
    }
    return -1;
  }
  template <class F>
  void EditSegment(uint32_t type, F edit, int n = 0) {
    const int i = FindSegment(type, n);
    ASSERT_GE(i, 0) << "no segment of type " << type;
    Phdr ph = Segment(i);
    edit(&ph);
    Put(PhdrOffset(i), ph);
  }

  // The file offset of `address` (through the PT_LOAD segments).
  uint64_t Offset(uint64_t address) const {
    for (int i = 0; i < header().e_phnum; ++i) {
      const Phdr ph = Segment(i);
      if (ph.p_type == PT_LOAD && address >= ph.p_vaddr &&
          address - ph.p_vaddr < ph.p_filesz) {
        return ph.p_offset + (address - ph.p_vaddr);
      }
    }
    ADD_FAILURE() << "address " << address << " is in no PT_LOAD's file data";
    return 0;
  }

  // The dynamic section: its slots (up to the end of PT_DYNAMIC, DT_NULL
  // padding included).
  uint64_t DynamicOffset() const {
    return Offset(Segment(FindSegment(PT_DYNAMIC)).p_vaddr);
  }
  int DynamicSlots() const {
    return static_cast<int>(Segment(FindSegment(PT_DYNAMIC)).p_filesz /
                            sizeof(Dyn));
  }
  Dyn DynamicEntry(int i) const {
    return Get<Dyn>(DynamicOffset() + i * sizeof(Dyn));
  }
  void PutDynamicEntry(int i, int64_t tag, uint64_t value) {
    Dyn d;
    d.d_tag = tag;
    d.d_un.d_val = value;
    Put(DynamicOffset() + i * sizeof(Dyn), d);
  }
  // The index of the first entry of `tag` before DT_NULL, or -1.
  int FindDynamic(int64_t tag) const {
    for (int i = 0; i < DynamicSlots(); ++i) {
      const Dyn d = DynamicEntry(i);
      if (d.d_tag == tag) return i;
      if (d.d_tag == DT_NULL) break;
    }
    return -1;
  }
  uint64_t DynamicValue(int64_t tag) const {
    const int i = FindDynamic(tag);
    EXPECT_GE(i, 0) << "no dynamic entry of tag " << tag;
    return i < 0 ? 0 : DynamicEntry(i).d_un.d_val;
  }
  void SetDynamic(int64_t tag, uint64_t value) {
    const int i = FindDynamic(tag);
    ASSERT_GE(i, 0) << "no dynamic entry of tag " << tag;
    PutDynamicEntry(i, tag, value);
  }
  // Appends an entry where DT_NULL is, moving DT_NULL into the next slot.
  void AddDynamic(int64_t tag, uint64_t value) {
    const int end = FindDynamic(DT_NULL);
    ASSERT_GE(end, 0);
    ASSERT_LT(end + 1, DynamicSlots()) << "no spare dynamic slot";
    PutDynamicEntry(end, tag, value);
    PutDynamicEntry(end + 1, DT_NULL, 0);
  }
  // Removes the first entry of `tag`; the later ones move up.
  void RemoveDynamic(int64_t tag) {
    const int i = FindDynamic(tag);
    ASSERT_GE(i, 0) << "no dynamic entry of tag " << tag;
    for (int j = i; j + 1 < DynamicSlots(); ++j) {
      const Dyn next = DynamicEntry(j + 1);
      PutDynamicEntry(j, next.d_tag, next.d_un.d_val);
    }
    PutDynamicEntry(DynamicSlots() - 1, DT_NULL, 0);
  }
  // Every DT_NULL slot becomes an entry of `tag`: nothing ends the section.
  void RemoveTerminator(int64_t tag) {
    for (int i = 0; i < DynamicSlots(); ++i) {
      if (DynamicEntry(i).d_tag == DT_NULL) PutDynamicEntry(i, tag, 0);
    }
  }

  // The dynamic symbol table (its size from the string table after it, as
  // GNU ld lays them out) and one symbol by name.
  uint64_t SymbolOffset(uint64_t index) const {
    return Offset(DynamicValue(DT_SYMTAB)) + index * sizeof(Sym);
  }
  int FindSymbol(const std::string& name) const {
    const uint64_t strtab = Offset(DynamicValue(DT_STRTAB));
    const uint64_t count =
        (DynamicValue(DT_STRTAB) - DynamicValue(DT_SYMTAB)) / sizeof(Sym);
    for (uint64_t i = 1; i < count; ++i) {
      const Sym sym = Get<Sym>(SymbolOffset(i));
      if (std::strcmp(bytes_.c_str() + strtab + sym.st_name, name.c_str()) ==
          0) {
        return static_cast<int>(i);
      }
    }
    ADD_FAILURE() << "no dynamic symbol " << name;
    return -1;
  }

  // Relocation i of the table at dynamic entry `tag` (DT_RELA, DT_JMPREL).
  uint64_t RelaOffset(int64_t tag, int i) const {
    return Offset(DynamicValue(tag)) + static_cast<uint64_t>(i) * sizeof(Rela);
  }
  // The index in DT_RELA of the relocation that writes `address`, or -1.
  int FindRelaWriting(uint64_t address) const {
    const int count = static_cast<int>(DynamicValue(DT_RELASZ) / sizeof(Rela));
    for (int i = 0; i < count; ++i) {
      if (Get<Rela>(RelaOffset(DT_RELA, i)).r_offset == address) return i;
    }
    return -1;
  }

 private:
  std::string bytes_;
};

// One corrupt entry of what the dynamic loader reads through the headers and
// the dynamic section of a plugin the build made (GNU ld's layout: RELA,
// DT_JMPREL, DT_GNU_HASH, version tables, init and fini arrays), and the
// message that names it. Given to dlopen, such a file crashes it, makes it
// abort the process, or makes it read or write outside the object.
struct CorruptElfCase {
  const char* name;
  std::function<void(ElfEditor&)> edit;
  const char* message;
};

inline constexpr uint64_t kFar = uint64_t{1} << 40;  // past every segment

inline std::vector<CorruptElfCase> CorruptElfCases() {
  using E = ElfEditor;
  return {
      {"no_terminator", [](E& e) { e.RemoveTerminator(DT_DEBUG); },
       "has no DT_NULL entry to end it"},
      {"two_strtab",
       [](E& e) { e.AddDynamic(DT_STRTAB, e.DynamicValue(DT_STRTAB)); },
       "its dynamic section has two DT_STRTAB entries"},
      {"strtab_far",
       [](E& e) { e.SetDynamic(DT_STRTAB, e.DynamicValue(DT_STRTAB) + kFar); },
       "dynamic entry DT_STRTAB at 0x100000"},
      {"strsz_huge", [](E& e) { e.SetDynamic(DT_STRSZ, kFar); },
       "(1099511627776 bytes) lies outside the file data of every PT_LOAD"},
      {"strsz_wraps", [](E& e) { e.SetDynamic(DT_STRSZ, ~uint64_t{0}); },
       "dynamic entry DT_STRTAB at"},
      {"strsz_zero", [](E& e) { e.SetDynamic(DT_STRSZ, 0); },
       "dynamic entry DT_STRSZ is 0"},
      {"no_strtab",
       [](E& e) {
         e.RemoveDynamic(DT_STRTAB);
         e.RemoveDynamic(DT_STRSZ);
       },
       "has no string table (DT_STRTAB)"},
      {"strsz_without_strtab", [](E& e) { e.RemoveDynamic(DT_STRTAB); },
       "has DT_STRSZ without DT_STRTAB"},
      {"strtab_without_strsz", [](E& e) { e.RemoveDynamic(DT_STRSZ); },
       "has DT_STRTAB without DT_STRSZ"},
      {"needed_string",
       [](E& e) { e.SetDynamic(DT_NEEDED, e.DynamicValue(DT_STRSZ) + 7); },
       "dynamic entry DT_NEEDED names string offset"},
      {"soname_string", [](E& e) { e.AddDynamic(DT_SONAME, 1 << 30); },
       "dynamic entry DT_SONAME names string offset 1073741824, outside "
       "DT_STRSZ"},
      {"rpath_string", [](E& e) { e.AddDynamic(DT_RPATH, 1 << 30); },
       "dynamic entry DT_RPATH names string offset"},
      {"runpath_string", [](E& e) { e.AddDynamic(DT_RUNPATH, 1 << 30); },
       "dynamic entry DT_RUNPATH names string offset"},
      {"symtab_far",
       [](E& e) { e.SetDynamic(DT_SYMTAB, e.DynamicValue(DT_SYMTAB) + kFar); },
       "dynamic entry DT_SYMTAB at"},
      {"symtab_misaligned",
       [](E& e) { e.SetDynamic(DT_SYMTAB, e.DynamicValue(DT_SYMTAB) + 4); },
       "is not aligned to 8 bytes"},
      {"syment", [](E& e) { e.SetDynamic(DT_SYMENT, 16); },
       "dynamic entry DT_SYMENT is 16; this host's entries are 24 bytes"},
      {"gnu_hash_far",
       [](E& e) {
         e.SetDynamic(DT_GNU_HASH, e.DynamicValue(DT_GNU_HASH) + kFar);
       },
       "dynamic entry DT_GNU_HASH at"},
      {"gnu_hash_bloom",
       [](E& e) {
         e.Put<uint32_t>(e.Offset(e.DynamicValue(DT_GNU_HASH)) + 8, 3);
       },
       "has 3 bloom filter words, not a power of two"},
      {"gnu_hash_buckets",
       [](E& e) {
         e.Put<uint32_t>(e.Offset(e.DynamicValue(DT_GNU_HASH)), 0x40000000);
       },
       "dynamic entry DT_GNU_HASH at"},
      {"no_hash",
       [](E& e) { e.PutDynamicEntry(e.FindDynamic(DT_GNU_HASH), DT_DEBUG, 0); },
       "has no symbol hash table"},
      {"sysv_hash_far", [](E& e) { e.AddDynamic(DT_HASH, kFar); },
       "dynamic entry DT_HASH at"},
      {"rela_far",
       [](E& e) { e.SetDynamic(DT_RELA, e.DynamicValue(DT_RELA) + kFar); },
       "dynamic entry DT_RELA at"},
      {"relasz_partial", [](E& e) { e.SetDynamic(DT_RELASZ, 25); },
       "dynamic entry DT_RELASZ is 25, not a multiple of the entry size (24 "
       "bytes)"},
      {"relaent", [](E& e) { e.SetDynamic(DT_RELAENT, 16); },
       "dynamic entry DT_RELAENT is 16; this host's entries are 24 bytes"},
      {"relaent_missing", [](E& e) { e.RemoveDynamic(DT_RELAENT); },
       "has DT_RELA without DT_RELAENT"},
      {"rel_far",
       [](E& e) {
         e.AddDynamic(DT_REL, kFar);
         e.AddDynamic(DT_RELSZ, 16);
         e.AddDynamic(DT_RELENT, 16);
       },
       "dynamic entry DT_REL at"},
      {"relr_far",
       [](E& e) {
         e.AddDynamic(36 /* DT_RELR */, kFar);
         e.AddDynamic(35 /* DT_RELRSZ */, 8);
         e.AddDynamic(37 /* DT_RELRENT */, 8);
       },
       "dynamic entry DT_RELR at"},
      {"jmprel_far",
       [](E& e) { e.SetDynamic(DT_JMPREL, e.DynamicValue(DT_JMPREL) + kFar); },
       "dynamic entry DT_JMPREL at"},
      {"pltrelsz_wraps",
       // A multiple of 24 whose sum with DT_JMPREL overflows 64 bits.
       [](E& e) { e.SetDynamic(DT_PLTRELSZ, 0xfffffffffffffff0); },
       "dynamic entry DT_JMPREL at"},
      {"pltrel", [](E& e) { e.SetDynamic(DT_PLTREL, DT_REL); },
       "dynamic entry DT_PLTREL is 17; this host's loader applies DT_RELA"},
      {"pltrel_missing", [](E& e) { e.RemoveDynamic(DT_PLTREL); },
       "has DT_JMPREL without DT_PLTREL"},
      {"init_far",
       [](E& e) { e.SetDynamic(DT_INIT, e.DynamicValue(DT_INIT) + kFar); },
       "dynamic entry DT_INIT at"},
      {"init_in_data",
       [](E& e) { e.SetDynamic(DT_INIT, e.DynamicValue(DT_INIT_ARRAY)); },
       "lies outside every executable PT_LOAD segment's file data"},
      {"fini_far",
       [](E& e) { e.SetDynamic(DT_FINI, e.DynamicValue(DT_FINI) + kFar); },
       "dynamic entry DT_FINI at"},
      {"init_array_far",
       [](E& e) {
         e.SetDynamic(DT_INIT_ARRAY, e.DynamicValue(DT_INIT_ARRAY) + kFar);
       },
       "dynamic entry DT_INIT_ARRAY at"},
      {"init_arraysz_partial", [](E& e) { e.SetDynamic(DT_INIT_ARRAYSZ, 12); },
       "dynamic entry DT_INIT_ARRAYSZ is 12, not a multiple of the pointer "
       "size"},
      {"init_arraysz_missing", [](E& e) { e.RemoveDynamic(DT_INIT_ARRAYSZ); },
       "has DT_INIT_ARRAY without DT_INIT_ARRAYSZ"},
      {"init_array_unrelocated",
       [](E& e) {
         e.SetDynamic(DT_INIT_ARRAYSZ, e.DynamicValue(DT_INIT_ARRAYSZ) + 8);
       },
       "of DT_INIT_ARRAY is set by no relocation"},
      {"init_array_data",
       // The RELATIVE relocation of slot 0 now points at data.
       [](E& e) {
         const int r = e.FindRelaWriting(e.DynamicValue(DT_INIT_ARRAY));
         ASSERT_GE(r, 0);
         auto rela = e.Get<ElfW(Rela)>(e.RelaOffset(DT_RELA, r));
         rela.r_addend =
             static_cast<ElfW(Sxword)>(e.DynamicValue(DT_FINI_ARRAY));
         e.Put(e.RelaOffset(DT_RELA, r), rela);
       },
       "sets slot 0 of DT_INIT_ARRAY to something other than code"},
      {"fini_array_far",
       [](E& e) {
         e.SetDynamic(DT_FINI_ARRAY, e.DynamicValue(DT_FINI_ARRAY) + kFar);
       },
       "dynamic entry DT_FINI_ARRAY at"},
      {"versym_far",
       [](E& e) { e.SetDynamic(DT_VERSYM, e.DynamicValue(DT_VERSYM) + kFar); },
       "dynamic entry DT_VERSYM at"},
      {"versym_undefined",
       [](E& e) {
         e.Put<uint16_t>(e.Offset(e.DynamicValue(DT_VERSYM)) + 2, 0x7ff0);
       },
       "version 32752, which neither DT_VERDEF nor DT_VERNEED defines"},
      {"verneed_far",
       [](E& e) {
         e.SetDynamic(DT_VERNEED, e.DynamicValue(DT_VERNEED) + kFar);
       },
       "DT_VERNEED entry 0 at"},
      {"verneed_file",
       [](E& e) {
         auto need = e.Get<ElfW(Verneed)>(e.Offset(e.DynamicValue(DT_VERNEED)));
         need.vn_file = 1 << 30;
         e.Put(e.Offset(e.DynamicValue(DT_VERNEED)), need);
       },
       "DT_VERNEED entry 0 names string offset 1073741824"},
      {"verneed_next",
       [](E& e) {
         auto need = e.Get<ElfW(Verneed)>(e.Offset(e.DynamicValue(DT_VERNEED)));
         need.vn_next = 1 << 30;
         e.Put(e.Offset(e.DynamicValue(DT_VERNEED)), need);
       },
       "DT_VERNEED entry 1 at"},
      {"verdef_far",
       [](E& e) { e.SetDynamic(DT_VERDEF, e.DynamicValue(DT_VERDEF) + kFar); },
       "DT_VERDEF entry 0 at"},
      {"relocation_target",
       // The first relocation now writes the (read-only) ELF header.
       [](E& e) {
         auto rela = e.Get<ElfW(Rela)>(e.RelaOffset(DT_RELA, 0));
         rela.r_offset = 0x10;
         e.Put(e.RelaOffset(DT_RELA, 0), rela);
       },
       "relocation 0 of DT_RELA writes 8 bytes at 0x10, outside every "
       "writable PT_LOAD segment"},
      {"relocation_symbol",
       [](E& e) {
         auto rela = e.Get<ElfW(Rela)>(e.RelaOffset(DT_JMPREL, 0));
         rela.r_info = ELF64_R_INFO(100000, ELF64_R_TYPE(rela.r_info));
         e.Put(e.RelaOffset(DT_JMPREL, 0), rela);
       },
       "relocation 0 of DT_JMPREL names symbol 100000, but the symbol table "
       "holds"},
      {"symbol_name",
       [](E& e) {
         auto sym = e.Get<ElfW(Sym)>(e.SymbolOffset(1));
         sym.st_name = 1 << 30;
         e.Put(e.SymbolOffset(1), sym);
       },
       "symbol 1 names string offset 1073741824, outside DT_STRSZ"},
      {"entry_point_in_data",
       [](E& e) {
         const int i = e.FindSymbol("DsaGetPluginApi");
         ASSERT_GT(i, 0);
         auto sym = e.Get<ElfW(Sym)>(e.SymbolOffset(i));
         sym.st_value = e.DynamicValue(DT_INIT_ARRAY);
         e.Put(e.SymbolOffset(i), sym);
       },
       "(DsaGetPluginApi) is a function at"},
      {"dynamic_partial_entry",
       [](E& e) {
         e.EditSegment(PT_DYNAMIC, [](ElfW(Phdr) * p) { p->p_filesz -= 1; });
       },
       "is not a whole, aligned array of 16-byte entries"},
      {"relro_far",
       [](E& e) {
         e.EditSegment(PT_GNU_RELRO,
                       [](ElfW(Phdr) * p) { p->p_vaddr += kFar; });
       },
       "(PT_GNU_RELRO) at"},
      {"eh_frame_far",
       [](E& e) {
         e.EditSegment(PT_GNU_EH_FRAME,
                       [](ElfW(Phdr) * p) { p->p_vaddr += kFar; });
       },
       "(PT_GNU_EH_FRAME) at"},
      {"note_far",
       [](E& e) {
         e.EditSegment(PT_NOTE, [](ElfW(Phdr) * p) { p->p_vaddr += kFar; });
       },
       "(PT_NOTE) at"},
      {"phdr_elsewhere",
       [](E& e) {
         e.EditSegment(PT_PHDR, [](ElfW(Phdr) * p) { p->p_vaddr += 8; });
       },
       "does not map the program header table"},
      {"loads_out_of_order",
       // The data segment moved below the end of the code segment, keeping
       // its alignment.
       [](E& e) {
         e.EditSegment(
             PT_LOAD,
             [](ElfW(Phdr) * p) {
               p->p_vaddr -= 0x2000;
               p->p_paddr -= 0x2000;
             },
             1);
       },
       "before the end of the PT_LOAD segment before it"},
      {"pltrelsz_without_jmprel", [](E& e) { e.RemoveDynamic(DT_JMPREL); },
       "has DT_PLTRELSZ without DT_JMPREL"},
      {"versym_missing", [](E& e) { e.RemoveDynamic(DT_VERSYM); },
       "has DT_VERDEF without DT_VERSYM"},
      {"relacount",
       [](E& e) {
         e.SetDynamic(DT_RELACOUNT, e.DynamicValue(DT_RELACOUNT) + 1);
       },
       "says it is RELATIVE"},
      {"undefined_hidden",
       [](E& e) {
         auto sym = e.Get<ElfW(Sym)>(e.SymbolOffset(1));
         ASSERT_EQ(sym.st_shndx, SHN_UNDEF);
         sym.st_other = STV_HIDDEN;
         e.Put(e.SymbolOffset(1), sym);
       },
       "is undefined but binds locally"},
      {"verneed_hash",
       [](E& e) {
         const uint64_t need = e.Offset(e.DynamicValue(DT_VERNEED));
         const uint64_t aux = need + e.Get<ElfW(Verneed)>(need).vn_aux;
         e.Put<uint32_t>(aux, e.Get<uint32_t>(aux) ^ 1);
       },
       "DT_VERNEED entry 0 gives hash"},
      {"verneed_file_not_needed",
       // The file becomes the name of the version it needs.
       [](E& e) {
         const uint64_t need = e.Offset(e.DynamicValue(DT_VERNEED));
         auto entry = e.Get<ElfW(Verneed)>(need);
         entry.vn_file = e.Get<ElfW(Vernaux)>(need + entry.vn_aux).vna_name;
         e.Put(need, entry);
       },
       "which no DT_NEEDED entry names"},
      {"got_slot_misaligned",
       [](E& e) {
         auto rela = e.Get<ElfW(Rela)>(e.RelaOffset(DT_JMPREL, 0));
         rela.r_offset += 1;
         e.Put(e.RelaOffset(DT_JMPREL, 0), rela);
       },
       "writes a GOT slot at"},
  };
}

}  // namespace dsa::platform::testing

#endif  // DSA_PLATFORM_ELF_TEST_UTIL_H_
