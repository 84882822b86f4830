// The TMA attention body's tensor maps (sm90_tma_body.h) over q and the
// call's scratch (attention_args.h): q [tokens, heads, qk], K_nope
// [S, heads * nope], the latent rows (k_pe at column lora) [S, lat_ld] and
// V^T [heads * v, S], bf16 with 128-byte swizzle, boxes of 64 columns by
// kBlockM queries / the tile's keys / v value dims; for tiles of 80 keys
// also V^T's last 16 keys of a tile, a box of 16 columns by v with 32-byte
// swizzle (Sm90TmaSmem).
//
// Encoding the maps is a driver call each (cuTensorMapEncodeTiled), so
// the maps of the calls a thread made last are kept (CachedTmaMaps), keyed
// by every pointer and dim they encode: the scratch comes from the stream's
// arena (device/scratch_arena.h), whose addresses stay put from call to
// call, and a step's layers pass the same q buffer, so every layer of a
// step after the first finds its maps.
// CUDA device-compiler sources only.
#ifndef DSA_ATTENTION_GPU_DENSE_MHA_TMA_MAPS_H_
#define DSA_ATTENTION_GPU_DENSE_MHA_TMA_MAPS_H_

#if defined(DSA_GPU_CUDA)

#include <cstdint>
#include <cstdio>

#include "attention/gpu/dense_mha/attention_args.h"
#include "attention/gpu/device/launch_util.h"
#include "attention/gpu/device/small_cache.h"

