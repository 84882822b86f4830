#include "platform/plugin_file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "platform/plugin_elf.h"

namespace dsa::platform {
namespace {

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
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
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

// Writes all `size` bytes at `offset`; false with errno set.
bool WriteAt(int fd, const void* data, size_t size, uint64_t offset) {
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::pwrite(fd, static_cast<const char*>(data) + done,
                               size - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return true;
}

// A read-only mapping of a sealed memory file, unmapped when destroyed.
class Mapping {
 public:
  Mapping(int fd, uint64_t size) : size_(size) {
    void* p = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
    data_ = p == MAP_FAILED ? nullptr : static_cast<const unsigned char*>(p);
  }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping() {
    if (data_ != nullptr) {
      ::munmap(const_cast<unsigned char*>(data_), size_);
    }
  }
  const unsigned char* data() const { return data_; }

 private:
  const unsigned char* data_ = nullptr;
  uint64_t size_;
};

// The memory file's name, seen in /proc/<pid>/maps as "/memfd:<name>".
std::string MemoryFileName(const std::string& path) {
  const size_t slash = path.rfind('/');
  std::string name =
      "dsa-plugin:" +
      (slash == std::string::npos ? path : path.substr(slash + 1));
  for (char& c : name) {
    if (static_cast<unsigned char>(c) < 0x20 ||
        static_cast<unsigned char>(c) >= 0x7f) {
      c = '_';
    }
  }
  return name.substr(0, 240);  // memfd names hold 249 bytes
}

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

const char* FileTypeName(unsigned mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISFIFO(mode)) return "a fifo (named pipe)";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "of an unknown file type";
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

CheckedPluginFile::CheckedPluginFile(CheckedPluginFile&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      source_fd_(std::exchange(other.source_fd_, -1)),
      keep_open_(other.keep_open_),
      identity_(other.identity_) {}

CheckedPluginFile& CheckedPluginFile::operator=(
    CheckedPluginFile&& other) noexcept {
  if (this != &other) {
    Close();
    fd_ = std::exchange(other.fd_, -1);
    source_fd_ = std::exchange(other.source_fd_, -1);
    keep_open_ = other.keep_open_;
    identity_ = other.identity_;
  }
  return *this;
}

CheckedPluginFile::~CheckedPluginFile() { Close(); }

void CheckedPluginFile::Close() {
  if (keep_open_) return;
  if (fd_ >= 0) ::close(fd_);
  if (source_fd_ >= 0) ::close(source_fd_);
  fd_ = source_fd_ = -1;
}

std::string CheckedPluginFile::load_path() const {
  return "/proc/self/fd/" + std::to_string(fd_);
}

bool CheckedPluginFile::Renumber(std::string* error) {
  const int moved = ::fcntl(fd_, F_DUPFD_CLOEXEC, fd_ + 1);
  if (moved < 0) {
    const int err = errno;
    if (error != nullptr) {
      *error = "cannot move the plugin's memory file to another descriptor: " +
               ErrnoText(err);
    }
    return false;
  }
  ::close(fd_);
  fd_ = moved;
  return true;
}

bool OpenCheckedPluginFile(const std::string& path, CheckedPluginFile* out,
                           std::string* error) {
  if (!path.empty() && path.find('/') == std::string::npos) {
    return Fail(error, path,
                "a plugin path needs a '/': write ./" +
                    EchoForMessage(path, kMaxEchoedPathChars) +
                    " for a file in the working directory (a bare name would "
                    "be looked up on the library search path)");
  }
  // The one descriptor of the file everything below reads.
  FileDescriptor fd;
  struct stat st;
  if (!OpenRegularFile(path, &fd, &st, error)) return false;
  const uint64_t file_size = static_cast<uint64_t>(st.st_size);

  // The headers, from the file: they say which bytes to copy.
  elf::Ehdr ehdr;
  std::memset(&ehdr, 0, sizeof(ehdr));
  const ssize_t got = ReadAt(fd.get(), &ehdr, sizeof(ehdr), 0);
  if (got < 0) {
    const int err = errno;
    return Fail(error, path, "cannot read: " + ErrnoText(err));
  }
  if (got < SELFMAG || std::memcmp(ehdr.e_ident, ELFMAG, SELFMAG) != 0) {
    return Fail(error, path,
                got == 0 ? "is empty, not an ELF shared object"
                         : "is not an ELF file (no \\x7fELF magic)");
  }
  if (static_cast<size_t>(got) < sizeof(ehdr)) {
    return Fail(error, path,
                "is " + std::to_string(got) +
                    " bytes, shorter than an ELF header (" +
                    std::to_string(sizeof(ehdr)) + " bytes): truncated?");
  }
  std::string problem;
  if (!elf::CheckElfHeader(ehdr, file_size, &problem)) {
    return Fail(error, path, problem);
  }
  std::vector<elf::Phdr> phdrs(ehdr.e_phnum);
  const size_t ph_bytes = phdrs.size() * sizeof(elf::Phdr);
  const ssize_t ph_got = ReadAt(fd.get(), phdrs.data(), ph_bytes, ehdr.e_phoff);
  if (ph_got != static_cast<ssize_t>(ph_bytes)) {
    const int err = errno;
    return Fail(error, path,
                ph_got < 0
                    ? "cannot read the program header table: " + ErrnoText(err)
                    : std::string("shrank while it was being read: "
                                  "truncated?"));
  }
  if (!elf::CheckProgramHeaders(ehdr, phdrs, file_size, &problem)) {
    return Fail(error, path, problem);
  }
  const std::vector<elf::FileRange> ranges =
      elf::LoadedFileRanges(ehdr, phdrs, file_size);
  uint64_t loaded_bytes = 0;
  for (const elf::FileRange& r : ranges) loaded_bytes += r.size;
  if (loaded_bytes > kMaxPluginLoadedBytes ||
      file_size > std::numeric_limits<size_t>::max()) {
    return Fail(error, path,
                "has " + std::to_string(loaded_bytes) +
                    " bytes to load, more than a plugin may have (" +
                    std::to_string(kMaxPluginLoadedBytes) + ")");
  }

  // The copy: the file's size, holes where the loader reads nothing. Reads
  // only, never a mapping of the file itself, so a file cut short meanwhile
  // gives a short read here instead of SIGBUS later.
  FileDescriptor copy;
  copy.reset(::memfd_create(MemoryFileName(path).c_str(),
                            MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (copy.get() < 0) {
    const int err = errno;
    return Fail(
        error, path,
        "cannot create a memory file to load it from: " + ErrnoText(err));
  }
  if (::ftruncate(copy.get(), static_cast<off_t>(file_size)) != 0) {
    const int err = errno;
    return Fail(error, path, "cannot size its memory file: " + ErrnoText(err));
  }
  std::vector<char> buffer(std::min<uint64_t>(loaded_bytes, 1 << 20));
  for (const elf::FileRange& r : ranges) {
    for (uint64_t done = 0; done < r.size;) {
      const size_t chunk =
          static_cast<size_t>(std::min<uint64_t>(r.size - done, buffer.size()));
      const ssize_t n = ReadAt(fd.get(), buffer.data(), chunk, r.offset + done);
      if (n < 0) {
        const int err = errno;
        return Fail(error, path, "cannot read: " + ErrnoText(err));
      }
      if (static_cast<size_t>(n) != chunk) {
        return Fail(error, path,
                    "shrank while it was being read (byte " +
                        std::to_string(r.offset + done + n) + " of " +
                        std::to_string(file_size) + " is gone): truncated?");
      }
      if (!WriteAt(copy.get(), buffer.data(), chunk, r.offset + done)) {
        const int err = errno;
        return Fail(error, path,
                    "cannot write its memory file: " + ErrnoText(err));
      }
      done += chunk;
    }
  }
  if (::fcntl(copy.get(), F_ADD_SEALS,
              F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0) {
    const int err = errno;
    return Fail(error, path, "cannot seal its memory file: " + ErrnoText(err));
  }

  // Every check again, on the copy: what it accepts is what dlopen maps.
  const Mapping image(copy.get(), file_size);
  if (image.data() == nullptr) {
    const int err = errno;
    return Fail(error, path, "cannot map its memory file: " + ErrnoText(err));
  }
  // The headers the copy was made by must be the copy's: else the file
  // changed between the two reads, and the copy's segments may be holes.
  if (std::memcmp(image.data(), &ehdr, sizeof(ehdr)) != 0 ||
      std::memcmp(image.data() + ehdr.e_phoff, phdrs.data(), ph_bytes) != 0) {
    return Fail(error, path, "changed while it was being read");
  }
  if (!elf::CheckElfImage(image.data(), file_size, &problem)) {
    return Fail(error, path, problem);
  }
  CheckedPluginFile checked;
  checked.fd_ = copy.release();
  checked.source_fd_ = fd.release();
  checked.identity_.device = static_cast<uint64_t>(st.st_dev);
  checked.identity_.inode = static_cast<uint64_t>(st.st_ino);
  *out = std::move(checked);
  return true;
}

bool CheckPluginFile(const std::string& path, PluginFileIdentity* identity,
                     std::string* error) {
  CheckedPluginFile file;
  if (!OpenCheckedPluginFile(path, &file, error)) return false;
  if (identity != nullptr) *identity = file.identity();
  return true;
}
}  // namespace dsa::platform
