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
// CheckPluginFile reads at most kMaxElfHeaderBytes: the ELF header and the
// program header table. It refuses a file that would crash or confuse the
// dynamic loader (a truncated copy, whose PT_LOAD segments point past the end
// of the file, makes dlopen map pages that raise SIGBUS when touched). It
// guards against accidents (a partial download, a copy that ran out of
// space, a file for another machine), not against someone who can rewrite
// the file between the check and the dlopen: such a person can run code as
// the host anyway. The identity it returns lets a loader refuse the same file
// loaded twice under two names, and re-check after dlopen that the object
// loaded is the file that was checked.
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

// The most CheckPluginFile reads: the ELF header and the program header table
// (a shared object has about ten program headers; 4096 bytes hold 73).
inline constexpr size_t kMaxElfHeaderBytes = 64 * 1024;

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

// Reads the regular file at `path` into *contents. False, with a one-line
// message in *error naming the path, when the path is empty or names no
// regular file, cannot be opened or read, or holds more than `max_bytes`
// bytes (read to the end, not trusted from st_size, so a file that grows
// while being read is still capped). Never blocks on a fifo. A bare name is
// a path relative to the working directory here: reading a file involves no
// search path.
bool ReadRegularFile(const std::string& path, size_t max_bytes,
                     std::string* contents, std::string* error);

// True when `path` names a regular file that is a complete ELF shared object
// for this host: the ELF magic, this host's class (32/64-bit), byte order,
// ELF version and machine (e_machine), type ET_DYN; a program header table
// of this host's entry size lying within the file, with at least one PT_LOAD
// and one PT_DYNAMIC segment; every PT_LOAD and PT_DYNAMIC segment's file
// range within the file, no PT_LOAD whose file size exceeds its memory size;
// a section header table, when present, within the file. Then *identity
// (when not null) is the file's device and inode. Else false, with a
// one-line message in *error (when not null) naming the path and the first
// problem found.
bool CheckPluginFile(const std::string& path, PluginFileIdentity* identity,
                     std::string* error);

// The identity of the file `path` names now, following symlinks (no other
// check). False with a message when it cannot be stat'ed.
bool GetPluginFileIdentity(const std::string& path,
                           PluginFileIdentity* identity, std::string* error);

}  // namespace dsa::platform

#endif  // DSA_PLATFORM_PLUGIN_FILE_H_
