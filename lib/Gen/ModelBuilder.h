//===- ModelBuilder.h - helpers to write model IR ---------------*- C++ -*-===//
//
// A thin layer over OpBuilder that the presets use to declare parameters and
// emit meg ops with Hugging Face style parameter names.
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_LIB_GEN_MODELBUILDER_H
#define MEGC_LIB_GEN_MODELBUILDER_H

#include "megc/Dialect/Meg/IR/MegOps.h"
#include "megc/Gen/Presets.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringMap.h"

namespace megc::gen {

/// A named function argument or result of an entry point.
struct NamedType {
  llvm::StringRef name;
  mlir::Type type;
};
struct NamedValue {
  llvm::StringRef name;
  mlir::Value value;
};

class ModelBuilder {
public:
  ModelBuilder(mlir::MLIRContext &context, DType dtype);

  mlir::Type dtype() const { return activationType; }
  mlir::RankedTensorType tensor(llvm::ArrayRef<int64_t> shape) const;
  mlir::RankedTensorType tensor(llvm::ArrayRef<int64_t> shape,
                                mlir::Type element) const;

  /// Parameter declarations (module level, in declaration order). Weights
  /// draw from normal(0, initStd); `aliases` are other names checkpoints
  /// hold the parameter under.
  void weight(llvm::StringRef name, llvm::ArrayRef<int64_t> shape,
              llvm::ArrayRef<llvm::StringRef> aliases = {});
  void setInitStd(double std) { initStd = std; }
  void ones(llvm::StringRef name, llvm::ArrayRef<int64_t> shape);
  void zeros(llvm::StringRef name, llvm::ArrayRef<int64_t> shape);
  /// An f32 weight whatever the model's dtype (a router's, as Hugging
  /// Face keeps it).
  void weightF32(llvm::StringRef name, llvm::ArrayRef<int64_t> shape);
  /// A frozen f32 parameter initialised to zeros (state that no gradient
  /// trains, such as a router's load-balancing bias).
  void frozenZerosF32(llvm::StringRef name, llvm::ArrayRef<int64_t> shape);
  /// A linear layer `prefix.weight` [out, in] (and `prefix.bias` [out]).
  void linearParams(llvm::StringRef prefix, int64_t in, int64_t out,
                    bool bias);

  /// Tensor parallelism over `tp` ranks (Megatron's layout; one rank lays
  /// it out with groups of one), with or without sequence parallelism:
  /// declares the mesh @world (dp_outer = dp_shard = 1), its `tp` submesh
  /// and the module's #meg.tensor_parallel, which meg-tensor-parallel
  /// applies to the layers that record a split (tpLayer).
  void setTensorParallel(int64_t tp, bool sequenceParallel);
  /// Expert parallelism over `ep` ranks: declares the mesh @world
  /// [dp_outer, dp_shard, ep, tp] (all 1 but ep) and its `ep` submesh.
  /// Stacked expert weights then hold 1/ep of the experts (dim 0), each
  /// recording its split as a #meg.sharding block over ep.
  void setExpertParallel(int64_t ep);
  int64_t expertParallel() const { return epSize; }
  /// Expert weights stacked along a new dim 0 (`shape` = [experts, ...]),
  /// which checkpoints hold as the tensors `parts`, one per expert; this
  /// rank holds a block of the experts under expert parallelism.
  void expertWeights(llvm::StringRef name, llvm::ArrayRef<int64_t> shape,
                     llvm::ArrayRef<std::string> parts);
  /// Exchanges dim-0 pieces over ep (meg.all_to_all): piece i of every
  /// rank goes to rank i.
  mlir::Value allToAllExperts(mlir::Value input);
  /// Records how the layer that computed `output` (a meg.linear or
  /// meg.embedding) splits under tensor parallelism; returns `output`.
  mlir::Value tpLayer(mlir::Value output, mlir::meg::TpLayerKind kind,
                      int64_t groups = 0);

  /// Starts a function whose arguments carry `meg.name`s; returns them.
  llvm::SmallVector<mlir::Value> beginFunction(llvm::StringRef name,
                                               llvm::ArrayRef<NamedType> args);
  /// Returns `results` from the current function and fixes its type.
  void endFunction(llvm::ArrayRef<NamedValue> results);
  /// Makes the current function private: a part of entries, not one.
  void makePrivate();
  /// Calls a function built earlier.
  mlir::ValueRange call(llvm::StringRef name, mlir::ValueRange args);

