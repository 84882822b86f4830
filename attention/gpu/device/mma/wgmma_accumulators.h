// The register lists and constraints of a warpgroup product's
// accumulator operands, shared by the fp8 and bf16 products.
// Part of mma.h (include that); device-compiler sources only.
#ifndef DSA_ATTENTION_GPU_DEVICE_MMA_WGMMA_ACCUMULATORS_H_
#define DSA_ATTENTION_GPU_DEVICE_MMA_WGMMA_ACCUMULATORS_H_

// The accumulator operands of a warpgroup product (m64, fp32 accumulators):
// N values a thread, N = kN / 2 for an n-wide tile. DSA_WGMMA_ACC_REGS_N is
// the register list of the PTX ("%0,%1,...") and DSA_WGMMA_ACC_N(acc) the
// matching read-write constraints, so that the operands that follow an
// accumulator are numbered from N.
#define DSA_WGMMA_ACC_REGS_16 \
  "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15"
#define DSA_WGMMA_ACC_REGS_32 \
  DSA_WGMMA_ACC_REGS_16       \
  ",%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31"
#define DSA_WGMMA_ACC_REGS_40 \
  DSA_WGMMA_ACC_REGS_32       \
  ",%32,%33,%34,%35,%36,%37,%38,%39"
#define DSA_WGMMA_ACC_REGS_64                                        \
  DSA_WGMMA_ACC_REGS_32                                              \
  ",%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47" \
  ",%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63"
#define DSA_WGMMA_ACC_REGS_128                                         \
  DSA_WGMMA_ACC_REGS_64                                                \
  ",%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79"   \
  ",%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95"   \
  ",%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109" \
  ",%110,%111,%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122"  \
  ",%123,%124,%125,%126,%127"
#define DSA_WGMMA_ACC_4(acc, i) \
  "+f"(acc[i]), "+f"(acc[i + 1]), "+f"(acc[i + 2]), "+f"(acc[i + 3])
#define DSA_WGMMA_ACC_16_AT(acc, i)                     \
  DSA_WGMMA_ACC_4(acc, i), DSA_WGMMA_ACC_4(acc, i + 4), \
      DSA_WGMMA_ACC_4(acc, i + 8), DSA_WGMMA_ACC_4(acc, i + 12)
#define DSA_WGMMA_ACC_16(acc) DSA_WGMMA_ACC_16_AT(acc, 0)
#define DSA_WGMMA_ACC_32(acc) \
  DSA_WGMMA_ACC_16_AT(acc, 0), DSA_WGMMA_ACC_16_AT(acc, 16)
#define DSA_WGMMA_ACC_40(acc) \
  DSA_WGMMA_ACC_32(acc), DSA_WGMMA_ACC_4(acc, 32), DSA_WGMMA_ACC_4(acc, 36)
#define DSA_WGMMA_ACC_64(acc)                          \
  DSA_WGMMA_ACC_32(acc), DSA_WGMMA_ACC_16_AT(acc, 32), \
      DSA_WGMMA_ACC_16_AT(acc, 48)
#define DSA_WGMMA_ACC_128(acc)                                    \
  DSA_WGMMA_ACC_64(acc), DSA_WGMMA_ACC_16_AT(acc, 64),            \
      DSA_WGMMA_ACC_16_AT(acc, 80), DSA_WGMMA_ACC_16_AT(acc, 96), \
      DSA_WGMMA_ACC_16_AT(acc, 112)

#endif  // DSA_ATTENTION_GPU_DEVICE_MMA_WGMMA_ACCUMULATORS_H_
