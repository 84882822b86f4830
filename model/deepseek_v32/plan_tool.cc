#include "model/deepseek_v32/plan_tool.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string_view>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "google/protobuf/util/json_util.h"
#include "model/deepseek_v32/model_config.h"
#include "model/deepseek_v32/model_loader.h"
#include "model/deepseek_v32/plan_json.pb.h"
#include "model/deepseek_v32/platform_query.h"
#include "platform/plugin_file.h"
#include "platform/status_macros.h"

namespace dsa::model::deepseek_v32 {
namespace {

constexpr int kExitUsage = 2;
constexpr int kExitOutputFailed = 1;

// The most of an error line the tool prints: a safety net behind the capped
// echo of each user value, so no message can flood a terminal or a log.
constexpr size_t kMaxErrorLineChars = 400;

absl::Status Usage(absl::string_view message) {
  return absl::InvalidArgumentError(message);
}

// A user's value as an error message shows it: at most 80 characters, then
// "... (N bytes)"; control characters escaped.
std::string Echo(absl::string_view value) {
  return platform::EchoForMessage(std::string_view(value.data(), value.size()));
}

absl::StatusOr<bool> ParseBool(absl::string_view flag,
                               const std::optional<std::string>& value) {
  if (!value) return true;  // --capturing
  if (*value == "true" || *value == "1") return true;
  if (*value == "false" || *value == "0") return false;
  return Usage(absl::StrCat("--", flag, "=", Echo(*value),
                            ": expected true or false (or just --", flag, ")"));
}

absl::StatusOr<int> ParseInt(absl::string_view flag, absl::string_view value,
                             int lo, int hi) {
  int n = 0;
  const bool digits = !value.empty() &&
                      std::all_of(value.begin(), value.end(),
                                  [](char c) { return c >= '0' && c <= '9'; });
  if (!digits || !absl::SimpleAtoi(value, &n) || n < lo || n > hi) {
    return Usage(absl::StrCat("--", flag, "=", Echo(value),
                              ": expected an integer in [", lo, ", ", hi, "]"));
  }
  return n;
}

// Platform ids ("rocm") and architecture names ("gfx942", "sm_90a",
// "gfx90a:xnack-") are short words; anything else is refused here, before
// the registry would echo it whole.
absl::Status CheckIdentifier(absl::string_view flag, absl::string_view value) {
  constexpr size_t kMaxIdentifierChars = 64;
  const bool word = !value.empty() && value.size() <= kMaxIdentifierChars &&
                    std::all_of(value.begin(), value.end(), [](char c) {
                      return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                             (c >= '0' && c <= '9') || c == '_' || c == '-' ||
                             c == '.' || c == ':' || c == '+';
                    });
  if (word) return absl::OkStatus();
  return Usage(absl::StrCat("--", flag, "=", Echo(value),
                            ": expected a name of at most ",
                            kMaxIdentifierChars, " letters, digits and _-.:+"));
}

const char* YesNo(bool b) { return b ? "yes" : "no"; }

std::string RequestsText(const std::vector<Request>& requests) {
  constexpr size_t kShown = 8;
  std::vector<std::string> parts;
  for (size_t i = 0; i < requests.size() && i < kShown; ++i) {
    parts.push_back(absl::StrCat(requests[i].num_context_tokens, "+",
                                 requests[i].num_new_tokens));
  }
  if (requests.size() > kShown) {
    parts.push_back(absl::StrCat("... (", requests.size() - kShown, " more)"));
  }
  return absl::StrJoin(parts, ", ");
}

std::string ViewText(const AttentionMetadata& m) {
  return absl::StrCat(m.num_decodes,
                      m.num_decodes == 1 ? " decode" : " decodes", " (",
                      m.num_decode_tokens, " tok), ", m.num_prefills,
                      m.num_prefills == 1 ? " prefill" : " prefills", " (",
                      m.num_prefill_tokens, " tok), prefill_max_seq_len ",
                      m.prefill_max_seq_len);
}

std::string PadRight(absl::string_view s, size_t width) {
  std::string out(s);
  if (out.size() < width) out.append(width - out.size(), ' ');
  return out;
}

}  // namespace

std::string PlanUsage() {
  return R"(usage: plan --model=NAME|PATH --requests=CONTEXT+NEW[,...] [flags]

Shows what every layer of a DeepSeek-V3.2-family model does in one forward:
whether its sparse indexer scores, skips (pure short prefill on dense MHA),
shares an earlier layer's top-k, or only reserves its workspace -- and why.

  --model=NAME|PATH        preset (deepseek-v3.2, glm-5.1, glm-5.2, tiny-v3.2,
                           tiny-glm-5.1, tiny-glm-5.2), a .textproto file
                           (a regular file of at most 1 MiB), a Hugging Face
                           checkpoint directory or its config.json
  --platform=ID            cpu, rocm or cuda (default: the active platform)
  --arch=ARCH              e.g. gfx942, gfx950, sm_90 (default: the device's,
                           else the platform's default)
  --requests=C+N[,C+N...]  requests: C tokens already cached, N new tokens
  --spec_tokens=N          MTP speculative tokens per step (default 0)
  --cudagraph=MODE         none, piecewise or full (default none; piecewise
                           when --capturing)
  --capturing              the forward records a cudagraph
  --profile_run            profile/dummy run: no attention metadata
                           (--requests optional)
  --pcp                    prefill context parallelism
  --dcp=N                  decode context parallel size (default 1)
  --force_mqa              prefills use sparse MQA, never dense MHA
  --format=table|json      output format (default table)
  --help                   this text

Exit status: 0 on success, 2 for bad arguments, an unknown preset or
platform, an unreadable model file or an unsupported combination, 1 when the
output cannot be written (one line on stderr).
)";
}

namespace {

// One flag: a switch (--name, or --name=true|false) or one that takes a
// value (--name=value). `read` sets what it controls; `absent`, where set,
// runs when the flag is not given (a required flag, a default that depends
// on another). Flags are read in the table's order, so of two bad ones the
// first listed is reported, and a flag may rely on those before it.
struct PlanFlag {
  const char* name;
  bool is_switch;
  absl::Status (*read)(const std::optional<std::string>& value, PlanOptions& o);
  absl::Status (*absent)(PlanOptions& o);
};

absl::Status ReadSwitch(absl::string_view flag,
                        const std::optional<std::string>& value, bool& out) {
  DSA_ASSIGN_OR_RETURN(out, ParseBool(flag, value));
  return absl::OkStatus();
}

absl::Status ReadIdentifier(absl::string_view flag, const std::string& value,
                            std::string& out) {
  if (value.empty()) return Usage(absl::StrCat("--", flag, " needs a value"));
  DSA_RETURN_IF_ERROR(CheckIdentifier(flag, value));
  out = value;
  return absl::OkStatus();
}

absl::Status ModelRequired(PlanOptions&) {
  return Usage("--model is required (a preset name or a .textproto path)");
}

constexpr PlanFlag kPlanFlags[] = {
    {"help", true,
     [](const std::optional<std::string>& v, PlanOptions& o) {
       return ReadSwitch("help", v, o.help);
     },
     nullptr},
    {"capturing", true,
     [](const std::optional<std::string>& v, PlanOptions& o) {
       return ReadSwitch("capturing", v, o.forward.capturing);
     },
     nullptr},
    {"profile_run", true,
     [](const std::optional<std::string>& v, PlanOptions& o) {
       return ReadSwitch("profile_run", v, o.profile_run);
     },
     nullptr},
    {"pcp", true,
     [](const std::optional<std::string>& v, PlanOptions& o) {
       return ReadSwitch("pcp", v, o.engine.prefill_context_parallel);
     },
     nullptr},
    {"force_mqa", true,
     [](const std::optional<std::string>& v, PlanOptions& o) {
       return ReadSwitch("force_mqa", v, o.engine.force_mqa);
     },
     nullptr},
    {"model", false,
     [](const std::optional<std::string>& v, PlanOptions& o) {
       if (v->empty()) return ModelRequired(o);
       o.model = *v;
       return absl::OkStatus();
     },
     ModelRequired},
    {"platform", false,
     [](const std::optional<std::string>& v, PlanOptions& o) {
       return ReadIdentifier("platform", *v, o.platform);
     },
     nullptr},
    {"arch", false,
     [](const std::optional<std::string>& v, PlanOptions& o) {
       return ReadIdentifier("arch", *v, o.arch);
     },
     nullptr},
    {"requests", false,
     [](const std::optional<std::string>& v, PlanOptions& o) {
       absl::StatusOr<std::vector<Request>> requests = ParseRequests(*v);
       if (!requests.ok()) {
         return Usage(
             absl::StrCat("--requests: ", requests.status().message()));
       }
       o.requests = *std::move(requests);
       return absl::OkStatus();
     },
     [](PlanOptions& o) {
       if (o.profile_run) return absl::OkStatus();
       return Usage(
           "--requests is required (e.g. --requests=0+1024), except "
           "with --profile_run");
     }},
    {"spec_tokens", false,
     [](const std::optional<std::string>& v, PlanOptions& o) {
       DSA_ASSIGN_OR_RETURN(
           o.engine.num_speculative_tokens,
           ParseInt("spec_tokens", *v, 0, kMaxSpeculativeTokens));
       return absl::OkStatus();
     },
     nullptr},
    {"dcp", false,
     [](const std::optional<std::string>& v, PlanOptions& o) {
       DSA_ASSIGN_OR_RETURN(o.engine.decode_context_parallel_size,
                            ParseInt("dcp", *v, 1, kMaxContextParallel));
       return absl::OkStatus();
     },
     nullptr},
    {"cudagraph", false,
     [](const std::optional<std::string>& v, PlanOptions& o) {
       absl::StatusOr<CudagraphMode> mode = ParseCudagraphMode(*v);
       if (!mode.ok()) {
         return Usage(absl::StrCat("--cudagraph=", Echo(*v),
                                   ": expected none, piecewise or full"));
       }
       o.forward.cudagraph_runtime_mode = *mode;
       if (o.forward.capturing && *mode == CudagraphMode::kNone) {
         return Usage(
             "--capturing needs --cudagraph=piecewise or full, not none");
       }
       return absl::OkStatus();
     },
     [](PlanOptions& o) {
       // A capture records a graph, so some cudagraph mode is on;
       // piecewise is the one whose attention would otherwise run eagerly.
       if (o.forward.capturing) {
         o.forward.cudagraph_runtime_mode = CudagraphMode::kPiecewise;
       }
       return absl::OkStatus();
     }},
    {"format", false,
     [](const std::optional<std::string>& v, PlanOptions& o) {
       if (*v == "table") {
         o.format = PlanFormat::kTable;
       } else if (*v == "json") {
         o.format = PlanFormat::kJson;
       } else {
         return Usage(
             absl::StrCat("--format=", Echo(*v), ": expected table or json"));
       }
       return absl::OkStatus();
     },
     nullptr},
};

const PlanFlag* FindPlanFlag(absl::string_view name) {
  for (const PlanFlag& flag : kPlanFlags) {
    if (name == flag.name) return &flag;
  }
  return nullptr;
}

}  // namespace

absl::StatusOr<PlanOptions> ParsePlanArgs(absl::Span<const std::string> args) {
  // Values by flag; std::nullopt for a switch given without one.
  std::map<const PlanFlag*, std::optional<std::string>> values;
  for (const std::string& arg : args) {
    if (arg == "-h") {
      values[FindPlanFlag("help")] = std::nullopt;
      continue;
    }
    if (arg.size() < 3 || arg.compare(0, 2, "--") != 0) {
      return Usage(absl::StrCat("unexpected argument \"", Echo(arg),
                                "\"; flags are --name=value (see --help)"));
    }
    const size_t eq = arg.find('=');
    const std::string name =
        arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    std::optional<std::string> value;
    if (eq != std::string::npos) value = arg.substr(eq + 1);
    const PlanFlag* flag = FindPlanFlag(name);
    if (flag == nullptr) {
      return Usage(
          absl::StrCat("unknown flag --", Echo(name), " (see --help)"));
    }
    if (!flag->is_switch && !value) {
      return Usage(
          absl::StrCat("--", name, " needs a value: --", name, "=..."));
    }
    if (!values.emplace(flag, value).second) {
      return Usage(absl::StrCat("--", name, " given twice"));
    }
  }
  PlanOptions o;
  for (const PlanFlag& flag : kPlanFlags) {
    const auto it = values.find(&flag);
    if (it != values.end()) {
      DSA_RETURN_IF_ERROR(flag.read(it->second, o));
    } else if (flag.absent != nullptr) {
      DSA_RETURN_IF_ERROR(flag.absent(o));
    }
    if (o.help) return o;
  }
  return o;
}

absl::StatusOr<PlanReport> MakePlanReport(const PlanOptions& options,
                                          const platform::Registry& registry) {
  // The configuration only: a checkpoint's weights are not opened.
  LoadModelOptions config_only;
  config_only.open_weights = false;
  DSA_ASSIGN_OR_RETURN(LoadedModel loaded,
                       LoadModel(options.model, config_only));
  ModelConfig config = loaded.config();
  DSA_ASSIGN_OR_RETURN(
      platform::PlatformCapabilities capabilities,
      QueryCapabilities(registry, options.platform, options.arch));
  DSA_ASSIGN_OR_RETURN(
      LayerPlanner planner,
      LayerPlanner::Create(std::move(config), capabilities, options.engine));
  std::optional<ForwardPlan> plan;
  if (options.profile_run) {
    // The requests, when given, must still make a valid batch.
    if (!options.requests.empty()) {
      DSA_RETURN_IF_ERROR(planner.BuildMetadata(options.requests).status());
    }
    DSA_ASSIGN_OR_RETURN(plan, planner.PlanProfileRun(options.forward));
  } else {
    DSA_ASSIGN_OR_RETURN(
        plan, planner.PlanForward(options.forward, options.requests));
  }
  return PlanReport{std::move(planner), *std::move(plan), options.requests};
}

absl::StatusOr<std::string> RenderPlanJson(const PlanReport& report) {
  const ForwardPlan& plan = report.plan;
  PlanJson json;
  json.set_model(report.planner.config().name());
  json.set_platform(report.planner.capabilities().platform_id);
  for (const LayerPlan& l : plan.layers) {
    PlanJson::Layer* layer = json.add_layers();
    layer->set_layer(l.layer);
    layer->set_mtp(l.is_mtp);
    layer->set_indexer(std::string(IndexerActionName(l.indexer.action)));
    layer->set_prefill_branch(std::string(PrefillBranchName(l.prefill_branch)));
    layer->set_k_cache_write(l.k_cache_write);
  }
  PlanJson::IndexerCalls* calls = json.mutable_indexer_calls();
  calls->set_scored(plan.counts.scored);
  calls->set_skipped(plan.counts.skipped);
  calls->set_shared(plan.counts.shared);
  calls->set_workspace_only(plan.counts.workspace_only);

  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  // false, 0 and an empty layer list are values of the schema, not absent.
  options.always_print_primitive_fields = true;
  std::string out;
  const auto status =
      google::protobuf::util::MessageToJsonString(json, &out, options);
  if (!status.ok()) {
    return absl::InternalError(absl::StrCat("cannot print the plan as JSON: ",
                                            std::string(status.message())));
  }
  out += "\n";
  return out;
}

std::string RenderPlanTable(const PlanReport& report) {
  const LayerPlanner& planner = report.planner;
  const ModelConfig& config = planner.config();
  const platform::PlatformCapabilities& caps = planner.capabilities();
  const ForwardPlan& plan = report.plan;
  const BatchMetadata* metadata = plan.metadata ? &*plan.metadata : nullptr;
  const EngineConfig& engine = planner.engine();

  std::string out = absl::StrCat(
      "model ", config.name(), ": ", config.num_main_layers(), " layers + ",
      config.num_mtp_layers(), " MTP, ", config.num_indexer_layers(),
      " with an indexer, index_topk ", config.index_topk(), "\n");
  absl::StrAppend(&out, "platform ", caps.platform_id, " ",
                  platform::DeviceArchName(caps.arch), ": CUDA-alike ",
                  YesNo(caps.is_cuda_alike), ", dense-MHA prefill ",
                  YesNo(caps.sparse_mla_dense_mha_prefill),
                  ", decode context parallel ",
                  YesNo(caps.sparse_mla_decode_context_parallel), "\n");
  absl::StrAppend(&out, "engine: spec tokens ", engine.num_speculative_tokens,
                  ", PCP ", YesNo(engine.prefill_context_parallel), ", DCP ",
                  engine.decode_context_parallel_size, ", force-MQA ",
                  YesNo(engine.force_mqa), "; cudagraph ",
                  CudagraphModeName(plan.forward.cudagraph_runtime_mode),
                  plan.forward.capturing ? " (capturing)" : "", "\n");
  if (metadata != nullptr) {
    absl::StrAppend(&out, "batch: ", metadata->num_requests,
                    metadata->num_requests == 1 ? " request (" : " requests (",
                    RequestsText(report.requests), "), ", metadata->num_tokens,
                    " new tokens\n");
    absl::StrAppend(&out,
                    "  MLA     (decode <= ", metadata->mla.decode_threshold,
                    " tok): ", ViewText(metadata->mla), ", use_dense_mha ",
                    YesNo(metadata->mla.use_dense_mha), "\n");
    absl::StrAppend(&out,
                    "  indexer (decode <= ", metadata->indexer.decode_threshold,
                    " tok): ", ViewText(metadata->indexer), "\n");
  } else {
    absl::StrAppend(&out, "batch: profile/dummy run, no attention metadata\n");
  }
  out += "\n";

  // Runs of consecutive layers that do the same thing for the same reason.
  struct Row {
    std::string layers, kind, indexer, prefill, k_cache, why;
  };
  std::vector<Row> rows;
  rows.push_back({"layers", "kind", "indexer", "prefill", "k_cache", "why"});
  size_t begin = 0;
  while (begin < plan.layers.size()) {
    const LayerPlan& first = plan.layers[begin];
    const std::string why = DescribeIndexerDecision(first, planner, metadata);
    size_t end = begin + 1;
    while (end < plan.layers.size()) {
      const LayerPlan& l = plan.layers[end];
      if (l.is_mtp != first.is_mtp || l.indexer != first.indexer ||
          l.prefill_branch != first.prefill_branch ||
          l.k_cache_write != first.k_cache_write ||
          DescribeIndexerDecision(l, planner, metadata) != why) {
        break;
      }
      ++end;
    }
    rows.push_back({end - begin == 1 ? absl::StrCat(first.layer)
                                     : absl::StrCat(first.layer, "-",
                                                    plan.layers[end - 1].layer),
                    first.is_mtp ? "mtp" : "main",
                    std::string(IndexerActionName(first.indexer.action)),
                    std::string(PrefillBranchName(first.prefill_branch)),
                    first.k_cache_write ? "write" : "-", why});
    begin = end;
  }
  size_t w[5] = {0, 0, 0, 0, 0};
  for (const Row& r : rows) {
    w[0] = std::max(w[0], r.layers.size());
    w[1] = std::max(w[1], r.kind.size());
    w[2] = std::max(w[2], r.indexer.size());
    w[3] = std::max(w[3], r.prefill.size());
    w[4] = std::max(w[4], r.k_cache.size());
  }
  for (const Row& r : rows) {
    absl::StrAppend(&out, PadRight(r.layers, w[0] + 2),
                    PadRight(r.kind, w[1] + 2), PadRight(r.indexer, w[2] + 2),
                    PadRight(r.prefill, w[3] + 2),
                    PadRight(r.k_cache, w[4] + 2), r.why, "\n");
  }
  const IndexerCallCounts& c = plan.counts;
  absl::StrAppend(&out, "\nindexer calls: ", c.scored, " scored, ", c.skipped,
                  " skipped, ", c.shared, " shared, ", c.workspace_only,
                  " workspace_only\n");
  return out;
}

int RunPlanTool(absl::Span<const std::string> args,
                const platform::Registry& registry, std::ostream& out,
                std::ostream& err) {
  auto fail = [&err](const absl::Status& status) {
    // One line, whatever the message holds.
    const std::string line =
        absl::StrReplaceAll(status.message(), {{"\n", " "}});
    err << "plan: " << platform::EchoForMessage(line, kMaxErrorLineChars)
        << "\n";
    return kExitUsage;
  };
  // Writes `text` and checks that it reached the stream's destination:
  // `plan > /dev/full` must not exit 0.
  auto write = [&out, &err](const std::string& text) {
    out << text;
    out.flush();
    if (!out) {
      err << "plan: cannot write the output\n";
      return kExitOutputFailed;
    }
    return 0;
  };
  absl::StatusOr<PlanOptions> options = ParsePlanArgs(args);
  if (!options.ok()) return fail(options.status());
  if (options->help) return write(PlanUsage());
  absl::StatusOr<PlanReport> report = MakePlanReport(*options, registry);
  if (!report.ok()) return fail(report.status());
  if (options->format == PlanFormat::kJson) {
    absl::StatusOr<std::string> json = RenderPlanJson(*report);
    if (!json.ok()) return fail(json.status());
    return write(*json);
  }
  return write(RenderPlanTable(*report));
}

}  // namespace dsa::model::deepseek_v32