  /// Reads a declared parameter.
  mlir::Value param(llvm::StringRef name);

  /// The ops built between beginLayer(i) and endLayer(), parameter
  /// declarations and forward ops alike, are transformer layer i's
  /// (`meg.layer = i`): the only source of layer extents (meg-remat's
  /// recompute units, meg-fsdp's gather units, meg-outline-cuda-graphs'
  /// layer graphs).
  void beginLayer(int64_t index);
  void endLayer();

  mlir::Value linear(mlir::Value input, llvm::StringRef prefix, bool bias);
  /// A linear layer on the parameter `weightName` (a tied LM head).
  mlir::Value linearWith(mlir::Value input, llvm::StringRef weightName,
                         mlir::Value bias = {});
  mlir::Value rmsNorm(mlir::Value input, llvm::StringRef weight, double eps);
  mlir::Value layerNorm(mlir::Value input, double eps);
  mlir::Value add(mlir::Value lhs, mlir::Value rhs);
  mlir::Value sub(mlir::Value lhs, mlir::Value rhs);
  mlir::Value mul(mlir::Value lhs, mlir::Value rhs);
  mlir::Value div(mlir::Value lhs, mlir::Value rhs);
  mlir::Value stopGradient(mlir::Value input);
  mlir::Value neg(mlir::Value input);
  mlir::Value silu(mlir::Value input);
  mlir::Value geluTanh(mlir::Value input);
  mlir::Value cos(mlir::Value input);
  mlir::Value sin(mlir::Value input);
  mlir::Value cast(mlir::Value input, mlir::Type element);
  mlir::Value reshape(mlir::Value input, llvm::ArrayRef<int64_t> shape);
  mlir::Value slice(mlir::Value input, llvm::ArrayRef<int64_t> offsets,
                    llvm::ArrayRef<int64_t> sizes,
                    llvm::ArrayRef<int64_t> strides);
  /// Slice `[offset, offset + size)` of the last dimension.
  mlir::Value sliceLast(mlir::Value input, int64_t offset, int64_t size,
                        int64_t stride = 1);
  mlir::Value concat(mlir::ValueRange inputs, int64_t axis);
  /// Result dimension i is input dimension `permutation[i]`.
  mlir::Value transpose(mlir::Value input,
                        llvm::ArrayRef<int64_t> permutation);
  llvm::SmallVector<mlir::Value> split(mlir::Value input, int64_t axis,
                                       llvm::ArrayRef<int64_t> sizes);
  mlir::Value attention(mlir::Value query, mlir::Value key, mlir::Value value,
                        bool causal);
  /// With an explicit softmax scale.
  mlir::Value attention(mlir::Value query, mlir::Value key, mlir::Value value,
                        bool causal, double scale);
  mlir::Value modulate(mlir::Value input, mlir::Value shift,
                       mlir::Value scale);
  mlir::Value embedding(mlir::Value table, mlir::Value ids);
  mlir::Value matmul(mlir::Value lhs, mlir::Value rhs, bool transposeRhs);
  mlir::Value reduceSum(mlir::Value input, llvm::ArrayRef<int64_t> dims);
  mlir::Value broadcastTo(mlir::Value input, llvm::ArrayRef<int64_t> shape);
  mlir::Value sigmoid(mlir::Value input);
  /// The experts [T, k] and weights [T, k] of meg.moe_route.
  std::pair<mlir::Value, mlir::Value>
  moeRoute(mlir::Value scores, mlir::Value bias, int64_t topK, int64_t groups,
           int64_t topGroups, bool normalize, double scaling);
  /// The results of meg.moe_assign.
  struct MoeSlots {
    mlir::Value slotTokens, slotChoices, positions, load, dropped;
  };
  MoeSlots moeAssign(mlir::Value experts, mlir::Value weights,
                     int64_t numExperts, int64_t capacity, bool byWeight);
  mlir::Value gatherRows(mlir::Value source, mlir::Value index,
                         mlir::Value inverse);
  /// DeepSeek-V3's routing-bias update of the frozen parameter `bias` from
  /// `load` [E] (f32 counts) after each training step (meg.expert_bias_update).
  void expertBiasUpdate(llvm::StringRef bias, mlir::Value load, double rate);
  mlir::Value iota(int64_t size);
  mlir::Value constantF32(llvm::ArrayRef<float> values);
  /// The token mean of the cross-entropy; with an ignore index, the sum
  /// over the labels that count divided by their global count.
  mlir::Value crossEntropyMean(mlir::Value logits, mlir::Value labels,
                               std::optional<int64_t> ignoreIndex);
  mlir::Value meanSquaredError(mlir::Value prediction, mlir::Value target);

