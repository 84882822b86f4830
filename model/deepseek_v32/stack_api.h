/*
 * The layer stack behind a C ABI, for hosts that link no Abseil or protobuf
 * (the PyTorch package dsa_torch.stack loads it with ctypes): open a model
 * (a preset, a textproto, a config.json or a Hugging Face checkpoint
 * directory; model_loader.h) on a platform (cpu, cuda, rocm), run one
 * prefill of a fresh sequence, read back the hidden states after every main
 * layer and after every MTP layer.
 *
 * libdsa_stack.so exports exactly one symbol, DsaGetStackApi, returning the
 * versioned table below (the plugins' conventions, platform/plugin_api.h):
 * every struct starts with struct_size, minor versions only append fields
 * (a field the caller's struct does not reach reads as its default), every
 * call returns a DsaStatusCode and on error writes a NUL-terminated message
 * of at most error_size bytes. Nothing throws across it.
 */
#ifndef DSA_MODEL_DEEPSEEK_V32_STACK_API_H_
#define DSA_MODEL_DEEPSEEK_V32_STACK_API_H_

#include <stddef.h>
#include <stdint.h>

#include "platform/plugin_api.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DSA_STACK_API_MAJOR 1
#define DSA_STACK_API_MINOR 1

typedef struct DsaStack DsaStack; /* opaque */

typedef struct DsaStackOpenArgs {
  size_t struct_size;
  /* A preset name, a .textproto, a config.json or a checkpoint directory. */
  const char* model;
  /* "cpu", "cuda" or "rocm" (NULL: "cpu"). */
  const char* platform;
  /* Weights and embeddings of a model without a checkpoint. */
  uint64_t seed;
  /* Longest prefill (0: the smaller of max_position_embeddings and 8192). */
  int64_t max_tokens;
  /* 1: bf16 activations (what engines run); 0: float32. */
  int32_t bf16_activations;
  /* -1: the model's; 0 or 1: the indexer's Hadamard rotation off or on. */
  int32_t indexer_hadamard_rotation;
  /* CPU kernels' threads (0: all cores). */
  int32_t num_threads;
  /* 1: a progress line on stderr while a large checkpoint loads. */
  int32_t progress;
} DsaStackOpenArgs;

typedef struct DsaStackInfo {
  size_t struct_size;
  int32_t num_main_layers;
  int32_t num_mtp_layers;
  int32_t hidden_size;
  int32_t vocab_size;
  int32_t index_topk;
  int64_t max_tokens;
  /* 1 when the weights come from a checkpoint. */
  int32_t has_checkpoint_weights;
  char name[128];
  /* What was loaded, one line (LoadedModel::description). */
  char description[768];
} DsaStackInfo;

typedef struct DsaStackPrefillArgs {
  size_t struct_size;
  int64_t num_tokens;
  /* The main layers' input: exactly one of these. */
  const int64_t* input_ids;   /* [num_tokens] */
  const float* hidden_states; /* [num_tokens, hidden] */
  /* The MTP layers' token input (the next tokens): at most one; neither:
   * hidden_states (or the embeddings of input_ids) stand in for it. */
  const int64_t* mtp_input_ids;   /* [num_tokens] */
  const float* mtp_hidden_states; /* [num_tokens, hidden] */
  /* Written: [num_main_layers + num_mtp_layers, num_tokens, hidden] float32,
   * the hidden states after every layer. */
  float* out_hidden_states;
  /* Minor 1. Optional (NULL: not read back): [num_main_layers +
   * num_mtp_layers, num_tokens, index_topk] int32, per layer the key
   * positions its sparse path attended to, ascending, -1 padded (a layer
   * that shares its top-k: its source's); all -1 on a layer that ran the
   * dense path (every causal key). */
  int32_t* out_topk;
} DsaStackPrefillArgs;

typedef struct DsaStackApi {
  size_t struct_size;
  uint32_t major;
  uint32_t minor;
  DsaStatusCode (*open)(const DsaStackOpenArgs* args, DsaStack** out,
                        char* error, size_t error_size);
  DsaStatusCode (*info)(const DsaStack* stack, DsaStackInfo* out, char* error,
                        size_t error_size);
  /* One prefill of a fresh sequence at positions 0..num_tokens-1 (the
   * stack keeps no state between calls). */
  DsaStatusCode (*prefill)(DsaStack* stack, const DsaStackPrefillArgs* args,
                           char* error, size_t error_size);
  void (*close)(DsaStack* stack);
} DsaStackApi;

DSA_PLUGIN_EXPORT const DsaStackApi* DsaGetStackApi(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* DSA_MODEL_DEEPSEEK_V32_STACK_API_H_ */
