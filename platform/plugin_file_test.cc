#include "platform/plugin_file.h"

#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <future>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "platform/elf_test_util.h"
#include "platform/plugin_elf.h"

namespace dsa::platform {
namespace {

using ::testing::AllOf;
using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::SizeIs;
using ::testing::StartsWith;

// The CPU plugin as Bazel built it (a `data` dependency), relative to the
// test's working directory, the runfiles tree.
constexpr char kPlugin[] = "./platform/cpu/libdsa_cpu_platform.so";

std::string TempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in),
                     std::istreambuf_iterator<char>());
}

std::string WriteFile(const std::string& name, const std::string& bytes) {
  const std::string path = TempDir() + "/" + name;
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  return path;
}

struct Outcome {
  bool ok = false;
  std::string error;
  PluginFileIdentity identity;
};

Outcome Check(const std::string& path) {
  Outcome o;
  o.ok = CheckPluginFile(path, &o.identity, &o.error);
  return o;
}

// Runs `check` on `path`, which names a fifo, and fails instead of hanging
// when the check blocks: opening the fifo's write end and closing it again
// gives a blocked reader its end of file.
template <typename F>
auto WithinDeadline(const std::string& fifo, F check) {
  auto result = std::async(std::launch::async, check);
  if (result.wait_for(std::chrono::seconds(5)) != std::future_status::ready) {
    ADD_FAILURE() << "blocked on the fifo " << fifo;
    const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
    if (fd >= 0) ::close(fd);
  }
  return result.get();
}

// The real plugin's bytes with the ELF header changed by `edit`.
std::string EditedPlugin(void (*edit)(ElfW(Ehdr) *)) {
  std::string bytes = ReadAll(kPlugin);
  EXPECT_GT(bytes.size(), sizeof(ElfW(Ehdr)));
  ElfW(Ehdr) ehdr;
  std::memcpy(&ehdr, bytes.data(), sizeof(ehdr));
  edit(&ehdr);
  std::memcpy(bytes.data(), &ehdr, sizeof(ehdr));
  return bytes;
}

TEST(CheckPluginFileTest, AcceptsTheCpuPlugin) {
  const Outcome o = Check(kPlugin);
  EXPECT_TRUE(o.ok) << o.error;
  EXPECT_NE(o.identity.inode, 0u);
  struct stat st;
  ASSERT_EQ(::stat(kPlugin, &st), 0);
  EXPECT_EQ(o.identity.inode, static_cast<uint64_t>(st.st_ino));
  EXPECT_EQ(o.identity.device, static_cast<uint64_t>(st.st_dev));
}

TEST(CheckPluginFileTest, ErrorAndIdentityMayBeNull) {
  EXPECT_TRUE(CheckPluginFile(kPlugin, nullptr, nullptr));
  EXPECT_FALSE(CheckPluginFile("/no/such/plugin.so", nullptr, nullptr));
}

TEST(CheckPluginFileTest, TwoNamesOfOneFileHaveOneIdentity) {
  const std::string copy = WriteFile("copy.so", ReadAll(kPlugin));
  const std::string link = TempDir() + "/link.so";
  const std::string hard = TempDir() + "/hard.so";
  ::unlink(link.c_str());
  ::unlink(hard.c_str());
  ASSERT_EQ(::symlink(copy.c_str(), link.c_str()), 0);
  ASSERT_EQ(::link(copy.c_str(), hard.c_str()), 0);
  const Outcome a = Check(copy), b = Check(link), c = Check(hard);
  ASSERT_TRUE(a.ok && b.ok && c.ok) << a.error << b.error << c.error;
  EXPECT_EQ(a.identity, b.identity);
  EXPECT_EQ(a.identity, c.identity);
  EXPECT_NE(a.identity, Check(kPlugin).identity);  // a copy is another file
  PluginFileIdentity now;
  std::string error;
  ASSERT_TRUE(GetPluginFileIdentity(link, &now, &error)) << error;
  EXPECT_EQ(now, a.identity);
  EXPECT_FALSE(GetPluginFileIdentity(TempDir() + "/none.so", &now, &error));
  EXPECT_THAT(error, HasSubstr("No such file"));
}