  /// Verifies and hands over the module.
  llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>> finish();

  static mlir::ArrayRef<int64_t> shapeOf(mlir::Value value);

private:
  /// Declares `name` of shape `shape`.
  /// `element` (default: the model's dtype), `frozen` and `parts` as
  /// ParamOp's; a parameter held in parts (stacked experts) is split along
  /// dim 0 over ep under expert parallelism.
  void declare(llvm::StringRef name, llvm::ArrayRef<int64_t> shape,
               mlir::meg::InitKind kind, double scale,
               llvm::ArrayRef<llvm::StringRef> aliases = {},
               mlir::Type element = {}, bool frozen = false,
               llvm::ArrayRef<llvm::StringRef> parts = {});
  /// Declares @world with the axes dp_outer, dp_shard, (ep,) tp, every size
  /// 1 but tp's and ep's, and registers the group of `axes`.
  void declareMesh(mlir::ArrayAttr axes);
  mlir::ArrayAttr tpAxes();
  mlir::ArrayAttr epAxes();

  /// Records the current layer on every op inserted.
  struct LayerTagger : public mlir::OpBuilder::Listener {
    void notifyOperationInserted(mlir::Operation *op,
                                 mlir::OpBuilder::InsertPoint) override;
    mlir::IntegerAttr layer;
  };

  mlir::MLIRContext &context;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  mlir::OpBuilder builder;
  mlir::Location loc;
  mlir::Type activationType;
  double initStd = 0.02;
  int64_t tpSize = 1, epSize = 1;
  llvm::StringMap<mlir::RankedTensorType> paramTypes;
  mlir::func::FuncOp currentFunction;
  LayerTagger layerTagger;
};

/// Precomputed cos/sin tables of the unfused RoPE, shaped to broadcast
/// against a bshd activation ([1, S, 1, rotary_dim]).
struct RopeTables {
  mlir::Value cos, sin;
  int64_t rotaryDim;
};

/// Rotary dim for `headDim` and `config`, or an error.
llvm::Expected<int64_t> rotaryDimFor(int64_t headDim, const RopeConfig &config);

/// YaRN's mscale: 0.1 mscale ln(scale) + 1 (1 when scale <= 1).
double yarnMscale(double scale, double mscale);

/// Emits frequencies, the embedding layout and cos/sin as a framework does.
RopeTables buildRopeTables(ModelBuilder &b, int64_t seq, int64_t rotaryDim,
                           const RopeConfig &config);

/// Applies RoPE to `x` [B, S, H, D] in the unfused reference form:
/// `x * cos + rotate_half(x) * sin` on the rotary part, tail re-joined.
mlir::Value applyRope(ModelBuilder &b, mlir::Value x, const RopeTables &tables,
                      bool interleaved);

/// Error for an invalid preset setting.
llvm::Error configError(const llvm::Twine &message);

/// `value` in %g form, for messages.
std::string formatNumber(double value);

/// Checks that every `--flag value` pair is >= 1.
llvm::Error checkPositive(
    std::initializer_list<std::pair<llvm::StringRef, int64_t>> sizes);

/// The adaLN parameters of a DiT block: `silu(cond)` through the linear
/// layer `prefix`, split into `chunks` tensors of shape [B, H].
llvm::SmallVector<mlir::Value> adaLnChunks(ModelBuilder &b, mlir::Value cond,
                                           llvm::StringRef prefix,
                                           int64_t chunks);

/// `residual + gate[:, None, :] * update` for gate [B, H].
mlir::Value gatedResidual(ModelBuilder &b, mlir::Value residual,
                          mlir::Value gate, mlir::Value update);

} // namespace megc::gen

#endif // MEGC_LIB_GEN_MODELBUILDER_H
