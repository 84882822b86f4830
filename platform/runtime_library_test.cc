// Tests of the symbol-table loader (runtime_library.h), with libm standing in
// for a GPU runtime: symbol lists expand into a struct and its loader, every
// required symbol is checked at load and all missing ones are named, optional
// ones may be absent, and candidates are tried in order.
#include "platform/runtime_library.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dsa::platform {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// Symbol lists in the X-macro form the GPU runtimes use.
#define LIBM_SYMBOLS(REQUIRED, OPTIONAL)            \
  REQUIRED(cos, double, (double x))                 \
  REQUIRED(ldexp, double, (double x, int exponent)) \
  OPTIONAL(dsa_no_such_optional_function, int, (void))

#define BROKEN_SYMBOLS(REQUIRED, OPTIONAL)      \
  REQUIRED(dsa_no_such_function_a, int, (void)) \
  REQUIRED(cos, double, (double x))             \
  OPTIONAL(sin, double, (double x))             \
  REQUIRED(dsa_no_such_function_b, int, (int))

#define ONE_MISSING_SYMBOLS(REQUIRED, OPTIONAL) \
  REQUIRED(cos, double, (double x))             \
  REQUIRED(dsa_no_such_function_c, int, (void))

#define DEFINE_SYMBOL_STRUCT(Name, LIST)                     \
  struct Name {                                              \
    LIST(DSA_RUNTIME_SYMBOL_FIELD, DSA_RUNTIME_SYMBOL_FIELD) \
    void Resolve(RuntimeSymbolResolver& resolver) {          \
      LIST(DSA_RUNTIME_SYMBOL_RESOLVE_REQUIRED,              \
           DSA_RUNTIME_SYMBOL_RESOLVE_OPTIONAL)              \
    }                                                        \
  };

DEFINE_SYMBOL_STRUCT(LibmApi, LIBM_SYMBOLS)
DEFINE_SYMBOL_STRUCT(BrokenApi, BROKEN_SYMBOLS)
DEFINE_SYMBOL_STRUCT(OneMissingApi, ONE_MISSING_SYMBOLS)

constexpr const char* kLibm[] = {"libm.so.6"};

TEST(RuntimeLibraryTest, ResolvesRequiredAndToleratesAbsentOptional) {
  LibmApi api;
  const RuntimeLoadResult result = LoadRuntimeLibrary(kLibm, &api);
  ASSERT_TRUE(result.loaded()) << result.detail;
  EXPECT_EQ(result.state, RuntimeLoad::kLoaded);
  EXPECT_EQ(result.library, "libm.so.6");
  EXPECT_EQ(result.detail, "");
  ASSERT_NE(api.cos, nullptr);
  ASSERT_NE(api.ldexp, nullptr);
  EXPECT_EQ(api.cos(0.0), 1.0);
  EXPECT_EQ(api.ldexp(1.0, 10), 1024.0);
  EXPECT_EQ(api.dsa_no_such_optional_function, nullptr);
}

TEST(RuntimeLibraryTest, MissingRequiredSymbolsFailTheLoadAndAreAllNamed) {
  BrokenApi api;
  const RuntimeLoadResult result = LoadRuntimeLibrary(kLibm, &api);
  EXPECT_FALSE(result.loaded());
  EXPECT_EQ(result.state, RuntimeLoad::kMissingSymbol);
  EXPECT_EQ(result.library, "libm.so.6");
  EXPECT_EQ(result.detail,
            "libm.so.6 lacks required symbols dsa_no_such_function_a, "
            "dsa_no_such_function_b");
  // A failed load leaves nothing half-resolved to call by mistake.
  EXPECT_EQ(api.cos, nullptr);
  EXPECT_EQ(api.sin, nullptr);
}

TEST(RuntimeLibraryTest, OneMissingSymbolIsNamed) {
  OneMissingApi api;
  const RuntimeLoadResult result = LoadRuntimeLibrary(kLibm, &api);
  EXPECT_EQ(result.state, RuntimeLoad::kMissingSymbol);
  EXPECT_EQ(result.detail,
            "libm.so.6 lacks required symbol dsa_no_such_function_c");
}

TEST(RuntimeLibraryTest, NoCandidateOpensIsNotInstalled) {
  constexpr const char* kCandidates[] = {"libdsa_no_such_runtime.so.1",
                                         "/nonexistent/libdsa_runtime.so"};
  LibmApi api;
  const RuntimeLoadResult result = LoadRuntimeLibrary(kCandidates, &api);
  EXPECT_EQ(result.state, RuntimeLoad::kNotInstalled);
  EXPECT_EQ(result.library, "");
  // The first candidate's dlerror() text, which says why.
  EXPECT_THAT(result.detail, StartsWith("libdsa_no_such_runtime.so.1: "));
  EXPECT_THAT(result.detail, HasSubstr("cannot open"));
  EXPECT_EQ(api.cos, nullptr);
}

TEST(RuntimeLibraryTest, EmptyCandidateListIsNotInstalled) {
  LibmApi api;
  const RuntimeLoadResult result = LoadRuntimeLibrary(nullptr, 0, &api);
  EXPECT_EQ(result.state, RuntimeLoad::kNotInstalled);
  EXPECT_EQ(result.detail, "no candidate library");
}

TEST(RuntimeLibraryTest, FallsThroughToTheFirstCandidateThatOpens) {
  constexpr const char* kCandidates[] = {"libdsa_no_such_runtime.so",
                                         "libm.so.6", "libc.so.6"};
  LibmApi api;
  const RuntimeLoadResult result = LoadRuntimeLibrary(kCandidates, &api);
  ASSERT_TRUE(result.loaded()) << result.detail;
  EXPECT_EQ(result.library, "libm.so.6");
  EXPECT_EQ(result.detail, "");
  EXPECT_EQ(api.cos(0.0), 1.0);
}

TEST(RuntimeLibraryTest, ACandidateThatOpensButLacksSymbolsIsFinal) {
  // libc lacks cos; falling through to libm would mix runtime versions when
  // the candidates are versions of one runtime, so the load fails instead.
  constexpr const char* kCandidates[] = {"libc.so.6", "libm.so.6"};
  OneMissingApi api;
  const RuntimeLoadResult result = LoadRuntimeLibrary(kCandidates, &api);
  EXPECT_EQ(result.state, RuntimeLoad::kMissingSymbol);
  EXPECT_EQ(result.library, "libc.so.6");
  EXPECT_THAT(result.detail, HasSubstr("libc.so.6 lacks required symbols"));
  EXPECT_THAT(result.detail, HasSubstr("cos"));
  EXPECT_THAT(result.detail, HasSubstr("dsa_no_such_function_c"));
}

}  // namespace
}  // namespace dsa::platform