TEST(CheckPluginFileTest, FifoIsRefusedWithoutBlocking) {
  const std::string fifo = TempDir() + "/plugin.fifo";
  ::unlink(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const auto start = std::chrono::steady_clock::now();
  const Outcome o = WithinDeadline(fifo, [&] { return Check(fifo); });
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  EXPECT_FALSE(o.ok);
  EXPECT_THAT(o.error, AllOf(StartsWith(fifo), HasSubstr("fifo"),
                             HasSubstr("not a regular file")));
}

TEST(CheckPluginFileTest, DirectoryDeviceAndSocketAreRefused) {
  Outcome o = Check(TempDir());
  EXPECT_FALSE(o.ok);
  EXPECT_THAT(o.error, HasSubstr("is a directory, not a regular file"));
  o = Check("/dev/null");
  EXPECT_FALSE(o.ok);
  EXPECT_EQ(o.error, "/dev/null: is a character device, not a regular file");

  // Socket paths are short (108 bytes): bind one in the working directory
  // when TEST_TMPDIR is long.
  std::string socket_path = TempDir() + "/s";
  if (socket_path.size() >= sizeof(sockaddr_un::sun_path)) socket_path = "./s";
  ::unlink(socket_path.c_str());
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un address = {};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, socket_path.c_str(),
               sizeof(address.sun_path) - 1);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0) {
    o = Check(socket_path);
    EXPECT_FALSE(o.ok);
    EXPECT_THAT(o.error, HasSubstr("is a socket"));
    ::unlink(socket_path.c_str());
  }
  ::close(fd);
}

TEST(CheckPluginFileTest, MissingAndEmptyFilesAreRefused) {
  Outcome o = Check(TempDir() + "/missing.so");
  EXPECT_FALSE(o.ok);
  EXPECT_THAT(o.error, AllOf(HasSubstr("missing.so: cannot open: "),
                             HasSubstr("No such file or directory")));
  o = Check(WriteFile("empty.so", ""));
  EXPECT_FALSE(o.ok);
  EXPECT_THAT(o.error, HasSubstr("empty.so: is empty"));
  o = Check("");
  EXPECT_FALSE(o.ok);
  EXPECT_EQ(o.error, "empty file path");
}

TEST(CheckPluginFileTest, BareNameIsNeverSearched) {
  // libc.so.6 exists on the library path; a bare name must not find it.
  const Outcome o = Check("libc.so.6");
  EXPECT_FALSE(o.ok);
  EXPECT_THAT(o.error,
              AllOf(StartsWith("libc.so.6: "), HasSubstr("write ./libc.so.6"),
                    HasSubstr("library search path")));
}

TEST(CheckPluginFileTest, WrongMagicIsRefused) {
  Outcome o = Check(WriteFile("text.so", "#!/bin/sh\necho not a plugin\n"));
  EXPECT_FALSE(o.ok);
  EXPECT_THAT(o.error, HasSubstr("is not an ELF file"));
  o = Check(WriteFile("short.so",
                      "\x7f"
                      "E"));
  EXPECT_FALSE(o.ok);
  EXPECT_THAT(o.error, HasSubstr("is not an ELF file"));
  o = Check(WriteFile("header.so", ReadAll(kPlugin).substr(0, 40)));
  EXPECT_FALSE(o.ok);
  EXPECT_THAT(o.error, HasSubstr("shorter than an ELF header"));
}

// The first 2000 bytes of a valid plugin make dlopen map past the end of the
// file and the host die of SIGBUS; the check refuses them first.
TEST(CheckPluginFileTest, TruncatedCopiesAreRefused) {
  const std::string bytes = ReadAll(kPlugin);
  ASSERT_GT(bytes.size(), 4000u);
  for (size_t size : {size_t{2000}, bytes.size() / 2, bytes.size() - 1}) {
    const Outcome o = Check(
        WriteFile("cut" + std::to_string(size) + ".so", bytes.substr(0, size)));
    EXPECT_FALSE(o.ok) << size;
    EXPECT_THAT(o.error, AllOf(HasSubstr("past the end of the file (" +
                                         std::to_string(size) + " bytes)"),
                               EndsWith("truncated?")));
  }
}