namespace dsa::attention::gpu::dense_mha {

struct TmaMaps {
  CUtensorMap q;        // 3-D {qk, heads, tokens}, box {64, 1, 128}
  CUtensorMap knope;    // 2-D {heads * nope, S}, box {64, kN}
  CUtensorMap kpe;      // 2-D {lora + rope, S} (the latent rows), box {64, kN}
  CUtensorMap vt;       // 2-D {S, heads * v}, box {64, v} (kN / 64 a tile)
  CUtensorMap vt_tail;  // the same, box {16, v}, 32-byte swizzle (kN % 64)
};

// Everything the maps encode.
struct TmaMapsKey {
  const void* q = nullptr;
  const void* knope = nullptr;
  const void* lat = nullptr;
  const void* vt = nullptr;
  int64_t tokens = 0, knope_ld = 0, lat_ld = 0, kv_rows = 0;
  int32_t heads = 0, nope = 0, rope = 0, v = 0, tile_keys = 0, box_v = 0;
  bool operator==(const TmaMapsKey& o) const {
    return q == o.q && knope == o.knope && lat == o.lat && vt == o.vt &&
           tokens == o.tokens && knope_ld == o.knope_ld && lat_ld == o.lat_ld &&
           kv_rows == o.kv_rows && heads == o.heads && nope == o.nope &&
           rope == o.rope && v == o.v && tile_keys == o.tile_keys &&
           box_v == o.box_v;
  }
};

// The maps of a thread's last calls: a step runs one shape, a few steps'
// worth of shapes fit.
using TmaMapsCache = SmallCache<TmaMapsKey, TmaMaps, 8>;

// A bf16 tensor map with 128-byte swizzle (or `swizzle`): dims innermost
// first, strides (bytes) of dims 1.., the box in elements.
inline LaunchResult MakeTensorMap(
    CUtensorMap* map, const void* base, int rank, const cuuint64_t* dims,
    const cuuint64_t* strides, const cuuint32_t* box, const char* what,
    CUtensorMapSwizzle swizzle = CU_TENSOR_MAP_SWIZZLE_128B) {
  const cuuint32_t unit[3] = {1, 1, 1};
  const CUresult r = TensorMapEncoder()(
      map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, rank, const_cast<void*>(base),
      dims, strides, box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r == CUDA_SUCCESS) return LaunchResult{};
  LaunchResult out;
  out.code = LaunchCode::kRuntimeError;
  std::snprintf(out.message, sizeof(out.message),
                "dense_mha_prefill: cuTensorMapEncodeTiled (%s) failed: %d",
                what, static_cast<int>(r));
  return out;
}

// Encodes the maps of `a` for tiles of `tile_keys` keys and V^T boxes of
// `box_v` value dims (knope is left unset when nope is 0, vt_tail when
// tile_keys is a multiple of 64).
inline LaunchResult MakeTmaMaps(const AttentionArgs& a, int tile_keys,
                                int box_v, TmaMaps* maps) {
  const int qk = a.nope + a.rope;
  const int64_t kv_rows = a.vt_ld;
  const cuuint32_t keys = static_cast<cuuint32_t>(tile_keys);
  {
    const cuuint64_t dims[3] = {static_cast<cuuint64_t>(qk),
                                static_cast<cuuint64_t>(a.heads),
                                static_cast<cuuint64_t>(a.tokens)};
    const cuuint64_t strides[2] = {static_cast<cuuint64_t>(qk) * 2,
                                   static_cast<cuuint64_t>(qk) * a.heads * 2};
    const cuuint32_t box[3] = {64, 1, kBlockM};
    LaunchResult r = MakeTensorMap(&maps->q, a.q, 3, dims, strides, box, "q");
    if (!r.ok()) return r;
  }
  if (a.nope > 0) {
    const cuuint64_t dims[2] = {static_cast<cuuint64_t>(a.knope_ld),
                                static_cast<cuuint64_t>(kv_rows)};
    const cuuint64_t strides[1] = {static_cast<cuuint64_t>(a.knope_ld) * 2};
    const cuuint32_t box[2] = {64, keys};
    LaunchResult r =
        MakeTensorMap(&maps->knope, a.knope, 2, dims, strides, box, "K_nope");
    if (!r.ok()) return r;
  }
  {
    const cuuint64_t dims[2] = {static_cast<cuuint64_t>(a.lat_ld),
                                static_cast<cuuint64_t>(kv_rows)};
    const cuuint64_t strides[1] = {static_cast<cuuint64_t>(a.lat_ld) * 2};
    const cuuint32_t box[2] = {64, keys};
    LaunchResult r =
        MakeTensorMap(&maps->kpe, a.lat, 2, dims, strides, box, "k_pe");
    if (!r.ok()) return r;
  }
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(kv_rows),
                              static_cast<cuuint64_t>(a.heads) * a.v};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(kv_rows) * 2};
  const cuuint32_t box[2] = {64, static_cast<cuuint32_t>(box_v)};
  LaunchResult r = MakeTensorMap(&maps->vt, a.vt, 2, dims, strides, box, "V^T");
  if (!r.ok() || tile_keys % 64 == 0) return r;
  const cuuint32_t tail_box[2] = {16, static_cast<cuuint32_t>(box_v)};
  return MakeTensorMap(&maps->vt_tail, a.vt, 2, dims, strides, tail_box,
                       "V^T tail", CU_TENSOR_MAP_SWIZZLE_32B);
}

// MakeTmaMaps through the calling thread's TmaMapsCache. A failed encode
// is reported and kept out of the cache.
inline LaunchResult CachedTmaMaps(const AttentionArgs& a, int tile_keys,
                                  int box_v, TmaMaps* maps) {
  TmaMapsKey key;
  key.q = a.q;
  key.knope = a.knope;
  key.lat = a.lat;
  key.vt = a.vt;
  key.tokens = a.tokens;
  key.knope_ld = a.knope_ld;
  key.lat_ld = a.lat_ld;
  key.kv_rows = a.vt_ld;
  key.heads = a.heads;
  key.nope = a.nope;
  key.rope = a.rope;
  key.v = a.v;
  key.tile_keys = tile_keys;
  key.box_v = box_v;
  LaunchResult r;
  const TmaMaps* cached =
      ThreadCache<TmaMapsCache>().Find(key, [&](TmaMaps* made) {
        r = MakeTmaMaps(a, tile_keys, box_v, made);
        return r.ok();
      });
  if (cached != nullptr) *maps = *cached;
  return r;
}

}  // namespace dsa::attention::gpu::dense_mha

#endif  // DSA_GPU_CUDA

#endif  // DSA_ATTENTION_GPU_DENSE_MHA_TMA_MAPS_H_
