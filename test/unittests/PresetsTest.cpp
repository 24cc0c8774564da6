//===- PresetsTest.cpp - model preset tests ----------------------------===//
//
// Checks the presets against the Hugging Face / diffusers parameter layout
// and their configuration errors.
//
//===----------------------------------------------------------------------===//

#include "megc/Dialect/Meg/IR/MegOps.h"
#include "megc/Gen/Presets.h"

#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>
#include <map>

using namespace mlir;
using namespace megc::gen;

namespace {

using ParamShapes = std::map<std::string, std::vector<int64_t>>;

ParamShapes paramShapes(ModuleOp module) {
  ParamShapes shapes;
  for (auto param : module.getOps<meg::ParamOp>()) {
    ArrayRef<int64_t> shape = param.getTensorType().getShape();
    shapes[param.getSymName().str()] = {shape.begin(), shape.end()};
  }
  return shapes;
}

/// The parameters of transformers' LlamaForCausalLM for a config, written
/// out independently of the preset.
ParamShapes huggingFaceLlama(int64_t layers, int64_t hidden, int64_t heads,
                             int64_t kvHeads, int64_t ffn, int64_t vocab) {
  int64_t kv = hidden / heads * kvHeads;
  ParamShapes shapes = {{"model.embed_tokens.weight", {vocab, hidden}},
                        {"model.norm.weight", {hidden}},
                        {"lm_head.weight", {vocab, hidden}}};
  for (int64_t i = 0; i < layers; ++i) {
    std::string p = "model.layers." + std::to_string(i) + ".";
    shapes[p + "input_layernorm.weight"] = {hidden};
    shapes[p + "post_attention_layernorm.weight"] = {hidden};
    shapes[p + "self_attn.q_proj.weight"] = {hidden, hidden};
    shapes[p + "self_attn.k_proj.weight"] = {kv, hidden};
    shapes[p + "self_attn.v_proj.weight"] = {kv, hidden};
    shapes[p + "self_attn.o_proj.weight"] = {hidden, hidden};
    shapes[p + "mlp.gate_proj.weight"] = {ffn, hidden};
    shapes[p + "mlp.up_proj.weight"] = {ffn, hidden};
    shapes[p + "mlp.down_proj.weight"] = {hidden, ffn};
  }
  return shapes;
}

TEST(PresetsTest, LlamaHasHuggingFaceParameterNamesAndShapes) {
  MLIRContext context;
  LlamaConfig config;
  config.layers = 3;
  config.hidden = 96;
  config.heads = 6;
  config.kvHeads = 2;
  config.ffn = 160;
  config.vocab = 300;
  auto module = buildLlama(context, config);
  ASSERT_TRUE(static_cast<bool>(module)) << toString(module.takeError());
  EXPECT_EQ(paramShapes(**module), huggingFaceLlama(3, 96, 6, 2, 160, 300));
}

TEST(PresetsTest, LlamaEntryPointsAreNamed) {
  MLIRContext context;
  auto module = buildLlama(context, LlamaConfig());
  ASSERT_TRUE(static_cast<bool>(module)) << toString(module.takeError());
  auto loss = (**module).lookupSymbol<func::FuncOp>("loss");
  ASSERT_TRUE(loss);
  EXPECT_EQ(loss.getArgAttrOfType<StringAttr>(0, "meg.name").getValue(),
            "input_ids");
  EXPECT_EQ(loss.getArgAttrOfType<StringAttr>(1, "meg.name").getValue(),
            "labels");
  EXPECT_EQ(loss.getResultAttrOfType<StringAttr>(0, "meg.name").getValue(),
            "loss");
  EXPECT_TRUE(cast<RankedTensorType>(loss.getResultTypes()[0])
                  .getElementType()
                  .isF32());
}

TEST(PresetsTest, LlamaRopeIsUnfused) {
  MLIRContext context;
  LlamaConfig config;
  config.rope.interleaved = true;
  config.rope.percent = 0.5;
  auto module = buildLlama(context, config);
  ASSERT_TRUE(static_cast<bool>(module)) << toString(module.takeError());
  int ropes = 0, stridedSlices = 0;
  (**module).walk([&](Operation *op) {
    ropes += isa<meg::RopeOp>(op);
    if (auto slice = dyn_cast<meg::SliceOp>(op))
      stridedSlices += slice.getStrides().back() == 2;
  });
  EXPECT_EQ(ropes, 0);
  // Interleaved rotate_half reads even and odd channels of q and k per layer.
  EXPECT_EQ(stridedSlices, 2 * 2 * config.layers);
}

TEST(PresetsTest, DiffusionPresetsUseDiffusersNames) {
  MLIRContext context;
  auto mmdit = buildMMDiT(context, MMDiTConfig());
  ASSERT_TRUE(static_cast<bool>(mmdit)) << toString(mmdit.takeError());
  ParamShapes shapes = paramShapes(**mmdit);
  EXPECT_EQ(shapes["transformer_blocks.1.norm1_context.linear.weight"],
            (std::vector<int64_t>{6 * 64, 64}));
  EXPECT_EQ(shapes["transformer_blocks.0.attn.to_add_out.bias"],
            (std::vector<int64_t>{64}));
  auto flux = buildFlux(context, FluxConfig());
  ASSERT_TRUE(static_cast<bool>(flux)) << toString(flux.takeError());
  shapes = paramShapes(**flux);
  EXPECT_EQ(shapes["single_transformer_blocks.0.proj_out.weight"],
            (std::vector<int64_t>{64, 5 * 64}));
  EXPECT_EQ(shapes["single_transformer_blocks.1.attn.norm_q.weight"],
            (std::vector<int64_t>{16}));
}

TEST(PresetsTest, InvalidConfigsNameTheSetting) {
  MLIRContext context;
  LlamaConfig config;
  config.heads = 4;
  config.kvHeads = 3;
  auto module = buildLlama(context, config);
  ASSERT_FALSE(static_cast<bool>(module));
  EXPECT_EQ(toString(module.takeError()),
            "--heads 4 must be a multiple of --kv-heads 3");
  FluxConfig flux;
  flux.layers = 0;
  auto fluxModule = buildFlux(context, flux);
  ASSERT_FALSE(static_cast<bool>(fluxModule));
  EXPECT_EQ(toString(fluxModule.takeError()), "--layers must be >= 1, got 0");
}

} // namespace