// Without a section header table (as after some strip tools), the segments
// themselves show the cut.
TEST(CheckPluginFileTest, TruncatedSegmentsAreRefusedWithoutSectionTable) {
  const std::string bytes = EditedPlugin([](ElfW(Ehdr) * e) {
    e->e_shoff = 0;
    e->e_shnum = 0;
    e->e_shstrndx = SHN_UNDEF;
  });
  EXPECT_TRUE(Check(WriteFile("nosections.so", bytes)).ok);
  const Outcome o =
      Check(WriteFile("nosections_cut.so", bytes.substr(0, 2000)));
  EXPECT_FALSE(o.ok);
  EXPECT_THAT(o.error,
              AllOf(HasSubstr("(PT_LOAD) covers file bytes"),
                    HasSubstr("past the end of the file (2000 bytes)")));
}

TEST(CheckPluginFileTest, HeadersForAnotherHostAreRefused) {
  Outcome o = Check(WriteFile("class.so", EditedPlugin([](ElfW(Ehdr) * e) {
                                e->e_ident[EI_CLASS] =
                                    e->e_ident[EI_CLASS] == ELFCLASS64
                                        ? ELFCLASS32
                                        : ELFCLASS64;
                              })));
  EXPECT_FALSE(o.ok);
  EXPECT_THAT(o.error, HasSubstr("-bit ELF object; this host loads"));

  o = Check(WriteFile("endian.so", EditedPlugin([](ElfW(Ehdr) * e) {
                        e->e_ident[EI_DATA] = e->e_ident[EI_DATA] == ELFDATA2LSB
                                                  ? ELFDATA2MSB
                                                  : ELFDATA2LSB;
                      })));
  EXPECT_FALSE(o.ok);
  EXPECT_THAT(o.error, HasSubstr("-endian ELF object; this host is"));

  o = Check(WriteFile("machine.so", EditedPlugin([](ElfW(Ehdr) * e) {
                        e->e_machine =
                            EM_AMDGPU;  // a GPU code object is no host plugin
                      })));
  EXPECT_FALSE(o.ok);
  EXPECT_THAT(o.error, HasSubstr("is built for AMDGPU; this host is"));

  o = Check(WriteFile(
      "exec.so", EditedPlugin([](ElfW(Ehdr) * e) { e->e_type = ET_EXEC; })));
  EXPECT_FALSE(o.ok);
  EXPECT_THAT(o.error, HasSubstr("is an executable, not a shared object"));

  o = Check(WriteFile(
      "object.so", EditedPlugin([](ElfW(Ehdr) * e) { e->e_type = ET_REL; })));
  EXPECT_FALSE(o.ok);
  EXPECT_THAT(o.error, HasSubstr("relocatable object"));
}

TEST(CheckPluginFileTest, CorruptTablesAreRefused) {
  Outcome o = Check(WriteFile("phoff.so", EditedPlugin([](ElfW(Ehdr) * e) {
                                e->e_phoff = ~ElfW(Off){0} -
                                             8;  // offset + size overflows
                              })));
  EXPECT_FALSE(o.ok);
  EXPECT_THAT(o.error, HasSubstr("program header table at bytes"));

  o = Check(WriteFile("phnum.so",
                      EditedPlugin([](ElfW(Ehdr) * e) { e->e_phnum = 0; })));
  EXPECT_FALSE(o.ok);
  EXPECT_THAT(o.error, HasSubstr("has no program headers"));

  o = Check(WriteFile("phentsize.so", EditedPlugin([](ElfW(Ehdr) * e) {
                        e->e_phentsize = 8;
                      })));
  EXPECT_FALSE(o.ok);
  EXPECT_THAT(o.error, HasSubstr("program headers of 8 bytes"));

  o = Check(WriteFile(
      "shoff.so", EditedPlugin([](ElfW(Ehdr) * e) { e->e_shoff += 4096; })));
  EXPECT_FALSE(o.ok);
  EXPECT_THAT(o.error, HasSubstr("section header table at bytes"));

  o = Check(WriteFile("shstrndx.so", EditedPlugin([](ElfW(Ehdr) * e) {
                        e->e_shstrndx = e->e_shnum;
                      })));
  EXPECT_FALSE(o.ok);
  EXPECT_THAT(o.error, HasSubstr("section name table"));
}

