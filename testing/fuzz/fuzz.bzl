"""dsa_fuzz_test: a libFuzzer target that is also a regular test.

The fuzz target (a source defining LLVMFuzzerTestOneInput) becomes

  <name>_lib          the target itself, alwayslink so the entry point stays;
  <name>              a cc_test replaying the seed corpus: in the regular
                      (gcc) suite through replay_main.cc, under --config=fuzz
                      through libFuzzer (which, given files, runs each once);
                      `bazel-bin/testing/fuzz/<name> DIR` fuzzes under
                      --config=fuzz (run_fuzzers.sh does that);
  <name>_regressions  when `regressions` is given: inputs that once crashed
                      (or tripped a sanitizer), replayed as a test of their
                      own so the fix stays fixed.
"""

_FUZZ = "//testing/fuzz:libfuzzer"

def _fuzz_test(name, lib, files, size, tags):
    native.cc_test(
        name = name,
        size = size,
        args = ["$(locations %s)" % f for f in files],
        data = files,
        # One self-contained binary (system libraries aside): faster to fuzz
        # and easy to copy to another machine for a long run.
        linkstatic = True,
        linkopts = select({
            _FUZZ: ["-fsanitize=fuzzer"],
            "//conditions:default": [],
        }),
        tags = tags,
        deps = [lib] + select({
            _FUZZ: [],
            "//conditions:default": ["//testing/fuzz:replay_main"],
        }),
    )

def dsa_fuzz_test(name, srcs, corpus, deps = [], regressions = [], size = "small"):
    """A libFuzzer target that is also a test replaying its corpus.

    Args:
      name: the target (a test; a libFuzzer binary under --config=fuzz).
      srcs: sources defining LLVMFuzzerTestOneInput.
      corpus: the seed corpus the test replays (files).
      deps: libraries of the sources.
      regressions: inputs that once crashed, replayed by `<name>_regressions`.
      size: the test size.
    """
    lib = name + "_lib"
    native.cc_library(
        name = lib,
        testonly = True,
        srcs = srcs,
        deps = deps,
        alwayslink = True,  # defines LLVMFuzzerTestOneInput
    )
    _fuzz_test(name, ":" + lib, corpus, size, ["fuzz"])
    if regressions:
        _fuzz_test(
            name + "_regressions",
            ":" + lib,
            regressions,
            size,
            ["fuzz"],
        )
