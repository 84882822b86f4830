// Element types of the tensors that cross the attention op interface.
//
// Every tensor view (attention/tensor.h) names its element type explicitly,
// so a kernel can reject a mismatch with a clear status instead of reading
// bytes as the wrong type. The two FP8 E4M3 variants are distinct types
// because the same byte means different values in each (gfx942 uses the
// "fnuz" variant, gfx950, NVIDIA and the CPU the OCP one).
#ifndef DSA_ATTENTION_DTYPES_DTYPE_H_
#define DSA_ATTENTION_DTYPES_DTYPE_H_

#include <cstddef>
#include <cstdint>

namespace dsa::attention {

enum class DType : int32_t {
  kFloat32 = 0,
  kBFloat16 = 1,
  kFloat8E4m3fn = 2,    // OCP E4M3: max 448, NaN 0x7f/0xff
  kFloat8E4m3fnuz = 3,  // max 240, exponent bias 8, NaN 0x80, no -0
  kUint8 = 4,           // raw bytes (caches that mix FP8 values and scales)
  kInt32 = 5,
  kInt64 = 6,
};

// Size of one element in bytes.
constexpr size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
    case DType::kInt32:
      return 4;
    case DType::kBFloat16:
      return 2;
    case DType::kFloat8E4m3fn:
    case DType::kFloat8E4m3fnuz:
    case DType::kUint8:
      return 1;
    case DType::kInt64:
      return 8;
  }
  return 0;
}

constexpr bool IsFp8(DType dtype) {
  return dtype == DType::kFloat8E4m3fn || dtype == DType::kFloat8E4m3fnuz;
}

// "float32", "bfloat16", "float8_e4m3fn", ... (the names PyTorch uses).
constexpr const char* DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return "float32";
    case DType::kBFloat16:
      return "bfloat16";
    case DType::kFloat8E4m3fn:
      return "float8_e4m3fn";
    case DType::kFloat8E4m3fnuz:
      return "float8_e4m3fnuz";
    case DType::kUint8:
      return "uint8";
    case DType::kInt32:
      return "int32";
    case DType::kInt64:
      return "int64";
  }
  return "unknown";
}

}  // namespace dsa::attention

#endif  // DSA_ATTENTION_DTYPES_DTYPE_H_