TEST(CheckPluginFileTest, CorruptSegmentsAreRefused) {
  // Rewrites the PT_LOAD/PT_DYNAMIC program headers of the real plugin.
  auto edit_segments = [](const std::string& name, uint32_t type,
                          void (*edit)(ElfW(Phdr)*)) {
    std::string bytes = ReadAll(kPlugin);
    ElfW(Ehdr) ehdr;
    std::memcpy(&ehdr, bytes.data(), sizeof(ehdr));
    for (int i = 0; i < ehdr.e_phnum; ++i) {
      ElfW(Phdr) ph;
      char* at = bytes.data() + ehdr.e_phoff + i * sizeof(ph);
      std::memcpy(&ph, at, sizeof(ph));
      if (ph.p_type != type) continue;
      edit(&ph);
      std::memcpy(at, &ph, sizeof(ph));
    }
    return Check(WriteFile(name, bytes));
  };
  Outcome o = edit_segments("load_past_end.so", PT_LOAD, [](ElfW(Phdr) * p) {
    p->p_filesz = p->p_memsz = p->p_filesz + (1 << 20);
  });
  EXPECT_FALSE(o.ok);
  EXPECT_THAT(o.error, HasSubstr("(PT_LOAD) covers file bytes"));

  o = edit_segments("load_filesz.so", PT_LOAD,
                    [](ElfW(Phdr) * p) { p->p_memsz = p->p_filesz / 2; });
  EXPECT_FALSE(o.ok);
  EXPECT_THAT(o.error, HasSubstr("more file bytes"));

  o = edit_segments("load_align.so", PT_LOAD,
                    [](ElfW(Phdr) * p) { p->p_align = 3000; });
  EXPECT_FALSE(o.ok);
  EXPECT_THAT(o.error, HasSubstr("not aligned"));

  o = edit_segments("no_load.so", PT_LOAD,
                    [](ElfW(Phdr) * p) { p->p_type = PT_NOTE; });
  EXPECT_FALSE(o.ok);
  EXPECT_THAT(o.error, HasSubstr("has no PT_LOAD segment"));

  o = edit_segments("dynamic_past_end.so", PT_DYNAMIC,
                    [](ElfW(Phdr) * p) { p->p_offset = ~ElfW(Off){0} - 4; });
  EXPECT_FALSE(o.ok);
  EXPECT_THAT(o.error, HasSubstr("(PT_DYNAMIC) covers file bytes"));

  o = edit_segments("dynamic_unmapped.so", PT_DYNAMIC,
                    [](ElfW(Phdr) * p) { p->p_vaddr += 1ull << 40; });
  EXPECT_FALSE(o.ok);
  EXPECT_THAT(o.error, HasSubstr("outside every PT_LOAD"));

  o = edit_segments("no_dynamic.so", PT_DYNAMIC,
                    [](ElfW(Phdr) * p) { p->p_type = PT_NULL; });
  EXPECT_FALSE(o.ok);
  EXPECT_THAT(o.error, HasSubstr("has no dynamic section"));
}

