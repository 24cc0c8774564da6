// Fused attention through cuDNN's scaled-dot-product-attention graphs. The
// frontend is header-only and built in its dynamic-loading mode: every
// cuDNN call goes through cudnn_frontend::cudnn_dlhandle, which
// loadCudnnLibrary sets, so the runtime never links libcudnn.
#include "cuda/CudnnAttention.h"

#include "DynamicLibrary.h"
#include "Fail.h"
#include "cuda/CudaAttention.h"

#include <cstdlib>
#include <dlfcn.h>
#include <string_view>

#if MEGRT_WITH_CUDNN
#include <cuda_runtime_api.h>
#include <cudnn_frontend.h>
#include <cudnn_version.h>

#include <unordered_map>

namespace cudnn_frontend {
/// The libcudnn the frontend calls (see the frontend's shim).
void *cudnn_dlhandle = nullptr;
} // namespace cudnn_frontend
#endif

namespace megrt {

std::vector<std::string> cudnnLibraryCandidates() {
#if MEGRT_WITH_CUDNN
  std::vector<std::string> paths;
  if (const char *path = std::getenv("MEGRT_CUDNN_LIBRARY"); path && *path)
    paths.push_back(path);
  for (std::string &path :
       toolkitLibraryCandidates(concat("libcudnn.so.", CUDNN_MAJOR)))
    paths.push_back(std::move(path));
  return paths;
#else
  return {};
#endif
}

CudnnLibraryStatus
loadCudnnLibrary(const std::vector<std::string> &candidates) {
#if !MEGRT_WITH_CUDNN
  (void)candidates;
  return {false, "this runtime was built without the cuDNN frontend"};
#else
  OpenedLibrary library = openFirstLibrary(candidates, RTLD_NOW | RTLD_LOCAL);
  if (!library.handle)
    return {false, concat("libcudnn.so.", CUDNN_MAJOR, " could not be loaded (",
                          library.reasons,
                          "); set MEGRT_CUDNN_LIBRARY to its path, or "
                          "CUDA_HOME or LD_LIBRARY_PATH to its folder")};
  auto getVersion = reinterpret_cast<size_t (*)()>(
      dlsym(library.handle.get(), "cudnnGetVersion"));
  if (!getVersion)
    return {false, concat("'", library.path,
                          "' has no 'cudnnGetVersion'; is it cuDNN?")};
  // cuDNN 9 numbers its versions major * 10000 + minor * 100 + patch; its
  // types and enums hold within a major version.
  size_t version = getVersion();
  std::string versionText =
      concat(version / 10000, ".", version % 10000 / 100, ".", version % 100);
  if (version / 10000 != CUDNN_MAJOR)
    return {false,
            concat("'", library.path, "' is cuDNN ", versionText,
                   ", but megrt was built for cuDNN ", CUDNN_MAJOR, ".x")};
  // The frontend reads device properties through the CUDA runtime, which it
  // opens by its soname: loading it here from the toolkit's places first
  // makes that find it.
  int cudartMajor = CUDART_VERSION / 1000;
  OpenedLibrary cudart = openFirstLibrary(
      toolkitLibraryCandidates(concat("libcudart.so.", cudartMajor)),
      RTLD_NOW | RTLD_LOCAL);
  if (!cudart.handle)
    return {false,
            concat("cuDNN's frontend needs libcudart.so.", cudartMajor,
                   ", which could not be loaded (", cudart.reasons, ")")};
  // Both stay loaded for the life of the process.
  cudart.handle.release();
  cudnn_frontend::cudnn_dlhandle = library.handle.release();
  return {true, concat("cuDNN ", versionText, " from '", library.path, "'")};
#endif
}

const CudnnLibraryStatus &cudnnLibrary() {
  static const CudnnLibraryStatus status = [] {
    if (const char *flag = std::getenv("MEGRT_CUDNN");
        flag && std::string_view(flag) == "0")
      return CudnnLibraryStatus{false, "disabled by MEGRT_CUDNN=0"};
    return loadCudnnLibrary(cudnnLibraryCandidates());
  }();
  return status;
}

std::string cudnnAttentionRefusal(const AttentionShape &s, int computeMajor) {
  if (s.dtype != DType::BF16 && s.dtype != DType::F16)
    return concat("cuDNN's attention is used for bf16 and f16, not ",
                  dtypeName(s.dtype));
  if (computeMajor < 9)
    return "cuDNN's attention is used on compute capability 9.0 and newer";
  // cuDNN's fused SDPA engines take head dimensions in multiples of 8 up
  // to 256.
  for (int64_t dim : {s.headDim, s.valueDim})
    if (dim % 8 != 0 || dim > 256)
      return concat("cuDNN's attention takes head dimensions that are "
                    "multiples of 8 up to 256, not ",
                    dim);
  if (s.causal && s.seqQ > s.seqKv)
    return "a causal attention with more queries than keys has queries that "
           "see no key, which cuDNN leaves undefined";
  return "";
}

AttentionChoice chooseAttentionKernels(const AttentionShape &shape,
                                       bool backward, bool stats,
                                       bool positions, CudnnAttention *cudnn,
                                       const std::string &cudnnUnavailable,
                                       int computeMajor) {
  std::string why = cudnnAttentionRefusal(shape, computeMajor);
  // cuDNN's causal masks align the queries with the first or the last keys;
  // a context-parallel rank's queries stand at positions of their own.
  if (why.empty() && positions)
    why = "query positions";
  if (why.empty() && !cudnn)
    why = cudnnUnavailable;
  if (why.empty())
    why = cudnn->prepare(shape, backward, stats);
  AttentionChoice choice;
  if (why.empty()) {
    choice.cudnn = cudnn;
    choice.scratch = cudnn->scratchBytes(shape, backward, stats);
    choice.note = "cuDNN";
  } else {
    choice.scratch = backward ? CudaAttention::backwardScratchBytes(shape) : 0;
    choice.note = concat("megrt (", why, ")");
  }
  return choice;
}

namespace {

/// Parts of a command's scratch start at multiples of this.
constexpr size_t kScratchAlignment = 256;

size_t alignUp(size_t bytes) {
  return (bytes + kScratchAlignment - 1) / kScratchAlignment *
         kScratchAlignment;
}

std::string planKey(const AttentionShape &s, bool backward, bool stats) {
  return concat(describeAttention(s), " scale=", s.scale,
                backward ? " backward" : " forward",
                stats ? " with statistics" : "");
}

} // namespace

#if !MEGRT_WITH_CUDNN

struct CudnnAttention::Plans {};

CudnnAttention::CudnnAttention(const CudaContext &context) : context_(context) {
  fail("this runtime was built without the cuDNN frontend");
}
CudnnAttention::~CudnnAttention() = default;
std::string CudnnAttention::prepare(const AttentionShape &, bool, bool) {
  return "this runtime was built without the cuDNN frontend";
}
std::string CudnnAttention::build(const AttentionShape &, bool, bool,
                                  const std::string &) {
  return "this runtime was built without the cuDNN frontend";
}
size_t CudnnAttention::scratchBytes(const AttentionShape &, bool, bool) const {
  return 0;
}
void CudnnAttention::forward(const AttentionShape &, CUdeviceptr, CUdeviceptr,
                             CUdeviceptr, CUdeviceptr, CUdeviceptr, CUdeviceptr,
                             size_t, CUstream) const {}
void CudnnAttention::backward(const AttentionShape &, CUdeviceptr, CUdeviceptr,
                              CUdeviceptr, CUdeviceptr, CUdeviceptr,
                              CUdeviceptr, CUdeviceptr, CUdeviceptr,
                              CUdeviceptr, CUdeviceptr, size_t,
                              CUstream) const {}

#else

namespace fe = cudnn_frontend;

namespace {

/// The graphs' tensor ids.
enum Uid : int64_t {
  kQ = 1,
  kK,
  kV,
  kOut,
  kStats,
  kGradOut,
  kGradQ,
  kGradK,
  kGradV
};

using TensorPtr = std::shared_ptr<fe::graph::Tensor_attributes>;

/// A [batch, seq, heads, dim] tensor as cuDNN's [batch, heads, seq, dim]
/// with strides.
fe::graph::Tensor_attributes bshd(const char *name, int64_t uid, int64_t batch,
                                  int64_t seq, int64_t heads, int64_t dim) {
  return fe::graph::Tensor_attributes()
      .set_name(name)
      .set_uid(uid)
      .set_dim({batch, heads, seq, dim})
      .set_stride({seq * heads * dim, dim, heads * dim, 1});
}

void setBshd(const TensorPtr &tensor, int64_t uid, int64_t batch, int64_t seq,
             int64_t heads, int64_t dim) {
  tensor->set_output(true)
      .set_uid(uid)
      .set_dim({batch, heads, seq, dim})
      .set_stride({seq * heads * dim, dim, heads * dim, 1});
}

/// The softmax statistics: one f32 per batch, head and query.
void setStats(const TensorPtr &tensor, const AttentionShape &s) {
  tensor->set_output(true)
      .set_uid(kStats)
      .set_data_type(fe::DataType_t::FLOAT)
      .set_dim({s.batch, s.heads, s.seqQ, 1})
      .set_stride({s.heads * s.seqQ, s.seqQ, 1, 1});
}

/// A graph in the shape's dtype (f32 inside) with q, k and v declared.
struct AttentionGraph {
  std::shared_ptr<fe::graph::Graph> graph;
  TensorPtr q, k, v;
};

AttentionGraph newGraph(const AttentionShape &s) {
  auto graph = std::make_shared<fe::graph::Graph>();
  graph
      ->set_io_data_type(s.dtype == DType::BF16 ? fe::DataType_t::BFLOAT16
                                                : fe::DataType_t::HALF)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  TensorPtr q =
      graph->tensor(bshd("q", kQ, s.batch, s.seqQ, s.heads, s.headDim));
  TensorPtr k =
      graph->tensor(bshd("k", kK, s.batch, s.seqKv, s.kvHeads, s.headDim));
  TensorPtr v =
      graph->tensor(bshd("v", kV, s.batch, s.seqKv, s.kvHeads, s.valueDim));
  return {graph, q, k, v};
}

/// The forward, with the statistics as a second output when `stats`.
std::shared_ptr<fe::graph::Graph> forwardGraph(const AttentionShape &s,
                                               bool stats) {
  auto [graph, q, k, v] = newGraph(s);
  auto options = fe::graph::SDPA_attributes()
                     .set_name("megrt_attention")
                     .set_generate_stats(stats)
                     .set_attn_scale(s.scale);
  // The causal mask of AttentionShape keeps key j for query i when
  // j <= i + (seqKv - seqQ): cuDNN's bottom-right alignment.
  if (s.causal)
    options.set_causal_mask_bottom_right(true);
  auto [out, statistics] = graph->sdpa(q, k, v, options);
  setBshd(out, kOut, s.batch, s.seqQ, s.heads, s.valueDim);
  if (stats)
    setStats(statistics, s);
  return graph;
}

std::shared_ptr<fe::graph::Graph> backwardGraph(const AttentionShape &s) {
  auto [graph, q, k, v] = newGraph(s);
  TensorPtr out =
      graph->tensor(bshd("out", kOut, s.batch, s.seqQ, s.heads, s.valueDim));
  TensorPtr gradOut = graph->tensor(
      bshd("grad_out", kGradOut, s.batch, s.seqQ, s.heads, s.valueDim));
  TensorPtr stats =
      graph->tensor(fe::graph::Tensor_attributes()
                        .set_name("stats")
                        .set_uid(kStats)
                        .set_data_type(fe::DataType_t::FLOAT)
                        .set_dim({s.batch, s.heads, s.seqQ, 1})
                        .set_stride({s.heads * s.seqQ, s.seqQ, 1, 1}));
  auto options = fe::graph::SDPA_backward_attributes()
                     .set_name("megrt_attention_grad")
                     .set_attn_scale(s.scale);
  if (s.causal)
    options.set_causal_mask_bottom_right(true);
  auto [dq, dk, dv] =
      graph->sdpa_backward(q, k, v, out, gradOut, stats, options);
  setBshd(dq, kGradQ, s.batch, s.seqQ, s.heads, s.headDim);
  setBshd(dk, kGradK, s.batch, s.seqKv, s.kvHeads, s.headDim);
  setBshd(dv, kGradV, s.batch, s.seqKv, s.kvHeads, s.valueDim);
  return graph;
}

/// Builds `graph`'s plans on `handle`; the empty string or the step that
/// failed and cuDNN's message. Writes the chosen plan's workspace size.
std::string buildPlans(fe::graph::Graph &graph, cudnnHandle_t handle,
                       int64_t &workspace) {
  auto check = [](fe::error_t error, const char *step) -> std::string {
    if (error.is_good())
      return "";
    return concat("cuDNN ", step, ": ", error.get_message());
  };
  std::string why = check(graph.validate(), "validate");
  if (why.empty())
    why = check(graph.build_operation_graph(handle), "build_operation_graph");
  if (why.empty())
    why = check(graph.create_execution_plans({fe::HeurMode_t::A}),
                "create_execution_plans");
  if (why.empty())
    why = check(graph.check_support(handle), "check_support");
  if (why.empty())
    why = check(graph.build_plans(handle), "build_plans");
  if (why.empty())
    why = check(graph.get_workspace_size(workspace), "get_workspace_size");
  return why;
}

void *pointer(CUdeviceptr address) {
  return reinterpret_cast<void *>(static_cast<uintptr_t>(address));
}

} // namespace

struct CudnnAttention::Plans {
  /// The forward (writing the statistics, with `stats`), or with a backward
  /// not given them the forward that recomputes them (and the output,
  /// again, into scratch); null for a backward given them.
  std::shared_ptr<fe::graph::Graph> forward;
  std::shared_ptr<fe::graph::Graph> backward;
  /// Offsets into the command's scratch.
  size_t stats = 0, out = 0, workspace = 0, total = 0;
};

CudnnAttention::CudnnAttention(const CudaContext &context) : context_(context) {
  const CudnnLibraryStatus &library = cudnnLibrary();
  if (!library.loaded)
    fail("cuDNN on ", context.description(), ": ", library.description);
  context.makeCurrent();
  cudnnHandle_t handle = nullptr;
  cudnnStatus_t status = fe::detail::create_handle(&handle);
  if (status != CUDNN_STATUS_SUCCESS)
    fail("cuDNN on ", context.description(),
         ": cudnnCreate failed: ", fe::detail::get_error_string(status));
  handle_ = handle;
}

CudnnAttention::~CudnnAttention() {
  plans_.clear();
  if (handle_) {
    // Nothing can be reported from a destructor.
    context_.makeCurrentQuietly();
    fe::detail::destroy_handle(static_cast<cudnnHandle_t>(handle_));
  }
}

std::string CudnnAttention::prepare(const AttentionShape &shape, bool backward,
                                    bool stats) {
  std::string key = planKey(shape, backward, stats);
  if (plans_.count(key))
    return "";
  if (auto refused = refused_.find(key); refused != refused_.end())
    return refused->second;
  std::string why = build(shape, backward, stats, key);
  if (!why.empty())
    refused_.emplace(key, why);
  return why;
}

std::string CudnnAttention::build(const AttentionShape &shape, bool backward,
                                  bool stats, const std::string &key) {
  context_.makeCurrent();
  auto handle = static_cast<cudnnHandle_t>(handle_);
  auto plans = std::make_unique<Plans>();
  int64_t forwardWorkspace = 0;
  int64_t backwardWorkspace = 0;
  try {
    // A backward given the statistics needs no forward.
    bool recompute = backward && !stats;
    if (!backward || recompute) {
      plans->forward = forwardGraph(shape, /*stats=*/stats || recompute);
      if (std::string why =
              buildPlans(*plans->forward, handle, forwardWorkspace);
          !why.empty())
        return why;
    }
    if (backward) {
      plans->backward = backwardGraph(shape);
      if (std::string why =
              buildPlans(*plans->backward, handle, backwardWorkspace);
          !why.empty())
        return why;
    }
  } catch (const std::exception &error) {
    // The frontend throws where its dynamic loading finds no symbol.
    return concat("cuDNN: ", error.what());
  }
  if (backward && !stats) {
    size_t rows = static_cast<size_t>(shape.batch * shape.heads * shape.seqQ);
    size_t outBytes = static_cast<size_t>(shape.batch * shape.seqQ *
                                          shape.heads * shape.valueDim) *
                      elementSize(shape.dtype);
    plans->stats = 0;
    plans->out = alignUp(rows * sizeof(float));
    plans->workspace = plans->out + alignUp(outBytes);
  }
  plans->total = plans->workspace + alignUp(static_cast<size_t>(std::max(
                                        forwardWorkspace, backwardWorkspace)));
  plans_.emplace(key, std::move(plans));
  return "";
}

const CudnnAttention::Plans &CudnnAttention::plans(const AttentionShape &shape,
                                                   bool backward,
                                                   bool stats) const {
  auto it = plans_.find(planKey(shape, backward, stats));
  if (it == plans_.end())
    fail("internal error: ", describeAttention(shape),
         " was not prepared for cuDNN");
  return *it->second;
}

size_t CudnnAttention::scratchBytes(const AttentionShape &shape, bool backward,
                                    bool stats) const {
  return plans(shape, backward, stats).total;
}

namespace {

void execute(const fe::graph::Graph &graph, cudnnHandle_t handle,
             std::unordered_map<int64_t, void *> &pack, CUdeviceptr workspace,
             CUstream stream, const AttentionShape &shape, const char *what) {
  cudnnStatus_t status =
      fe::detail::set_stream(handle, reinterpret_cast<cudaStream_t>(stream));
  if (status != CUDNN_STATUS_SUCCESS)
    fail(describeAttention(shape),
         ": cudnnSetStream failed: ", fe::detail::get_error_string(status));
  fe::error_t error = graph.execute(handle, pack, pointer(workspace));
  if (error.is_bad())
    fail(describeAttention(shape), ": cuDNN's ", what,
         " failed: ", error.get_message());
}

void checkScratch(const AttentionShape &shape, size_t needed,
                  CUdeviceptr scratch, size_t scratchBytes) {
  if (scratchBytes < needed)
    fail(describeAttention(shape), ": cuDNN needs ", needed,
         " bytes of scratch, given ", scratchBytes);
  if (scratch % kScratchAlignment != 0)
    fail(describeAttention(shape), ": cuDNN's scratch at 0x", std::hex, scratch,
         " is not ", std::dec, kScratchAlignment, "-byte aligned");
}

} // namespace

void CudnnAttention::forward(const AttentionShape &shape, CUdeviceptr q,
                             CUdeviceptr k, CUdeviceptr v, CUdeviceptr out,
                             CUdeviceptr stats, CUdeviceptr scratch,
                             size_t scratchBytes, CUstream stream) const {
  const Plans &p = plans(shape, false, stats != 0);
  checkScratch(shape, p.total, scratch, scratchBytes);
  context_.makeCurrent();
  std::unordered_map<int64_t, void *> pack = {{kQ, pointer(q)},
                                              {kK, pointer(k)},
                                              {kV, pointer(v)},
                                              {kOut, pointer(out)}};
  if (stats)
    pack[kStats] = pointer(stats);
  execute(*p.forward, static_cast<cudnnHandle_t>(handle_), pack,
          scratch + p.workspace, stream, shape, "forward");
}

void CudnnAttention::backward(const AttentionShape &shape, CUdeviceptr dout,
                              CUdeviceptr q, CUdeviceptr k, CUdeviceptr v,
                              CUdeviceptr out, CUdeviceptr stats,
                              CUdeviceptr dq, CUdeviceptr dk, CUdeviceptr dv,
                              CUdeviceptr scratch, size_t scratchBytes,
                              CUstream stream) const {
  const Plans &p = plans(shape, true, stats != 0);
  checkScratch(shape, p.total, scratch, scratchBytes);
  context_.makeCurrent();
  auto handle = static_cast<cudnnHandle_t>(handle_);
  if (!stats) {
    // The statistics are recomputed by a forward whose output goes to
    // scratch; the command's own output stays as the forward left it.
    stats = scratch + p.stats;
    std::unordered_map<int64_t, void *> forwardPack = {
        {kQ, pointer(q)},
        {kK, pointer(k)},
        {kV, pointer(v)},
        {kOut, pointer(scratch + p.out)},
        {kStats, pointer(stats)}};
    execute(*p.forward, handle, forwardPack, scratch + p.workspace, stream,
            shape, "forward (softmax statistics)");
  }
  std::unordered_map<int64_t, void *> backwardPack = {
      {kQ, pointer(q)},          {kK, pointer(k)},
      {kV, pointer(v)},          {kOut, pointer(out)},
      {kGradOut, pointer(dout)}, {kStats, pointer(stats)},
      {kGradQ, pointer(dq)},     {kGradK, pointer(dk)},
      {kGradV, pointer(dv)}};
  execute(*p.backward, handle, backwardPack, scratch + p.workspace, stream,
          shape, "backward");
}

#endif

} // namespace megrt
