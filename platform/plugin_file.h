// Checks on the files a host reads because a user named them: plugin shared
// objects before they are dlopen'ed, and small text files (model configs)
// before they are parsed. Needs nothing but the C and C++ standard libraries,
// so a host without Abseil or protobuf (a PyTorch extension) can use it.
//
// Every function here accepts only a path to a regular file. A fifo, socket,
// directory or device is refused with a message, never opened in a way that
// blocks: the path is stat'ed first, then opened with
// O_RDONLY|O_NONBLOCK|O_NOCTTY|O_CLOEXEC and fstat'ed again, so a file
// swapped for a fifo between the two calls is refused too.
//
// A plugin path must contain a '/': dlopen("name.so") would search the
// library path (LD_LIBRARY_PATH, the ld.so cache, /usr/lib) and could load a
// different file from the one that was checked. A bare name is refused with a
// message that suggests "./name.so"; the loader then passes the same string
// to dlopen, which treats any name with a '/' as a path.
//
// A plugin file is opened once (OpenCheckedPluginFile): the bytes the
// dynamic loader reads of it (the ELF and program headers, every PT_LOAD
// segment, and the section header table) are copied from that one
// descriptor into a sealed memory file (memfd_create, then F_SEAL_SHRINK,
// F_SEAL_GROW, F_SEAL_WRITE and F_SEAL_SEAL), every check runs on the copy
// (plugin_elf.h: the headers, and everything the loader reads through the
// dynamic section), and the loader dlopens the copy as /proc/self/fd/N. So
// the file the checks saw is the file loaded: a file renamed over the path
// after the open is not the one loaded, and one truncated or rewritten in
// place while it is read gives a refused or an intact copy, never a mapping
// that raises SIGBUS when the file shrinks under it.
//
// The cost: one read and one write of the loaded bytes per load (a few
// milliseconds for tens of MB), and those bytes live in memory (shmem,
// swappable) for as long as the plugin is loaded instead of in the page
// cache of the file, where processes loading the same plugin would share
// them. The parts the loader never reads (debug information, the static
// symbol table) are holes in the copy and take no memory.
//
// The identity a check returns (the opened file's device and inode) lets a
// loader refuse the same file loaded twice under two names.
//
// Messages are one line, start with the path, and echo at most
// kMaxEchoedPathChars of it (control characters escaped).
#ifndef DSA_PLATFORM_PLUGIN_FILE_H_
#define DSA_PLATFORM_PLUGIN_FILE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace dsa::platform {

// The most of a path a message echoes.
inline constexpr size_t kMaxEchoedPathChars = 200;

// The most bytes a plugin may have the loader map (its PT_LOAD segments'
// file bytes, headers and section header table together).
inline constexpr uint64_t kMaxPluginLoadedBytes = uint64_t{2} << 30;

// A file as the kernel names it: two paths (a symlink, a hard link, "./x"
// and "x") that name the same file have the same identity.
struct PluginFileIdentity {
  uint64_t device = 0;
  uint64_t inode = 0;

  friend bool operator==(const PluginFileIdentity& a,
                         const PluginFileIdentity& b) {
    return a.device == b.device && a.inode == b.inode;
  }
  friend bool operator!=(const PluginFileIdentity& a,
                         const PluginFileIdentity& b) {
    return !(a == b);
  }
};

// `value` for an error message: control characters and bytes >= 0x7f escaped
// as \xNN, and when it is longer than `max_chars`, its first `max_chars`
// characters followed by "... (N bytes)" with N its whole length. Never
// longer than max_chars * 4 + 32 characters.
std::string EchoForMessage(std::string_view value, size_t max_chars = 80);

// What a stat's st_mode says the file is, for messages: "a regular file",
// "a directory", "a symbolic link", "a fifo (named pipe)", "a socket", "a
// character device", "a block device".
const char* FileTypeName(unsigned mode);

// Reads the regular file at `path` into *contents. False, with a one-line
// message in *error naming the path, when the path is empty or names no
// regular file, cannot be opened or read, or holds more than `max_bytes`
// bytes (read to the end, not trusted from st_size, so a file that grows
// while being read is still capped). Never blocks on a fifo. A bare name is
// a path relative to the working directory here: reading a file involves no
// search path.
bool ReadRegularFile(const std::string& path, size_t max_bytes,
                     std::string* contents, std::string* error);

// A plugin file opened once and checked: the sealed copy of its loaded
// bytes (see above). Closes the copy when destroyed, unless KeepOpen().
class CheckedPluginFile {
 public:
  CheckedPluginFile() = default;
  CheckedPluginFile(const CheckedPluginFile&) = delete;
  CheckedPluginFile& operator=(const CheckedPluginFile&) = delete;
  CheckedPluginFile(CheckedPluginFile&& other) noexcept;
  CheckedPluginFile& operator=(CheckedPluginFile&& other) noexcept;
  ~CheckedPluginFile();

  bool is_open() const { return fd_ >= 0; }
  // The file the path named when it was opened (it may name another now).
  const PluginFileIdentity& identity() const { return identity_; }
  // "/proc/self/fd/N": the sealed copy, as a path dlopen takes.
  std::string load_path() const;
  // Moves the copy to another descriptor number, so that load_path()
  // changes. False with a message when no descriptor is left.
  bool Renumber(std::string* error);
  // Leaves the copy's descriptor, and the file's, open for the life of the
  // process. The dynamic loader knows an object by the name it was opened
  // by, too, and a later dlopen of that name returns it: while an object
  // loaded from load_path() stays loaded, the number must keep naming its
  // copy. And the file's descriptor keeps its inode, so that its identity
  // names no other file while a loader refuses that identity as loaded (a
  // deleted file's inode number is soon reused).
  void KeepOpen() { keep_open_ = true; }

 private:
  friend bool OpenCheckedPluginFile(const std::string& path,
                                    CheckedPluginFile* out, std::string* error);
  void Close();
  int fd_ = -1;         // the sealed copy
  int source_fd_ = -1;  // the file it was copied from
  bool keep_open_ = false;
  PluginFileIdentity identity_;
};

// Opens `path` once and checks it on a sealed copy: true when it names a
// regular file that is a complete ELF shared object for this host whose
// headers and dynamic section the dynamic loader can follow (plugin_elf.h),
// with *out holding the copy. Else false, with a one-line message in *error
// (when not null) naming the path and the first problem found: a bare name,
// no regular file, a file that cannot be read, one that shrank or changed
// while it was copied, more than kMaxPluginLoadedBytes to load, no memory
// file to be had, or an ELF problem naming the entry at fault.
bool OpenCheckedPluginFile(const std::string& path, CheckedPluginFile* out,
                           std::string* error);

// OpenCheckedPluginFile without keeping the copy: whether the loader would
// accept `path` now, and then (when not null) the identity of the file.
bool CheckPluginFile(const std::string& path, PluginFileIdentity* identity,
                     std::string* error);

// The identity of the file `path` names now, following symlinks (no other
// check). False with a message when it cannot be stat'ed.
bool GetPluginFileIdentity(const std::string& path,
                           PluginFileIdentity* identity, std::string* error);

}  // namespace dsa::platform

#endif  // DSA_PLATFORM_PLUGIN_FILE_H_
