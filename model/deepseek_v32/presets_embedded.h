// The preset textprotos compiled into the binary (generated from presets/ by
// embed_presets.sh). Internal to model_config.cc, which parses them; everyone
// else loads presets through model_config.h.
#ifndef DSA_MODEL_DEEPSEEK_V32_PRESETS_EMBEDDED_H_
#define DSA_MODEL_DEEPSEEK_V32_PRESETS_EMBEDDED_H_

namespace dsa::model::deepseek_v32::internal {

struct EmbeddedPreset {
  const char* name;  // the file name without .textproto: "glm-5.1"
  const char* textproto;
};

// Sorted by name (Bazel's glob order).
extern const EmbeddedPreset kEmbeddedPresets[];
extern const int kNumEmbeddedPresets;

}  // namespace dsa::model::deepseek_v32::internal

#endif  // DSA_MODEL_DEEPSEEK_V32_PRESETS_EMBEDDED_H_
