#include "attention/gpu/indexer/heuristics.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <initializer_list>

#include "attention/gpu/indexer/config.h"

namespace dsa::attention::gpu::indexer {
namespace {

LaunchResult RefuseV(const char* op, const char* format, va_list args) {
  LaunchResult r;
  r.code = LaunchCode::kInvalidArgument;
  int n = std::snprintf(r.message, sizeof(r.message), "%s: ", op);
  if (n < 0) n = 0;
  std::vsnprintf(r.message + n, sizeof(r.message) - n, format, args);
  return r;
}
LaunchResult Unavailable(const char* format, ...) {
  va_list args;
  va_start(args, format);
  LaunchResult r = RefuseV("indexer_logits", format, args);
  va_end(args);
  return r;
}
LaunchResult TopKUnavailable(const char* format, ...) {
  va_list args;
  va_start(args, format);
  LaunchResult r = RefuseV("indexer_topk", format, args);
  va_end(args);
  return r;
}

template <typename Enum>
bool ParseName(const std::string& name, const char* (*to_name)(Enum),
               std::initializer_list<Enum> values, Enum* out) {
  for (Enum v : values) {
    if (name == to_name(v)) {
      *out = v;
      return true;
    }
  }
  return false;
}

#define DSA_INDEXER_VALUE(name, text) , Enum::name

}  // namespace

LaunchResult PlanIndexerLogits(const IndexerLogitsParams& p,
                               const IndexerLogitsOptions& options,
                               const DeviceFeatures& features,
                               LogitsPlan* plan) {
  using Body = IndexerLogitsBody;
  *plan = LogitsPlan{};

  // The matrix kernel: head_dim 128, rows that tile its 256 columns, whole
  // 16-byte chunks of queries and keys. Its body is the device code's.
  const bool matrix = p.head_dim == kHeadDim && MatrixTakesHeads(p.heads) &&
                      p.block_size % 4 == 0 &&
                      reinterpret_cast<uintptr_t>(p.q_fp8) % kChunk == 0 &&
                      reinterpret_cast<uintptr_t>(p.k_cache) % kChunk == 0;
  const bool wgmma = features.sm90a && p.encoding == Fp8Encoding::kE4m3fn;
  // The persistent kernel (on sm_90a the matrix kernel's better form where
  // a row fits one math group): wide blocks when a block's rows are mostly
  // of one request (prefill); on rows of as many requests as rows (decode)
  // they would multiply most tiles by other requests' columns for nothing.
  const bool persistent_heads = matrix && wgmma &&
                                PersistentTakesHeads(p.heads) &&
                                features.multiprocessors > 0;
  const bool wide_wanted =
      p.rows >=
      int64_t{PersistentSmem<true>::kBlockCols / p.heads} * p.num_requests;
  const bool fits_narrow =
      features.max_shared_bytes_per_block >= PersistentSmem<false>::kSmemBytes;
  const bool fits_wide =
      features.max_shared_bytes_per_block >= PersistentSmem<true>::kSmemBytes;
  // TMA key tiles are whole 64-key slices of one page, and a page index is
  // a 32-bit coordinate.
  const bool tma = features.tensor_maps && p.block_size % kTileKeys == 0 &&
                   p.num_blocks <= 0x7fffffff;

  bool wide;
  switch (options.blocks) {
    case IndexerLogitsBlocks::kNarrow:
      wide = false;
      break;
    case IndexerLogitsBlocks::kWide:
      wide = true;
      break;
    default:
      wide = wide_wanted && fits_wide;
  }
  const bool persistent = persistent_heads && (wide ? fits_wide : fits_narrow);
  const bool persistent_asked = options.body == Body::kPersistent ||
                                options.blocks != IndexerLogitsBlocks::kAuto ||
                                options.keys != IndexerLogitsKeys::kAuto ||
                                options.groups != IndexerLogitsGroups::kAuto;

  Body body = options.body;
  if (body == Body::kAuto) {
    if (persistent_asked) {
      body = Body::kPersistent;
    } else if (!matrix) {
      body = Body::kFma;
    } else if (persistent) {
      body = Body::kPersistent;
    } else {
      body = wgmma ? Body::kWarpgroupMma : Body::kWarpMma;
    }
  } else if (persistent_asked && body != Body::kPersistent) {
    return Unavailable(
        "blocks, keys and groups options are the persistent body's, "
        "not %s's",
        BodyName(body));
  }

  switch (body) {
    case Body::kFma:
      plan->body = body;
      plan->rows_per_block = 1;
      plan->blocks = p.rows;
      plan->grid = p.rows;
      return LaunchResult{};
    case Body::kWarpMma:
    case Body::kWarpgroupMma:
      if (!matrix) {
        return Unavailable(
            "the matrix kernel takes head_dim 128, 32 / 64 / 128 / 256 heads, "
            "block_size a multiple of 4 and 16-byte aligned q and k (here "
            "head_dim %d, %d heads, block_size %d)",
            p.head_dim, p.heads, p.block_size);
      }
      if (wgmma != (body == Body::kWarpgroupMma)) {
        return Unavailable(
            "the matrix kernel runs %s here (device code %s, %s data)",
            wgmma ? "warpgroup_mma" : "warp_mma",
            features.sm90a ? "sm_90a" : "not sm_90a",
            p.encoding == Fp8Encoding::kE4m3fn ? "e4m3fn" : "e4m3fnuz");
      }
      plan->body = body;
      plan->rows_per_block = kBlockCols / p.heads;
      plan->blocks = (p.rows + plan->rows_per_block - 1) / plan->rows_per_block;
      plan->grid = plan->blocks;
      return LaunchResult{};
    case Body::kPersistent:
      break;
    default:
      return Unavailable("unknown body %d", static_cast<int>(body));
  }

  if (!persistent) {
    return Unavailable(
        "the persistent body needs sm_90a device code, e4m3fn data, the "
        "matrix kernel's shapes with at most %d heads and %d bytes of shared "
        "memory (here %s, %s, %d heads, %d bytes)",
        Persistent::kCols,
        wide ? PersistentSmem<true>::kSmemBytes
             : PersistentSmem<false>::kSmemBytes,
        features.sm90a ? "sm_90a" : "not sm_90a",
        p.encoding == Fp8Encoding::kE4m3fn ? "e4m3fn" : "e4m3fnuz", p.heads,
        features.max_shared_bytes_per_block);
  }
  bool tma_keys = tma;
  if (options.keys == IndexerLogitsKeys::kCpAsync) tma_keys = false;
  if (options.keys == IndexerLogitsKeys::kTma && !tma) {
    return Unavailable(
        "TMA key tiles need tensor maps and block_size a multiple of %d "
        "(here block_size %d)",
        kTileKeys, p.block_size);
  }
  plan->body = Body::kPersistent;
  plan->wide = wide;
  plan->tma_keys = tma_keys;
  // Four math groups on wide blocks of long launches (prefill); two on
  // short ones and on narrow blocks, whose one-row decode tiles take the
  // m64n32 product.
  const int64_t wide_tiles =
      (p.rows * p.heads + PersistentSmem<true>::kBlockCols - 1) /
      PersistentSmem<true>::kBlockCols *
      ((p.width + kTileKeys - 1) / kTileKeys);
  switch (options.groups) {
    case IndexerLogitsGroups::kTwo:
      plan->math_groups = 2;
      break;
    case IndexerLogitsGroups::kFour:
      if (!wide) {
        return Unavailable("four math groups take wide blocks only");
      }
      plan->math_groups = 4;
      break;
    default:
      plan->math_groups = wide && wide_tiles >= Persistent::kFourGroupTiles *
                                                    features.multiprocessors
                              ? 4
                              : 2;
  }
  plan->rows_per_block = (wide ? PersistentSmem<true>::kBlockCols
                               : PersistentSmem<false>::kBlockCols) /
                         p.heads;
  plan->blocks = (p.rows + plan->rows_per_block - 1) / plan->rows_per_block;
  // Few blocks (decode): split each block's keys so that every
  // multiprocessor gets a chunk, of at least kSplitKeys keys.
  const int sms = features.multiprocessors;
  const int64_t sms_a_block = plan->blocks > 0 ? sms / plan->blocks : sms;
  int64_t splits =
      std::min<int64_t>(sms_a_block, p.width / Persistent::kSplitKeys);
  splits = std::max<int64_t>(splits, 1);
  plan->splits = static_cast<int>(splits);
  plan->grid = std::min<int64_t>(plan->blocks * splits, sms);
  return LaunchResult{};
}

LaunchResult PlanIndexerTopK(const IndexerTopKParams& p,
                             const IndexerTopKOptions& options,
                             const DeviceFeatures& features, TopKPlan* plan) {
  using Path = IndexerTopKPath;
  *plan = TopKPlan{};
  Path path = options.path;
  if (path == Path::kAuto) {
    // Windows that fit the stage run staged; longer ones streamed, a row a
    // multiprocessor while the rows are few (decode: 1024 threads a row,
    // more loads in flight), four while they are many.
    const int64_t sms = std::max(features.multiprocessors, 1);
    if (p.width <= kTopKStageKeys) {
      path = Path::kStaged512;
    } else if (p.rows <= sms &&
               sizeof(TopKShared<TopKStreamed1024>) <=
                   static_cast<size_t>(features.max_shared_bytes_per_block)) {
      // (Its bitmap takes more than the 48 KiB a block gets without opting
      // in; a device that allows less runs streamed_512.)
      path = Path::kStreamed1024;
    } else {
      path = Path::kStreamed512;
    }
  }
  int threads = 0;
  int shared_bytes = 0;
  auto take = [&](auto shape) {
    using Shape = decltype(shape);
    threads = Shape::kThreads;
    shared_bytes = static_cast<int>(sizeof(TopKShared<Shape>));
  };
  switch (path) {
    case Path::kStaged512:
      take(TopKStaged512{});
      break;
    case Path::kStreamed1024:
      take(TopKStreamed1024{});
      break;
    case Path::kStreamed512:
      take(TopKStreamed512{});
      break;
    default:
      return TopKUnavailable("unknown path %d", static_cast<int>(path));
  }
  if (shared_bytes > features.max_shared_bytes_per_block) {
    return TopKUnavailable(
        "path %s needs %d bytes of shared memory a block; this device allows "
        "%d",
        TopKPathName(path), shared_bytes, features.max_shared_bytes_per_block);
  }
  if (path == Path::kStaged512 && p.width > kTopKStageKeys) {
    return TopKUnavailable(
        "the staged path takes rows of at most %d keys (here width %lld)",
        kTopKStageKeys, static_cast<long long>(p.width));
  }
  plan->threads = threads;
  plan->shared_bytes = shared_bytes;
  plan->path = path;
  return LaunchResult{};
}

const char* LogitsPathName(const LogitsPlan& plan) {
  if (plan.body != IndexerLogitsBody::kPersistent) return BodyName(plan.body);
  static const char* const kNames[3][2] = {
      {"persistent_narrow_cp_async", "persistent_narrow_tma"},
      {"persistent_wide_cp_async", "persistent_wide_tma"},
      {"persistent_wide_cp_async_4g", "persistent_wide_tma_4g"}};
  return kNames[plan.math_groups == 4 ? 2 : plan.wide][plan.tma_keys];
}

#define DSA_INDEXER_NAME_CASE(name, text) \
  case Enum::name:                        \
    return text;

const char* BodyName(IndexerLogitsBody body) {
  using Enum = IndexerLogitsBody;
  switch (body) {
    case Enum::kAuto:
      return "auto";
      DSA_INDEXER_LOGITS_BODIES(DSA_INDEXER_NAME_CASE)
  }
  return "unknown";
}
const char* BlocksName(IndexerLogitsBlocks blocks) {
  using Enum = IndexerLogitsBlocks;
  switch (blocks) {
    case Enum::kAuto:
      return "auto";
      DSA_INDEXER_LOGITS_BLOCKS(DSA_INDEXER_NAME_CASE)
  }
  return "unknown";
}
const char* KeysName(IndexerLogitsKeys keys) {
  using Enum = IndexerLogitsKeys;
  switch (keys) {
    case Enum::kAuto:
      return "auto";
      DSA_INDEXER_LOGITS_KEYS(DSA_INDEXER_NAME_CASE)
  }
  return "unknown";
}

const char* GroupsName(IndexerLogitsGroups groups) {
  using Enum = IndexerLogitsGroups;
  switch (groups) {
    case Enum::kAuto:
      return "auto";
      DSA_INDEXER_LOGITS_GROUPS(DSA_INDEXER_NAME_CASE)
  }
  return "unknown";
}

bool ParseBody(const std::string& name, IndexerLogitsBody* body) {
  using Enum = IndexerLogitsBody;
  return ParseName<Enum>(
      name, BodyName,
      {Enum::kAuto DSA_INDEXER_LOGITS_BODIES(DSA_INDEXER_VALUE)}, body);
}
bool ParseBlocks(const std::string& name, IndexerLogitsBlocks* blocks) {
  using Enum = IndexerLogitsBlocks;
  return ParseName<Enum>(
      name, BlocksName,
      {Enum::kAuto DSA_INDEXER_LOGITS_BLOCKS(DSA_INDEXER_VALUE)}, blocks);
}
bool ParseKeys(const std::string& name, IndexerLogitsKeys* keys) {
  using Enum = IndexerLogitsKeys;
  return ParseName<Enum>(
      name, KeysName, {Enum::kAuto DSA_INDEXER_LOGITS_KEYS(DSA_INDEXER_VALUE)},
      keys);
}

bool ParseGroups(const std::string& name, IndexerLogitsGroups* groups) {
  using Enum = IndexerLogitsGroups;
  return ParseName<Enum>(
      name, GroupsName,
      {Enum::kAuto DSA_INDEXER_LOGITS_GROUPS(DSA_INDEXER_VALUE)}, groups);
}

const char* TopKPathName(IndexerTopKPath path) {
  using Enum = IndexerTopKPath;
  switch (path) {
    case Enum::kAuto:
      return "auto";
      DSA_INDEXER_TOPK_PATHS(DSA_INDEXER_NAME_CASE)
  }
  return "unknown";
}

bool ParseTopKPath(const std::string& name, IndexerTopKPath* path) {
  using Enum = IndexerTopKPath;
  return ParseName<Enum>(
      name, TopKPathName,
      {Enum::kAuto DSA_INDEXER_TOPK_PATHS(DSA_INDEXER_VALUE)}, path);
}

#undef DSA_INDEXER_NAME_CASE
#undef DSA_INDEXER_VALUE

}  // namespace dsa::attention::gpu::indexer
