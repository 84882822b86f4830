// Host entry points that run Bf16WarpMma (device/mma.h) and the bf16
// conversions on the device, so a test built by the C++ compiler can check
// the fragment layouts of every target against a float64 reference.
#ifndef DSA_PLATFORM_GPU_MMA_BF16_CHECK_H_
#define DSA_PLATFORM_GPU_MMA_BF16_CHECK_H_

#include <cstddef>
#include <cstdint>

namespace dsa::gpu {

enum class MmaCheckResult : int {
  kOk = 0,
  kNoDevice = 1,         // the runtime reports no usable device
  kRuntimeError = 2,     // a runtime call or a launch failed
  kInvalidArgument = 3,  // sizes not multiples of the tile shape
  kNotBuilt = 4,         // built without --config=rocm / --config=cuda
};

// The policy's tile shape and instruction name ({0,0,0}, "none" when not
// built).
struct Bf16MmaShape {
  int m = 0;
  int n = 0;
  int k = 0;
  const char* instruction = "none";
};
Bf16MmaShape Bf16MmaShapeOfBuild();

// c[i][j] = sum_l a[i][l] * B(j, l) over host arrays of bf16 bits: a is
// [m][k]; b is [n][k] (LoadB) or, with b_k_major, [k][n] (LoadBTrans). One
// warp per kM x kN tile of c, operands staged through shared memory with a
// padded row stride. m, n, k must be multiples of the shape (k of 64).
MmaCheckResult Bf16MmaProduct(const uint16_t* a, const uint16_t* b,
                              bool b_k_major, float* c, int m, int n, int k,
                              char* error, size_t error_size);

// The same product on WarpgroupBf16Mma<n> (sm_90a wgmma): m = 64, n in
// {32, 64, 128, 256}, k = 64, b [n][k]. kNotBuilt where the device code has
// no warpgroup product (anything but sm_90a).
MmaCheckResult Bf16WarpgroupProduct(const uint16_t* a, const uint16_t* b,
                                    float* c, int n, char* error,
                                    size_t error_size);
// The same with B MN-major (WarpgroupBf16Mma::IssueMnB): b is [k][n] (n
// contiguous) and c[i][j] = sum_l a[i][l] * b[l][j].
MmaCheckResult Bf16WarpgroupProductMnB(const uint16_t* a, const uint16_t* b,
                                       float* c, int n, char* error,
                                       size_t error_size);
// The same two products with the operands in the 128-byte swizzled layout
// (IssueSw128, or IssueSw128MnB when b_mn_major: b is then [k][n]); n in
// {64, 256}.
MmaCheckResult Bf16WarpgroupProductSw128(const uint16_t* a, const uint16_t* b,
                                         bool b_mn_major, float* c, int n,
                                         char* error, size_t error_size);

// The descriptor-driven forms with B MN-major (IssueWith with kBMnMajor),
// both operands swizzled as above, b [k][n]: A in shared memory
// (WarpgroupBf16Mma) or, with a_registers, in registers
// (WarpgroupBf16MmaRegA, P V's own P); n in {64, 256}.
MmaCheckResult Bf16WarpgroupProductDescMnB(const uint16_t* a, const uint16_t* b,
                                           bool a_registers, float* c, int n,
                                           char* error, size_t error_size);

// bits[i] = FloatToBf16(in[i]); back[i] = Bf16ToFloat(bits[i]); packed[i] =
// PackBf16x2(in[2i], in[2i+1]) for i < count / 2.
MmaCheckResult Bf16Convert(const float* in, uint16_t* bits, float* back,
                           uint32_t* packed, int64_t count, char* error,
                           size_t error_size);

}  // namespace dsa::gpu

#endif  // DSA_PLATFORM_GPU_MMA_BF16_CHECK_H_
