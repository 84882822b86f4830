// The element formats the launchers of attention/gpu take, as plain enums
// (the ops' dtypes map onto them in device/launch_status.h). Plain C++.
#ifndef DSA_ATTENTION_GPU_DEVICE_FORMATS_H_
#define DSA_ATTENTION_GPU_DEVICE_FORMATS_H_

#include <cstdint>

namespace dsa::attention::gpu {

// The fp8 encoding of the query and the cache (the engine's fp8 dtype).
enum class Fp8Encoding : int32_t { kE4m3fn = 0, kE4m3fnuz = 1 };

// Element type of a float tensor a launcher reads or writes (the ops take
// f32 or bf16 activations and weights).
enum class FloatFormat : int32_t { kFloat32 = 0, kBFloat16 = 1 };

// The MLA latent cache's layout (ops.h, LatentCacheFormat): kv_c | k_pe in
// bf16, or vLLM's "fp8_ds_mla" (fp8 kv_c in tiles with fp32 scales, bf16
// k_pe) in either fp8 encoding.
enum class LatentCacheType : int32_t {
  kBFloat16 = 0,
  kFp8E4m3fn = 1,
  kFp8E4m3fnuz = 2,
};

}  // namespace dsa::attention::gpu

#endif  // DSA_ATTENTION_GPU_DEVICE_FORMATS_H_