TEST(CheckPluginFileTest, CorruptDynamicEntriesAreRefusedByName) {
  const std::string plugin = ReadAll(kPlugin);
  for (const testing::CorruptElfCase& c : testing::CorruptElfCases()) {
    SCOPED_TRACE(c.name);
    testing::ElfEditor editor(plugin);
    c.edit(editor);
    ASSERT_NE(editor.bytes(), plugin) << "the edit changed nothing";
    const std::string path =
        WriteFile(std::string("corrupt_") + c.name + ".so", editor.bytes());
    const Outcome o = Check(path);
    EXPECT_FALSE(o.ok);
    EXPECT_THAT(o.error, AllOf(StartsWith(path + ": "), HasSubstr(c.message),
                               Not(HasSubstr("\n"))));
  }
}

// The checker itself on hostile bytes: random damage to the parts the
// loader reads never makes it crash or read outside the image (ASan), and
// whatever it accepts it accepts again.
TEST(CheckPluginFileTest, RandomDamageNeverCrashesTheChecker) {
  const std::string plugin = ReadAll(kPlugin);
  testing::ElfEditor editor(plugin);
  // The headers and the tables at the start of the code segment, and the
  // data segment (relocated data, GOT and the dynamic section).
  const uint64_t tables_end = editor.Offset(editor.DynamicValue(DT_INIT));
  const auto data = editor.Segment(editor.FindSegment(PT_LOAD, 1));
  std::mt19937_64 rng(std::random_device{}());
  int accepted = 0;
  for (int round = 0; round < 3000; ++round) {
    std::string bytes = plugin;
    const int flips = 1 + static_cast<int>(rng() % 8);
    for (int f = 0; f < flips; ++f) {
      const uint64_t at = rng() % 2 == 0
                              ? rng() % tables_end
                              : data.p_offset + rng() % data.p_filesz;
      bytes[at] = static_cast<char>(rng() % 2 == 0 ? rng() : bytes[at] ^ 0x80);
    }
    std::string problem;
    const bool ok =
        elf::CheckElfImage(reinterpret_cast<const unsigned char*>(bytes.data()),
                           bytes.size(), &problem);
    if (ok) {
      ++accepted;
    } else {
      EXPECT_THAT(problem, Not(HasSubstr("\n")));
    }
  }
  // Most damage to those bytes is visible (a flip in code or padding is not).
  EXPECT_LT(accepted, 3000);
}

