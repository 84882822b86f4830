// Float64 references for the attention ops, used only by tests.
//
// They are written independently of the kernels: they share no code with
// attention/dtypes or attention/cpu (fp8 encoding is an exhaustive nearest
// search over the 256 codes, decoding a formula in double, bf16 rounding via
// nearbyint), they work on plain host vectors in float64, and they use the
// most direct algorithm (full sort for top-k, two-pass softmax over explicit
// key lists, explicit K/V decompression). Tests compare kernels with these
// under tolerances stated where they are used.
#ifndef DSA_ATTENTION_REFERENCE_REFERENCE_H_
#define DSA_ATTENTION_REFERENCE_REFERENCE_H_

#include <cstdint>
#include <vector>

namespace dsa::attention::reference {

enum class Fp8Kind { kE4m3fn, kE4m3fnuz };

// Value of a code; NaN for the format's NaN codes.
double Fp8Value(uint8_t code, Fp8Kind kind);
// Largest finite value: 448 or 240.
double Fp8MaxValue(Fp8Kind kind);
// The code nearest to x (ties: the code with an even mantissa), saturating
// at +-max; NaN gives the format's NaN; e4m3fnuz never returns -0.
uint8_t Fp8Nearest(double x, Fp8Kind kind);
// Distance between the two codes around |x| (the fp8 "ulp" at x), for
// tolerances: 2^(e-3) for normal values, the subnormal step below.
double Fp8Ulp(double x, Fp8Kind kind);

double Bf16Value(uint16_t bits);
// Round to nearest even bf16 (finite inputs).
uint16_t Bf16Nearest(double x);

// max(amax, 1e-4) / fp8_max rounded up to a power of two.
double Ue8m0Scale(double amax, Fp8Kind kind);
// The same with another divisor (vLLM's 224 on e4m3fnuz).
double Ue8m0ScaleWithDivisor(double amax, double divisor);

// x rounded to the nearest bfloat16, as a double.
double RoundBf16(double x);

// H x / sqrt(n) for the n x n Sylvester-Hadamard matrix H[i][j] =
// (-1)^popcount(i & j), n a power of two, as a plain matrix product.
std::vector<double> HadamardRotate(const std::vector<double>& x);

// LayerNorm (biased variance) of x with weight w, bias b.
std::vector<double> LayerNorm(const std::vector<double>& x,
                              const std::vector<double>& w,
                              const std::vector<double>& b, double eps);

// Rope in place on v[0 : rope_dim]; cos_sin = rope_dim/2 cosines then
// rope_dim/2 sines. neox: pairs (i, i + rope_dim/2), else (2i, 2i+1).
void Rope(std::vector<double>& v, const std::vector<double>& cos_sin,
          bool neox);

// One indexer logit: sum_h relu(q[h] . k * k_scale) * w[h], with q
// [heads][head_dim] flattened. `magnitude` receives
// sum_h |w[h]| * sum_d |q[h][d] k[d]| * k_scale: the size of what was
// summed, which bounds the rounding error of a float32 evaluation.
double IndexerLogit(const std::vector<double>& q, const std::vector<double>& w,
                    const std::vector<double>& k, double k_scale,
                    double* magnitude);

// Top-k of logits[ks, ke) by full stable sort (value descending, lower
// index first on ties, NaN last); returns the chosen positions ascending,
// padded with -1 to topk.
std::vector<int32_t> TopK(const std::vector<float>& logits, int64_t ks,
                          int64_t ke, int64_t topk);

// Attention of one query row over an explicit list of keys, two-pass
// softmax in double: out[h] = sum_j softmax_j(scale * q[h] . keys[j]) *
// values[j][h], where q is [heads][qk_dim], keys[j] is [heads][qk_dim] and
// values[j] is [heads][v_dim] (flattened). An empty key list gives zeros.
std::vector<double> Attention(const std::vector<double>& q, int64_t heads,
                              const std::vector<std::vector<double>>& keys,
                              const std::vector<std::vector<double>>& values,
                              double scale);

// y = W x for W [rows][cols] flattened.
std::vector<double> MatVec(const std::vector<double>& w, int64_t rows,
                           const std::vector<double>& x);

}  // namespace dsa::attention::reference

#endif  // DSA_ATTENTION_REFERENCE_REFERENCE_H_
