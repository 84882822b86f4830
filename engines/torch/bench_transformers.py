"""Time to first token and decode speed of transformers' GLM-5 and
DeepSeek-V3.2 models: converted to the plugins' attention (with the skip,
without it) against transformers' own eager and sdpa attention, on a GPU
(issue 20, item 3).

The models are check_convert.py's (random weights, the real configs at 4
layers, 8 experts of which 2 active, bf16; the checks' own models route to
every expert and are built apart). For each prompt length (1024, 1900: the dense
path; 8192: the sparse path) and arm:
  TTFT     generate(max_new_tokens=1), median over --runs after a warm-up
           (generate(max_new_tokens=3): a prefill and decode steps)
  decode   16 / (median generate(max_new_tokens=17) - median TTFT) tokens/s
  peak     the GPU memory peak of the arm's calls
generate() is called as a user would, batch 1, no cache argument (the
converted model stands its DsaCache in for the one generate() makes). An arm
that runs out of memory or past --arm-seconds is recorded as such, with its
length. With --check, check_convert.py's checks run first (one process).

    PYTHONPATH=engines/torch python3 engines/torch/bench_transformers.py \\
        --out /tmp/out [--cases glm5,dsv32] [--tokens 1024,1900,8192] \\
        [--budget 150] [--check] [--plugins ...] [--library ...]

Writes bench_transformers.json (and check_convert.json with --check).
"""

import argparse
import json
import os
import statistics
import sys
import time

import torch

import check_convert as cc

log = cc.log
ARMS = ("dsa_skip", "dsa_no_skip", "eager", "sdpa")


def timed(fn):
    torch.cuda.synchronize()
    t = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return time.perf_counter() - t


def run_arm(model, arm, ids, args, stop_at):
    """Medians of one arm at one length, or why there are none."""
    kw1, kw17 = cc.gen_kwargs(1), cc.gen_kwargs(args.decode + 1)

    def gen(kw):
        with torch.no_grad():
            model.generate(ids, **kw)

    torch.cuda.reset_peak_memory_stats()
    out = {}
    try:
        # Warm-up: a prefill and decode steps (the first decode steps of
        # a process pay one-time costs: 1.7 s against 0.33 s for 16 sdpa
        # steps at 1K in the first H200 run).
        first = timed(lambda: gen(cc.gen_kwargs(3)))
        ttft = []
        for _ in range(args.runs):
            if time.time() > stop_at:
                break
            ttft.append(timed(lambda: gen(kw1)))
        ttft = ttft or [first]
        out["ttft_ms"] = statistics.median(ttft) * 1e3
        out["ttft_runs_ms"] = [round(t * 1e3, 2) for t in ttft]
        longer = []
        for _ in range(args.decode_runs):
            if time.time() > stop_at and longer:
                break
            longer.append(timed(lambda: gen(kw17)))
        span = statistics.median(longer) - statistics.median(ttft)
        out["decode_tokens_per_s"] = args.decode / span if span > 0 else None
        out["generate17_runs_ms"] = [round(t * 1e3, 2) for t in longer]
    except torch.cuda.OutOfMemoryError as e:
        out["oom"] = str(e).split("\n")[0][:200]
    out["peak_gib"] = torch.cuda.max_memory_allocated() / 2 ** 30
    torch.cuda.empty_cache()
    return out


def bench_case(model, case, args, deadline, results, arms=ARMS):
    from dsa_torch import transformers as dt

    gen = torch.Generator().manual_seed(11)
    res = results.setdefault(case, {})
    for T in args.tokens:
        ids = torch.randint(1, model.config.vocab_size, (1, T),
                            generator=gen).cuda()
        row = res.setdefault(str(T), {})
        for arm in arms:
            if time.time() > deadline:
                row[arm] = {"not_run": "out of time"}
                continue
            stop_at = min(deadline, time.time() + args.arm_seconds)
            if arm.startswith("dsa"):
                cc.set_attn(model, "sdpa")
                dt.convert(model)
                dt.set_skip_indexer(model, arm == "dsa_skip")
            else:
                cc.set_attn(model, arm)
            try:
                r = run_arm(model, arm, ids, args, stop_at)
                if arm.startswith("dsa"):
                    plan = dt.runtime_of(model).last_plan
                    r["last_plan"] = plan.counts() if plan else None
            finally:
                if dt.is_converted(model):
                    dt.restore(model)
            row[arm] = r
            if "oom" in r:
                log(f"{case} T={T} {arm}: out of memory at {T} tokens "
                    f"(peak {r['peak_gib']:.1f} GiB)")
            else:
                dec = r.get("decode_tokens_per_s")
                log(f"{case} T={T} {arm}: TTFT {r['ttft_ms']:.1f} ms "
                    f"{r['ttft_runs_ms']}, decode "
                    f"{dec if dec is None else round(dec, 1)} tok/s, peak "
                    f"{r['peak_gib']:.1f} GiB")
    cc.set_attn(model, "eager")
    return res