TEST(CheckPluginFileTest, CheckedFileIsASealedCopy) {
  const std::string copy = WriteFile("sealed.so", ReadAll(kPlugin));
  CheckedPluginFile file;
  std::string error;
  ASSERT_TRUE(OpenCheckedPluginFile(copy, &file, &error)) << error;
  ASSERT_TRUE(file.is_open());
  const std::string load_path = file.load_path();
  EXPECT_THAT(load_path, StartsWith("/proc/self/fd/"));
  const int fd = std::stoi(load_path.substr(std::strlen("/proc/self/fd/")));
  EXPECT_EQ(::fcntl(fd, F_GET_SEALS),
            F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
  // The loaded bytes are the file's; what the loader never reads is a hole.
  const std::string bytes = ReadAll(kPlugin);
  const std::string held = ReadAll(load_path);
  ASSERT_EQ(held.size(), bytes.size());
  testing::ElfEditor editor(bytes);
  for (int n = 0; editor.FindSegment(PT_LOAD, n) >= 0; ++n) {
    const auto load = editor.Segment(editor.FindSegment(PT_LOAD, n));
    EXPECT_EQ(held.substr(load.p_offset, load.p_filesz),
              bytes.substr(load.p_offset, load.p_filesz));
  }
  // The file at the path changes; the copy does not, and cannot be changed.
  WriteFile("sealed.so", "#!/bin/sh\n");
  EXPECT_EQ(ReadAll(load_path), held);
  const int writable = ::open(load_path.c_str(), O_RDWR);
  if (writable >= 0) {
    EXPECT_LT(::write(writable, "x", 1), 0);
    EXPECT_NE(::ftruncate(writable, 0), 0);
    ::close(writable);
  }
  EXPECT_EQ(ReadAll(load_path), held);
  // Renumbered, the old number is closed; destroyed, the copy is closed.
  ASSERT_TRUE(file.Renumber(&error)) << error;
  EXPECT_NE(file.load_path(), load_path);
  EXPECT_EQ(::fcntl(fd, F_GETFD), -1);
  const std::string moved = file.load_path();
  { CheckedPluginFile gone = std::move(file); }
  struct stat st;
  EXPECT_NE(::stat(moved.c_str(), &st), 0);
}

TEST(CheckPluginFileTest, LongPathsAreCappedInMessages) {
  const std::string path = "./\n" + std::string(100000, 'x') + ".so";
  const Outcome o = Check(path);
  EXPECT_FALSE(o.ok);
  EXPECT_LT(o.error.size(), 300u) << o.error;
  EXPECT_THAT(o.error, HasSubstr("... (100006 bytes)"));
  EXPECT_THAT(o.error, Not(HasSubstr("\n")));
}

TEST(EchoForMessageTest, CapsAndEscapes) {
  EXPECT_EQ(EchoForMessage("glm-5.1"), "glm-5.1");
  EXPECT_EQ(EchoForMessage("a\nb\x7f"), "a\\x0ab\\x7f");
  EXPECT_EQ(EchoForMessage(std::string(81, 'y')),
            std::string(80, 'y') + "... (81 bytes)");
  EXPECT_EQ(EchoForMessage("abcdef", 3), "abc... (6 bytes)");
  EXPECT_EQ(EchoForMessage(""), "");
  EXPECT_THAT(EchoForMessage(std::string(900000, '\x01')), SizeIs(338));
}

TEST(ReadRegularFileTest, ReadsAFileWhole) {
  const std::string path = WriteFile("config.textproto", "name: \"x\"\n");
  std::string contents, error;
  ASSERT_TRUE(ReadRegularFile(path, 1 << 20, &contents, &error)) << error;
  EXPECT_EQ(contents, "name: \"x\"\n");
  ASSERT_TRUE(ReadRegularFile(path, 10, &contents, &error)) << error;
  // A bare name is relative to the working directory here.
  EXPECT_TRUE(ReadRegularFile("platform/cpu/libdsa_cpu_platform.so", 1 << 30,
                              &contents, &error))
      << error;
}

TEST(ReadRegularFileTest, CapsTheSize) {
  const std::string path = WriteFile("big.textproto", std::string(100, 'z'));
  std::string contents = "unchanged", error;
  EXPECT_FALSE(ReadRegularFile(path, 99, &contents, &error));
  EXPECT_THAT(error, HasSubstr("is 100 bytes, larger than the limit of 99"));
  EXPECT_EQ(contents, "unchanged");
  // /proc files report size 0 and still hold bytes.
  EXPECT_FALSE(ReadRegularFile("/proc/self/maps", 4, &contents, &error));
  EXPECT_THAT(error, HasSubstr("is larger than the limit of 4 bytes"));
}

TEST(ReadRegularFileTest, RefusesFifosDirectoriesAndDevices) {
  const std::string fifo = TempDir() + "/config.fifo";
  ::unlink(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string contents, error;
  const bool ok = WithinDeadline(
      fifo, [&] { return ReadRegularFile(fifo, 1 << 20, &contents, &error); });
  EXPECT_FALSE(ok);
  EXPECT_THAT(error, HasSubstr("is a fifo (named pipe), not a regular file"));
  EXPECT_FALSE(ReadRegularFile(TempDir(), 1 << 20, &contents, &error));
  EXPECT_THAT(error, HasSubstr("is a directory"));
  EXPECT_FALSE(ReadRegularFile("/dev/zero", 1 << 20, &contents, &error));
  EXPECT_THAT(error, HasSubstr("is a character device"));
  EXPECT_FALSE(ReadRegularFile("/no/such", 1 << 20, &contents, &error));
  EXPECT_THAT(error, HasSubstr("cannot open"));
  EXPECT_FALSE(ReadRegularFile(std::string("a\0b", 3), 1, &contents, &error));
  EXPECT_THAT(error, HasSubstr("NUL byte"));
}

}  // namespace
}  // namespace dsa::platform
