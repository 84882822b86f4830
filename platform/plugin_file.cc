#include "platform/plugin_file.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace dsa::platform {
namespace {

using Ehdr = ElfW(Ehdr);
using Phdr = ElfW(Phdr);
using Shdr = ElfW(Shdr);

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
#error "plugin_file.cc: add this host's ELF e_machine"
#endif

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

// strerror_r is the XSI one (int) or the GNU one (char*) depending on the
// feature macros; overloads on its result pick the right reading.
[[maybe_unused]] std::string StrerrorResult(int result, const char* buffer,
                                            int err) {
  return result == 0 ? std::string(buffer) : "error " + std::to_string(err);
}
[[maybe_unused]] std::string StrerrorResult(const char* result, const char*,
                                            int) {
  return std::string(result);
}

std::string ErrnoText(int err) {
  char buffer[256] = {0};
  return StrerrorResult(strerror_r(err, buffer, sizeof(buffer)), buffer, err);
}

// "<path>: <problem>", the path capped and escaped.
std::string PathMessage(const std::string& path, const std::string& problem) {
  return EchoForMessage(path, kMaxEchoedPathChars) + ": " + problem;
}

bool Fail(std::string* error, const std::string& path,
          const std::string& problem) {
  if (error != nullptr) *error = PathMessage(path, problem);
  return false;
}

const char* FileTypeName(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a fifo (named pipe)";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "of an unknown file type";
}

// Owns a file descriptor.
class FileDescriptor {
 public:
  FileDescriptor() = default;
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  void reset(int fd) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

// Opens `path` for reading when it names a regular file. stat first, so a
// device is never opened at all (opening some has side effects); then open
// without blocking (a fifo swapped in since the stat must not block the
// open) and fstat, which is what the descriptor really is.
bool OpenRegularFile(const std::string& path, FileDescriptor* fd,
                     struct stat* st, std::string* error) {
  if (path.empty()) {
    if (error != nullptr) *error = "empty file path";
    return false;
  }
  if (path.find('\0') != std::string::npos) {
    return Fail(error, path, "the path contains a NUL byte");
  }
  struct stat before;
  if (::stat(path.c_str(), &before) != 0) {
    const int err = errno;
    return Fail(error, path, "cannot open: " + ErrnoText(err));
  }
  if (!S_ISREG(before.st_mode)) {
    return Fail(error, path,
                std::string("is ") + FileTypeName(before.st_mode) +
                    ", not a regular file");
  }
  int raw = -1;
  do {
    raw = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  } while (raw < 0 && errno == EINTR);
  if (raw < 0) {
    const int err = errno;
    return Fail(error, path, "cannot open: " + ErrnoText(err));
  }
  fd->reset(raw);
  if (::fstat(fd->get(), st) != 0) {
    const int err = errno;
    return Fail(error, path, "cannot stat: " + ErrnoText(err));
  }
  if (!S_ISREG(st->st_mode)) {
    return Fail(error, path,
                std::string("is ") + FileTypeName(st->st_mode) +
                    ", not a regular file");
  }
  return true;
}

// Reads up to `size` bytes at `offset`; the count read (short at the end of
// the file), or -1 with errno set.
ssize_t ReadAt(int fd, void* data, size_t size, uint64_t offset) {
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::pread(fd, static_cast<char*>(data) + done, size - done,
                              static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  return static_cast<ssize_t>(done);
}

// "[begin, end)" of a file range, for messages.
std::string Range(uint64_t offset, uint64_t size) {
  return "[" + std::to_string(offset) + ", " + std::to_string(offset + size) +
         ")";
}

// Whether [offset, offset + size) lies within a file of `file_size` bytes,
// without overflowing.
bool WithinFile(uint64_t offset, uint64_t size, uint64_t file_size) {
  return offset <= file_size && size <= file_size - offset;
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

}  // namespace

std::string EchoForMessage(std::string_view value, size_t max_chars) {
  std::string out;
  const size_t shown = value.size() <= max_chars ? value.size() : max_chars;
  out.reserve(shown + 32);
  for (size_t i = 0; i < shown; ++i) {
    const unsigned char c = static_cast<unsigned char>(value[i]);
    if (c < 0x20 || c >= 0x7f) {
      char escaped[8];
      std::snprintf(escaped, sizeof(escaped), "\\x%02x", c);
      out += escaped;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (shown < value.size()) {
    out += "... (" + std::to_string(value.size()) + " bytes)";
  }
  return out;
}

bool ReadRegularFile(const std::string& path, size_t max_bytes,
                     std::string* contents, std::string* error) {
  FileDescriptor fd;
  struct stat st;
  if (!OpenRegularFile(path, &fd, &st, error)) return false;
  const std::string limit =
      "larger than the limit of " + std::to_string(max_bytes) + " bytes";
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    return Fail(error, path,
                "is " + std::to_string(st.st_size) + " bytes, " + limit);
  }
  std::string text;
  // st_size is a hint only: files in /proc report 0, and a file may grow.
  text.reserve(static_cast<size_t>(st.st_size));
  char buffer[64 * 1024];
  while (true) {
    const ssize_t n = ::read(fd.get(), buffer, sizeof(buffer));
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      return Fail(error, path, "cannot read: " + ErrnoText(err));
    }
    if (n == 0) break;
    if (static_cast<size_t>(n) > max_bytes - text.size()) {
      return Fail(error, path, "is " + limit);
    }
    text.append(buffer, static_cast<size_t>(n));
  }
  *contents = std::move(text);
  return true;
}

bool GetPluginFileIdentity(const std::string& path,
                           PluginFileIdentity* identity, std::string* error) {
  struct stat st;
  if (path.empty() || path.find('\0') != std::string::npos) {
    return Fail(error, path, "not a valid path");
  }
  if (::stat(path.c_str(), &st) != 0) {
    const int err = errno;
    return Fail(error, path, "cannot stat: " + ErrnoText(err));
  }
  identity->device = static_cast<uint64_t>(st.st_dev);
  identity->inode = static_cast<uint64_t>(st.st_ino);
  return true;
}

bool CheckPluginFile(const std::string& path, PluginFileIdentity* identity,
                     std::string* error) {
  if (!path.empty() && path.find('/') == std::string::npos) {
    return Fail(error, path,
                "a plugin path needs a '/': write ./" +
                    EchoForMessage(path, kMaxEchoedPathChars) +
                    " for a file in the working directory (a bare name would "
                    "be looked up on the library search path)");
  }
  FileDescriptor fd;
  struct stat st;
  if (!OpenRegularFile(path, &fd, &st, error)) return false;
  const uint64_t file_size = static_cast<uint64_t>(st.st_size);
  const std::string size_text = std::to_string(file_size) + " bytes";

  Ehdr ehdr;
  std::memset(&ehdr, 0, sizeof(ehdr));
  const ssize_t got = ReadAt(fd.get(), &ehdr, sizeof(ehdr), 0);
  if (got < 0) {
    const int err = errno;
    return Fail(error, path, "cannot read: " + ErrnoText(err));
  }
  if (got < SELFMAG || std::memcmp(ehdr.e_ident, ELFMAG, SELFMAG) != 0) {
    return Fail(error, path,
                file_size == 0 ? "is empty, not an ELF shared object"
                               : "is not an ELF file (no \\x7fELF magic)");
  }
  if (static_cast<size_t>(got) < sizeof(ehdr)) {
    return Fail(error, path,
                "is " + size_text + ", shorter than an ELF header (" +
                    std::to_string(sizeof(ehdr)) + " bytes): truncated?");
  }
  if (ehdr.e_ident[EI_CLASS] != kHostClass) {
    const unsigned char c = ehdr.e_ident[EI_CLASS];
    return Fail(error, path,
                std::string("is ") +
                    (c == ELFCLASS32   ? "a 32-bit"
                     : c == ELFCLASS64 ? "a 64-bit"
                                       : "an unknown-class") +
                    " ELF object; this host loads " +
                    (kHostClass == ELFCLASS64 ? "64-bit" : "32-bit") + " ones");
  }
  if (ehdr.e_ident[EI_DATA] != kHostData) {
    return Fail(
        error, path,
        std::string("is a ") +
            (ehdr.e_ident[EI_DATA] == ELFDATA2MSB   ? "big-endian"
             : ehdr.e_ident[EI_DATA] == ELFDATA2LSB ? "little-endian"
                                                    : "unknown-byte-order") +
            " ELF object; this host is " +
            (kHostData == ELFDATA2LSB ? "little-endian" : "big-endian"));
  }
  if (ehdr.e_ident[EI_VERSION] != EV_CURRENT || ehdr.e_version != EV_CURRENT) {
    return Fail(error, path, "has an unknown ELF version");
  }
  if (ehdr.e_type != ET_DYN) {
    return Fail(error, path,
                std::string("is ") + ElfTypeName(ehdr.e_type) +
                    ", not a shared object (ET_DYN)");
  }
  if (ehdr.e_machine != kHostMachine) {
    return Fail(error, path,
                "is built for " + MachineName(ehdr.e_machine) +
                    "; this host is " + MachineName(kHostMachine));
  }

  // The program header table: what the dynamic loader maps.
  if (ehdr.e_phnum == 0) {
    return Fail(error, path, "has no program headers; nothing to load");
  }
  if (ehdr.e_phnum == PN_XNUM) {
    return Fail(error, path,
                "uses extended program header numbering (65535 or more "
                "headers); not a plugin");
  }
  if (ehdr.e_phentsize != sizeof(Phdr)) {
    return Fail(error, path,
                "has program headers of " + std::to_string(ehdr.e_phentsize) +
                    " bytes; this host's are " + std::to_string(sizeof(Phdr)));
  }
  const uint64_t ph_bytes = uint64_t{ehdr.e_phnum} * sizeof(Phdr);
  if (!WithinFile(ehdr.e_phoff, ph_bytes, file_size)) {
    return Fail(
        error, path,
        "program header table at bytes " + Range(ehdr.e_phoff, ph_bytes) +
            " lies past the end of the file (" + size_text + "): truncated?");
  }
  if (sizeof(ehdr) + ph_bytes > kMaxElfHeaderBytes) {
    return Fail(
        error, path,
        "has " + std::to_string(ehdr.e_phnum) +
            " program headers, more than a plugin may have (" +
            std::to_string((kMaxElfHeaderBytes - sizeof(ehdr)) / sizeof(Phdr)) +
            ")");
  }

  // The section header table: not used by dlopen, but a linker always writes
  // it last, so a cut anywhere after the code shows up here first.
  if (ehdr.e_shoff != 0) {
    if (ehdr.e_shentsize != sizeof(Shdr)) {
      return Fail(error, path,
                  "has section headers of " + std::to_string(ehdr.e_shentsize) +
                      " bytes; this host's are " +
                      std::to_string(sizeof(Shdr)));
    }
    uint64_t num_sections = ehdr.e_shnum;
    if (num_sections == 0) {
      // Extended numbering: section 0's sh_size holds the count.
      Shdr first;
      if (!WithinFile(ehdr.e_shoff, sizeof(first), file_size) ||
          ReadAt(fd.get(), &first, sizeof(first), ehdr.e_shoff) !=
              static_cast<ssize_t>(sizeof(first))) {
        return Fail(error, path,
                    "section header table at byte " +
                        std::to_string(ehdr.e_shoff) +
                        " lies past the end of the file (" + size_text +
                        "): truncated?");
      }
      num_sections = first.sh_size;
    }
    if (num_sections > std::numeric_limits<uint64_t>::max() / sizeof(Shdr)) {
      return Fail(error, path, "has an impossible section count");
    }
    const uint64_t sh_bytes = num_sections * sizeof(Shdr);
    if (!WithinFile(ehdr.e_shoff, sh_bytes, file_size)) {
      return Fail(
          error, path,
          "section header table at bytes " + Range(ehdr.e_shoff, sh_bytes) +
              " lies past the end of the file (" + size_text + "): truncated?");
    }
    if (ehdr.e_shstrndx != SHN_UNDEF && ehdr.e_shstrndx != SHN_XINDEX &&
        ehdr.e_shstrndx >= num_sections) {
      return Fail(error, path,
                  "names section " + std::to_string(ehdr.e_shstrndx) +
                      " as its section name table, but has " +
                      std::to_string(num_sections) + " sections");
    }
  }

  std::vector<Phdr> phdrs(ehdr.e_phnum);
  if (ReadAt(fd.get(), phdrs.data(), ph_bytes, ehdr.e_phoff) !=
      static_cast<ssize_t>(ph_bytes)) {
    const int err = errno;
    return Fail(error, path,
                "cannot read the program header table: " + ErrnoText(err));
  }
  int num_load = 0;
  const Phdr* dynamic = nullptr;
  for (size_t i = 0; i < phdrs.size(); ++i) {
    const Phdr& ph = phdrs[i];
    if (ph.p_type == PT_NULL) continue;
    const std::string segment = "segment " + std::to_string(i) + " (" +
                                SegmentTypeName(ph.p_type) + ")";
    // Any segment the loader reads comes from the file; a linker never
    // writes one past the end, so none may be.
    if (!WithinFile(ph.p_offset, ph.p_filesz, file_size)) {
      return Fail(
          error, path,
          segment + " covers file bytes " + Range(ph.p_offset, ph.p_filesz) +
              ", past the end of the file (" + size_text + "): truncated?");
    }
    if (ph.p_type == PT_LOAD) {
      ++num_load;
      if (ph.p_filesz > ph.p_memsz) {
        return Fail(error, path,
                    segment + " holds more file bytes (" +
                        std::to_string(ph.p_filesz) + ") than memory bytes (" +
                        std::to_string(ph.p_memsz) + ")");
      }
      if (ph.p_memsz > std::numeric_limits<ElfW(Addr)>::max() - ph.p_vaddr) {
        return Fail(error, path, segment + " wraps the address space");
      }
      if (ph.p_align > 1 && (!IsPowerOfTwo(ph.p_align) ||
                             (ph.p_vaddr - ph.p_offset) % ph.p_align != 0)) {
        return Fail(error, path,
                    segment + " is not aligned as its p_align (" +
                        std::to_string(ph.p_align) + ") says");
      }
    } else if (ph.p_type == PT_DYNAMIC) {
      if (dynamic != nullptr) {
        return Fail(error, path, "has two PT_DYNAMIC segments");
      }
      dynamic = &ph;
    }
  }
  if (num_load == 0) {
    return Fail(error, path, "has no PT_LOAD segment; nothing to load");
  }
  if (dynamic == nullptr || dynamic->p_filesz == 0) {
    return Fail(error, path,
                "has no dynamic section (PT_DYNAMIC); not a shared object");
  }
  // The loader reads the dynamic section through the mapping, so it must lie
  // in the file-backed part of some PT_LOAD segment.
  bool dynamic_mapped = false;
  for (const Phdr& ph : phdrs) {
    if (ph.p_type == PT_LOAD && dynamic->p_vaddr >= ph.p_vaddr &&
        dynamic->p_vaddr - ph.p_vaddr <= ph.p_filesz &&
        dynamic->p_filesz <= ph.p_filesz - (dynamic->p_vaddr - ph.p_vaddr)) {
      dynamic_mapped = true;
      break;
    }
  }
  if (!dynamic_mapped) {
    return Fail(error, path,
                "its dynamic section (PT_DYNAMIC) lies outside every PT_LOAD "
                "segment's file data");
  }
  if (identity != nullptr) {
    identity->device = static_cast<uint64_t>(st.st_dev);
    identity->inode = static_cast<uint64_t>(st.st_ino);
  }
  return true;
}

}  // namespace dsa::platform
