#include "attention/gpu/cache/heuristics.h"

#include <cstdint>

#include "attention/gpu/cache/config.h"

namespace dsa::attention::gpu::cache {
namespace {

// Blocks for `rows` rows, `per_block` a block; false past a launch's grid.
bool GridFor(int64_t rows, int64_t per_block, LaunchPlan* plan) {
  const int64_t blocks = (rows + per_block - 1) / per_block;
  if (blocks > 0x7fffffff) return false;
  plan->blocks = static_cast<uint32_t>(blocks);
  return true;
}

// The staged body for rows of `floats` floats.
void Staged(int64_t floats, LaunchPlan* plan) {
  plan->body = Body::kStaged;
  plan->groups = StagedGroups(floats);
  plan->threads = plan->groups * kLanes;
  plan->shared_bytes = static_cast<size_t>(plan->groups) *
                       static_cast<size_t>(floats) * sizeof(float);
}

bool PowerOfTwo(int n) { return (n & (n - 1)) == 0; }

}  // namespace

Body ChooseIndexerKWriteBody(const IndexerKWriteParams& p) {
  if (p.force_staged_path || p.hadamard_rotation) return Body::kStaged;
  return p.head_dim == kRegisterDim && KWriteRegister::TakesRope(p.rope_dim)
             ? Body::kRegister
             : Body::kStaged;
}

Body ChooseIndexerQBody(const IndexerQParams& p) {
  if (p.force_staged_path || p.hadamard_rotation) return Body::kStaged;
  return p.head_dim == kRegisterDim && QRegister::TakesRope(p.rope_dim) &&
                 p.tokens * p.heads <= QRegister::kMaxRows
             ? Body::kRegister
             : Body::kStaged;
}

const char* BodyName(Body body) {
  return body == Body::kRegister ? "register" : "staged";
}

LaunchResult PlanIndexerKWrite(const IndexerKWriteParams& p, LaunchPlan* plan) {
  constexpr const char* op = "indexer_k_write";
  *plan = LaunchPlan{};
  if (p.tokens < 0 || p.head_dim < 1 || p.topk < 0 || p.block_size < 1 ||
      p.num_blocks < 0 || p.max_position < 0) {
    return Invalid(op,
                   "tokens %lld, head_dim %d, topk %d, block_size %d, "
                   "num_blocks %lld, max_position %lld: expected tokens, topk, "
                   "num_blocks, max_position >= 0, head_dim, block_size >= 1",
                   static_cast<long long>(p.tokens), p.head_dim, p.topk,
                   p.block_size, static_cast<long long>(p.num_blocks),
                   static_cast<long long>(p.max_position));
  }
  if (p.rope_dim < 0 || p.rope_dim % 2 != 0 || p.rope_dim > p.head_dim) {
    return Invalid(op, "rope_dim %d, expected an even number <= head_dim %d",
                   p.rope_dim, p.head_dim);
  }
  if (p.head_dim > kMaxStagedFloats) {
    return Invalid(op, "head_dim %d is above the GPU kernel's %d", p.head_dim,
                   kMaxStagedFloats);
  }
  if (p.tokens == 0) return LaunchResult{};
  if (p.k == nullptr || p.ln_weight == nullptr || p.ln_bias == nullptr ||
      p.positions == nullptr || p.cos_sin_cache == nullptr ||
      p.slot_mapping == nullptr || (p.k_cache == nullptr && p.num_blocks > 0) ||
      (p.topk_indices == nullptr && p.topk > 0)) {
    return Invalid(op, "a null pointer for a non-empty tensor");
  }
  if (p.hadamard_rotation && !PowerOfTwo(p.head_dim)) {
    return Invalid(op,
                   "hadamard_rotation needs head_dim a power of two, got %d",
                   p.head_dim);
  }
  if (ChooseIndexerKWriteBody(p) == Body::kRegister) {
    plan->body = Body::kRegister;
    plan->threads = kThreads;
    if (!GridFor(p.tokens, KWriteRegister::kTokensPerBlock, plan)) {
      return Invalid(op, "%lld tokens are too many for one launch",
                     static_cast<long long>(p.tokens));
    }
    return LaunchResult{};
  }
  Staged(p.head_dim, plan);
  if (!GridFor(p.tokens, plan->groups, plan)) {
    return Invalid(op, "%lld tokens are too many for one launch",
                   static_cast<long long>(p.tokens));
  }
  return LaunchResult{};
}

LaunchResult PlanIndexerQ(const IndexerQParams& p, LaunchPlan* plan) {
  constexpr const char* op = "indexer_q";
  *plan = LaunchPlan{};
  if (p.tokens < 0 || p.heads < 1 || p.head_dim < 1 || p.max_position < 0) {
    return Invalid(op,
                   "tokens %lld, heads %d, head_dim %d, max_position %lld: "
                   "expected tokens, max_position >= 0, heads, head_dim >= 1",
                   static_cast<long long>(p.tokens), p.heads, p.head_dim,
                   static_cast<long long>(p.max_position));
  }
  if (p.rope_dim < 0 || p.rope_dim % 2 != 0 || p.rope_dim > p.head_dim) {
    return Invalid(op, "rope_dim %d, expected an even number <= head_dim %d",
                   p.rope_dim, p.head_dim);
  }
  if (p.head_dim > kMaxStagedFloats) {
    return Invalid(op, "head_dim %d is above the GPU kernel's %d", p.head_dim,
                   kMaxStagedFloats);
  }
  if (p.tokens == 0) return LaunchResult{};
  if (p.q == nullptr || p.weights == nullptr || p.positions == nullptr ||
      p.cos_sin_cache == nullptr || p.q_fp8 == nullptr ||
      p.head_weights == nullptr) {
    return Invalid(op, "a null pointer for a non-empty tensor");
  }
  if (p.hadamard_rotation && !PowerOfTwo(p.head_dim)) {
    return Invalid(op,
                   "hadamard_rotation needs head_dim a power of two, got %d",
                   p.head_dim);
  }
  const int64_t rows = p.tokens * p.heads;
  if (ChooseIndexerQBody(p) == Body::kRegister) {
    plan->body = Body::kRegister;
    plan->threads = kThreads;
  } else {
    Staged(p.head_dim, plan);
  }
  const int64_t per_block = plan->body == Body::kRegister
                                ? QRegister::kRowsPerBlock
                                : int64_t{plan->groups};
  if (!GridFor(rows, per_block, plan)) {
    return Invalid(op, "%lld (token, head) rows are too many for one launch",
                   static_cast<long long>(rows));
  }
  return LaunchResult{};
}

LaunchResult PlanMlaCacheWrite(const MlaCacheWriteParams& p, LaunchPlan* plan) {
  constexpr const char* op = "mla_cache_write";
  *plan = LaunchPlan{};
  if (p.tokens < 0 || p.kv_lora_rank < 1 || p.rope_dim < 0 ||
      p.block_size < 1 || p.num_blocks < 0) {
    return Invalid(op,
                   "tokens %lld, kv_lora_rank %d, rope_dim %d, block_size %d, "
                   "num_blocks %lld: expected tokens, rope_dim, num_blocks >= "
                   "0, kv_lora_rank, block_size >= 1",
                   static_cast<long long>(p.tokens), p.kv_lora_rank, p.rope_dim,
                   p.block_size, static_cast<long long>(p.num_blocks));
  }
  if (p.layout == LatentLayout::kFp8 && p.kv_lora_rank % 128 != 0) {
    return Invalid(op, "kv_lora_rank %d is not a multiple of 128 (fp8 tiles)",
                   p.kv_lora_rank);
  }
  const int64_t row = int64_t{p.kv_lora_rank} + p.rope_dim;
  if (row > kMaxStagedFloats) {
    return Invalid(op,
                   "kv_lora_rank + rope_dim = %lld is above the GPU "
                   "kernel's %d",
                   static_cast<long long>(row), kMaxStagedFloats);
  }
  if (p.tokens == 0) return LaunchResult{};
  if (p.kv_c == nullptr || p.k_pe == nullptr || p.slot_mapping == nullptr ||
      (p.kv_cache == nullptr && p.num_blocks > 0)) {
    return Invalid(op, "a null pointer for a non-empty tensor");
  }
  Staged(row, plan);
  if (!GridFor(p.tokens, plan->groups, plan)) {
    return Invalid(op, "%lld tokens are too many for one launch",
                   static_cast<long long>(p.tokens));
  }
  return LaunchResult{};
}

}  // namespace dsa::attention::gpu::cache
