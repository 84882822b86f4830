#include "attention/cpu/kernel_util.h"

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

namespace dsa::attention::cpu {
namespace {

Fp8DecodeTable MakeTable(DType dtype) {
  Fp8DecodeTable table;
  const Fp8Traits traits = Fp8TraitsOf(dtype);
  for (int c = 0; c < 256; ++c) {
    table.value[c] = Fp8ToFloat(static_cast<uint8_t>(c), traits);
  }
  return table;
}

}  // namespace

const Fp8DecodeTable& Fp8Table(DType fp8_dtype) {
  static const Fp8DecodeTable* const fn =
      new Fp8DecodeTable(MakeTable(DType::kFloat8E4m3fn));
  static const Fp8DecodeTable* const fnuz =
      new Fp8DecodeTable(MakeTable(DType::kFloat8E4m3fnuz));
  return fp8_dtype == DType::kFloat8E4m3fnuz ? *fnuz : *fn;
}

Status CheckSlotMapping(std::string_view op, const TensorView& slot_mapping,
                        int64_t num_slots) {
  const int64_t tokens = slot_mapping.dim(0);
  std::vector<std::pair<int64_t, int64_t>> used;  // (slot, token)
  used.reserve(tokens);
  for (int64_t t = 0; t < tokens; ++t) {
    const int64_t slot = LoadIndex<int64_t>(slot_mapping, t);
    if (slot == -1) continue;
    if (slot < 0 || slot >= num_slots) {
      return OutOfRangeError(StrCat(op, ": slot_mapping[", t, "] is ", slot,
                                    ", outside the cache's ", num_slots,
                                    " slots (-1 marks padding)"));
    }
    used.emplace_back(slot, t);
  }
  std::sort(used.begin(), used.end());
  for (size_t i = 1; i < used.size(); ++i) {
    if (used[i].first == used[i - 1].first) {
      return InvalidArgumentError(StrCat(op, ": slot_mapping[", used[i].second,
                                         "] repeats slot ", used[i].first,
                                         " of token ", used[i - 1].second));
    }
  }
  return OkStatus();
}

Status CheckBlockTableValues(std::string_view op, const TensorView& block_table,
                             const TensorView& seq_lens, int64_t num_blocks,
                             int64_t block_size) {
  const int64_t requests = block_table.dim(0);
  const int64_t max_blocks = block_table.dim(1);
  const int32_t* table = block_table.data_as<const int32_t>();
  for (int64_t r = 0; r < requests; ++r) {
    const int64_t seq_len = LoadIndex<int32_t>(seq_lens, r);
    if (seq_len < 0 || seq_len > max_blocks * block_size) {
      return OutOfRangeError(StrCat(op, ": seq_lens[", r, "] is ", seq_len,
                                    ", outside [0, ", max_blocks * block_size,
                                    "] (max_blocks ", max_blocks,
                                    " * block_size ", block_size, ")"));
    }
    const int64_t blocks_used = (seq_len + block_size - 1) / block_size;
    for (int64_t b = 0; b < blocks_used; ++b) {
      const int64_t block = table[block_table.offset(r, b)];
      if (block < 0 || block >= num_blocks) {
        return OutOfRangeError(StrCat(op, ": block_table[", r, ", ", b, "] is ",
                                      block, ", outside the cache's ",
                                      num_blocks, " blocks"));
      }
    }
  }
  return OkStatus();
}

Status CheckRequestIndices(std::string_view op, std::string_view arg,
                           const TensorView& request_of, int64_t num_requests) {
  for (int64_t i = 0; i < request_of.dim(0); ++i) {
    const int64_t r = LoadIndex<int32_t>(request_of, i);
    if (r < 0 || r >= num_requests) {
      return OutOfRangeError(StrCat(op, ": ", arg, "[", i, "] is ", r,
                                    ", outside the ", num_requests,
                                    " requests"));
    }
  }
  return OkStatus();
}

void LatentCacheRef::Decode(int64_t slot, const Fp8DecodeTable* table,
                            float* out) const {
  const uint8_t* e = entry(slot);
  const int64_t lora = format.kv_lora_rank;
  const int64_t rope = format.rope_dim;
  if (format.dtype == DType::kBFloat16) {
    for (int64_t i = 0; i < lora + rope; ++i) {
      uint16_t bits;
      std::memcpy(&bits, e + 2 * i, 2);
      out[i] = Bf16ToFloat(bits);
    }
    return;
  }
  const int64_t tiles = lora / kLatentFp8TileSize;
  const uint8_t* scales = e + lora;
  for (int64_t tile = 0; tile < tiles; ++tile) {
    const float scale = LoadUnalignedFloat(scales + 4 * tile);
    const uint8_t* codes = e + tile * kLatentFp8TileSize;
    float* o = out + tile * kLatentFp8TileSize;
    for (int i = 0; i < kLatentFp8TileSize; ++i) {
      o[i] = table->value[codes[i]] * scale;
    }
  }
  const uint8_t* pe = scales + 4 * tiles;
  for (int64_t i = 0; i < rope; ++i) {
    uint16_t bits;
    std::memcpy(&bits, pe + 2 * i, 2);
    out[lora + i] = Bf16ToFloat(bits);
  }
}

void LatentCacheRef::Encode(int64_t slot, const float* kv_c,
                            const float* k_pe) const {
  uint8_t* e = entry(slot);
  const int64_t lora = format.kv_lora_rank;
  const int64_t rope = format.rope_dim;
  if (format.dtype == DType::kBFloat16) {
    for (int64_t i = 0; i < lora; ++i) {
      const uint16_t bits = FloatToBf16(kv_c[i]);
      std::memcpy(e + 2 * i, &bits, 2);
    }
    for (int64_t i = 0; i < rope; ++i) {
      const uint16_t bits = FloatToBf16(k_pe[i]);
      std::memcpy(e + 2 * (lora + i), &bits, 2);
    }
    return;
  }
  const Fp8Traits traits = Fp8TraitsOf(format.dtype);
  const int64_t tiles = lora / kLatentFp8TileSize;
  uint8_t* scales = e + lora;
  for (int64_t tile = 0; tile < tiles; ++tile) {
    const float scale =
        QuantizeUe8m0(kv_c + tile * kLatentFp8TileSize, kLatentFp8TileSize,
                      traits, e + tile * kLatentFp8TileSize);
    StoreUnalignedFloat(scales + 4 * tile, scale);
  }
  uint8_t* pe = scales + 4 * tiles;
  for (int64_t i = 0; i < rope; ++i) {
    const uint16_t bits = FloatToBf16(k_pe[i]);
    std::memcpy(pe + 2 * i, &bits, 2);
  }
}

}  // namespace dsa::attention::cpu