def library_ready(args):
    import dsa_torch

    return os.path.isfile(args.library or dsa_torch.default_library())


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    cc.add_args(p)
    p.set_defaults(cases="glm5,dsv32", tokens="1024,1900,8192", budget=150.0,
                   out="/tmp/bench_transformers")
    p.add_argument("--check", action="store_true",
                   help="run check_convert's checks first on the same models")
    p.add_argument("--check-tokens", default="1024,3072")
    p.add_argument("--check-budget", type=float, default=80.0,
                   help="seconds of --budget the checks may take")
    p.add_argument("--check-cases", default="glm5,dsv32,glm52")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--decode", type=int, default=16)
    p.add_argument("--decode-runs", type=int, default=3)
    p.add_argument("--arm-seconds", type=float, default=12.0)
    args = p.parse_args()
    args.tokens = [int(t) for t in args.tokens.split(",")]
    os.makedirs(args.out, exist_ok=True)
    import transformers

    log(f"transformers {transformers.__version__}, torch {torch.__version__}, "
        f"{torch.cuda.get_device_name()}")
    deadline = cc.T0 + args.budget
    check = {"transformers": transformers.__version__, "bound": args.bound}
    bench = {"transformers": transformers.__version__, "runs": args.runs,
             "decode_tokens": args.decode}
    ok = True
    cases = args.cases.split(",")
    check_cases = args.check_cases.split(",") if args.check else []
    check_deadline = cc.T0 + args.check_budget
    hf_arms = ("eager", "sdpa")
    done = {}  # case -> arms already timed
    models = {}
    # The checks first. They route every token to every expert
    # (cc.CHECK_EXPERTS) where the timed models keep --experts of which 2
    # are active, so a checked model is kept for the timings only when the
    # two agree; while the binding still builds, transformers' own arms are
    # timed on a model the bench keeps.
    same_model = args.experts == cc.CHECK_EXPERTS == 2  # 2 of 2 active
    for case in dict.fromkeys(check_cases + cases):
        checked = case in check_cases
        try:
            model = cc.build_model(
                case, layers=args.layers, vocab=args.vocab,
                experts=cc.CHECK_EXPERTS if checked else args.experts,
                active=cc.CHECK_EXPERTS if checked else 2)
        except Exception as e:
            import traceback
            traceback.print_exc()
            (check if case in check_cases else bench)[case] = {
                "error": f"{type(e).__name__}: {e}"}
            ok = False
            continue
        if model is None:
            check[case] = {"skipped": "no GLM-5.2 IndexShare here"}
            continue

        def before_ours(model=model, case=case, timed=not checked or
                        same_model):
            # While the binding builds, time transformers' arms on a model
            # the bench times anyway.
            if timed and case in cases and not library_ready(args):
                bench_case(model, case, args, deadline, bench, hf_arms)
                done[case] = hf_arms
            cc.load_plugins(args)

        if case in check_cases and time.time() >= check_deadline:
            check[case] = {"not_run": "out of time"}
            ok = False
        elif case in check_cases:
            ck = argparse.Namespace(**vars(args))
            ck.tokens = [int(t) for t in args.check_tokens.split(",")]
            try:
                ok = cc.run_case(model, case, ck, check_deadline, check,
                                 before_ours) and ok
            except Exception as e:  # report, and time it all the same
                import traceback
                traceback.print_exc()
                check.setdefault(case, {})["error"] = (
                    f"{type(e).__name__}: {e}")
                ok = False
        if case in cases and (not checked or same_model):
            models[case] = model
        del model, before_ours
        torch.cuda.empty_cache()
    for case in cases:
        try:
            if case not in models:
                if case in bench and "error" in bench[case]:
                    continue
                models[case] = cc.build_model(case, layers=args.layers,
                                              experts=args.experts, active=2,
                                              vocab=args.vocab)
            cc.load_plugins(args)
            bench_case(models[case], case, args, deadline, bench,
                       [a for a in ARMS if a not in done.get(case, ())])
        except Exception as e:
            import traceback
            traceback.print_exc()
            bench.setdefault(case, {})["error"] = f"{type(e).__name__}: {e}"
        models.pop(case, None)
        torch.cuda.empty_cache()
    if args.check:
        check["pass"] = ok
        with open(os.path.join(args.out, "check_convert.json"), "w") as f:
            json.dump(check, f, indent=1)
    with open(os.path.join(args.out, "bench_transformers.json"), "w") as f:
        json.dump(bench, f, indent=1)
    log("bench_transformers: done" + (
        f"; check_convert: {'PASS' if ok else 'FAIL'}" if args.check else ""))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
