// Executes the entries of a program on a device, owning its parameters.
#ifndef MEGRT_SESSION_H
#define MEGRT_SESSION_H

#include "megrt/KernelObserver.h"
#include "megrt/Program.h"
#include "megrt/Tensor.h"

#include <cstdint>
#include <map>
#include <optional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace megrt {

struct SessionOptions {
  /// "cpu", or "cuda" / "cuda:N" (CUDA device 0 / N) in a runtime built with
  /// CUDA support (see supportedDevices()). In a world of several ranks,
  /// "cuda" is the device of the rank's local rank (one GPU per rank).
  std::string device = "cpu";
  /// Seed of the parameter initialisation done at construction.
  uint64_t seed = 0;
  /// Run the entries' graph regions as graphs: on a CUDA device, each is
  /// captured into a CUDA graph on the entry's first run and replayed with
  /// one launch afterwards; the CPU records each region's command list once
  /// and replays it. With false, their commands run one by one, so that one
  /// artifact can compare graph replay with per-kernel launches.
  bool cudaGraphs = true;
  /// Empty, or the path of a Chrome trace-event JSON file (chrome://tracing,
  /// Perfetto) written when the Session is destroyed and by writeTrace(): one
  /// event per entry run, graph run (capture or replay) and command run
  /// outside a graph, timed on the device (CUDA events on a GPU). In a world
  /// of several ranks, rank N > 0 writes its own trace to this path with
  /// ".rankN" before the extension (trace.json -> trace.rank1.json).
  std::string traceFile;
  /// Programs with a mesh: how long a collective (or the checks at
  /// construction) may wait for the other ranks before this rank fails,
  /// because a peer died or stalled. MEGRT_COMM_TIMEOUT (seconds) in the
  /// environment overrides it. The first Session of a process connects the
  /// world, and its value stays for the process.
  double commTimeoutSeconds = 300;
  /// CPU threads of the session (the calling thread among them): a cpu
  /// device runs its kernels, GEMMs and attention on them, and any session
  /// initialises its parameters on them; 0 for the MEGRT_NUM_THREADS
  /// environment variable, else every core the process may use. Results
  /// are the same for any number.
  unsigned threads = 0;
  /// Loading weights or training state checks that every value is finite
  /// (an error names the tensor and its first bad element); false skips
  /// the check for speed.
  bool checkFinite = true;
  /// Initialise the model weights (every parameter that is not training
  /// state) at construction. false leaves them zero, for a loadParameters
  /// that sets every one of them next (initialising them would be thrown
  /// away: a 509M-parameter model's initialisation takes 18 s of one
  /// core); training state and master weights are initialised either way.
  bool initializeWeights = true;
  /// On a cpu device, called before and after every kernel launch (on the
  /// calling thread), or null; it must outlive the Session.
  KernelObserver *kernelObserver = nullptr;
};

/// The devices a Session accepts: "cpu", and "cuda" when the runtime was
/// built with CUDA support ("cuda:N" is accepted too).
std::vector<std::string> supportedDevices();

/// This process's place among the processes a launcher started (mpirun, a
/// PMI launcher), read from the environment without connecting to them:
/// rank 0 of 1 without a launcher. The rank of a multi-rank Session is this
/// rank; tools use it before a Session exists, e.g. to prefix messages.
struct LaunchedRank {
  int rank = 0;
  int size = 1;
};
/// Throws megrt::Error when the launcher's variables are malformed.
LaunchedRank launchedRank();

/// Owns the parameters, the loaded device code and one prepared arena per
/// entry (created on its first run and reused). Not safe for concurrent use;
/// give each thread its own Session.
///
/// On a CUDA device, the parameters live in device memory and host copies
/// are kept for this API: writes are uploaded before the next run, and reads
/// download what runs changed. A CUDA device needs the CUDA driver
/// (libcuda.so.1) and, for Gemm commands, cuBLASLt, both loaded when the
/// Session is created.
///
/// Multi-rank programs (Program::mesh() set) run as one process per rank,
/// started by a launcher (`mpirun -n RANKS`), each creating its Session on
/// the same artifact: construction connects the world and fails unless it
/// has exactly the mesh's ranks and every rank loaded the same artifact.
/// Construction, run(), saveParameters() and saveState() communicate, so
/// every rank must make the same calls in the same order. A sharded
/// parameter holds this rank's piece (ParameterSpec::sharding): its
/// initialisation gives every rank the piece of the full tensor a single
/// rank would initialise, files hold full tensors, and parameter() /
/// setParameter() see the piece. A program without a mesh runs on one rank
/// and never communicates.
class Session {
public:
  /// Loads the program's device code and initialises every parameter from its
  /// init spec with options.seed. With a mesh, first connects the world and
  /// checks its size and the artifact on every rank.
  explicit Session(Program program, SessionOptions options = {});
  ~Session();
  Session(Session &&) noexcept;
  Session &operator=(Session &&) noexcept;

  const Program &program() const;

  /// This process's rank in the mesh's numbering and the number of ranks:
  /// 0 and 1 for a program without a mesh.
  int rank() const;
  int worldSize() const;

  /// Checks that every rank was given the same settings before any work
  /// pairs up across ranks: each rank passes (name, value) pairs, the same
  /// names in the same order, such as a tool's options and the identity of
  /// its input files. On any difference every rank throws megrt::Error at
  /// once, naming the first setting that differs and the ranks with each
  /// value. Communicates (every rank must call it); a program without a
  /// mesh has nothing to compare.
  void agree(const std::vector<std::pair<std::string, std::string>> &settings)
      const;

  /// Reinitialises every parameter: zeros, ones, normal(0, scale) or
  /// uniform(-scale, scale), and copies (master weights) from their source.
  /// Each element is a pure function of (seed, parameter name, element
  /// index), so results are bit-identical across runs, thread counts and
  /// IEEE-754 platforms. A sharded parameter gets the elements of its piece
  /// of the full tensor (zeros in the padding); a sharded copy of a
  /// replicated source takes its piece of the source.
  void initParameters(uint64_t seed);

  /// Reads every model weight by name from a checkpoint: a safetensors
  /// file, or a directory in Hugging Face layout (model.safetensors, or the
  /// shards model.safetensors.index.json lists). Training state is not
  /// looked for: it keeps its values, except master weights, which are
  /// re-derived from the loaded weights. A weight may be stored under one of
  /// its aliases (a tied lm_head.weight) or, for a parameter with parts
  /// (stacked MoE experts), as one tensor per part, and in another
  /// floating-point dtype, which is converted (round to nearest even);
  /// saving writes the parts again. A missing weight, a
  /// shape mismatch, or (unless allowExtra) a tensor that is neither a
  /// parameter nor an alias is an error; nothing is changed on error. The
  /// file holds full tensors (a sharded parameter's full shape); every rank
  /// reads it and keeps its piece.
  void loadParameters(const std::string &path, bool allowExtra = false);
  /// Writes the model weights (every parameter that is not training state)
  /// as full tensors in their dtype: to a safetensors file, or, when `path`
  /// is a directory or ends in '/', in Hugging Face layout (model.safetensors,
  /// or shards of at most maxShardBytes with model.safetensors.index.json,
  /// and config.json when the artifact has the model's config), which
  /// transformers' from_pretrained loads. With several ranks, every rank
  /// must call it: the pieces of sharded parameters are gathered, and rank 0
  /// alone writes (the others write nothing).
  void saveParameters(const std::string &path,
                      uint64_t maxShardBytes = 50'000'000'000) const;
  /// The full training state: model weights, optimizer moments and step
  /// count, every one required on load. Loaded and saved like the weights,
  /// as one safetensors file whose metadata holds `metadata` (what the
  /// caller needs to resume, such as a data position); loadState returns
  /// the file's metadata. When `path` is a directory or ends in '/', the
  /// state is a distributed checkpoint there (megrt/Checkpoint.h): each
  /// rank writes only the pieces it holds the first copy of, in parallel,
  /// and rank 0 commits the record once every rank's file is durable;
  /// loading reads each rank's pieces under its current mesh from the byte
  /// ranges that hold them, so a checkpoint saved on one mesh loads on any
  /// other (or on one rank), and an uncommitted one is refused.
  std::map<std::string, std::string> loadState(const std::string &path);
  void saveState(const std::string &path,
                 const std::map<std::string, std::string> &metadata = {}) const;

  /// saveState without waiting for the disk: returns once the state is
  /// copied to host memory, and a background thread writes the files
  /// (byte for byte those saveState writes) while the caller runs further
  /// steps. At most one save is in flight: starting one finishes the one
  /// before, and so does saveState. Under a mesh the path must be a
  /// distributed checkpoint (a directory or ending in '/'), whose commit
  /// record finishSave() writes. Every rank must call it, and finishSave(),
  /// at the same points.
  void startSaveState(const std::string &path,
                      const std::map<std::string, std::string> &metadata = {});
  /// Waits for the save in flight and completes it (writes a distributed
  /// checkpoint's commit record); throws its error, naming the rank that
  /// failed. Returns the path saved, or "" when no save was in flight.
  std::string finishSave();
  /// Throws the error of the save in flight if its writer has failed,
  /// without waiting or communicating: the step-boundary check of a run
  /// without a mesh (under a mesh, finishSave() reports a rank's failure
  /// on every rank at once).
  void checkSave() const;

  /// On the CPU the reference shows the parameter live; on a CUDA device it
  /// shows its value as of this call (call again after a run). For a
  /// sharded parameter, this rank's piece (with its padding).
  const Tensor &parameter(std::string_view name) const;
  /// `value` must have the parameter's dtype and shape (for a sharded
  /// parameter, this rank's piece). Master weights that copy this parameter
  /// follow it.
  void setParameter(std::string_view name, const Tensor &value);

  /// Runs one entry. `inputs` must hold exactly the entry's inputs with their
  /// dtypes and shapes; they are copied, never modified. An input split
  /// over a submesh (TensorSpec::split) is the global tensor, whose dim 0 is
  /// the entry's times the group size; this rank runs on its rows. Returns
  /// every output (this rank's values).
  std::map<std::string, Tensor>
  run(std::string_view entry, const std::map<std::string, Tensor> &inputs);
  /// Runs one entry as run() above does, into `outputs`: a tensor that
  /// `outputs` holds under an output's name, with its dtype and shape, is
  /// overwritten in place, so that a loop running an entry again and again
  /// into one map allocates no output storage after its first run. Other
  /// tensors there are replaced, or removed when the entry has no output of
  /// their name. After an error `outputs` is empty.
  void run(std::string_view entry, const std::map<std::string, Tensor> &inputs,
           std::map<std::string, Tensor> &outputs);

  /// The learning rate the last run of a training step used, from the
  /// artifact's schedule (Program::lrSchedule); nullopt before such a run
  /// or when the rate is compiled in.
  std::optional<double> learningRate() const;

  /// Writes the trace of every run so far to options.traceFile now, and
  /// throws if tracing is off or the file cannot be written. The destructor
  /// writes the trace only if events were added since (a failure there is
  /// printed to stderr: destructors cannot throw).
  void writeTrace();

  /// Drops the trace's events so far (warm-up runs, say), so that the file
  /// holds only later runs; throws if tracing is off.
  void clearTrace();

private:
  /// initParameters, or (weights false) the training state only.
  void initialize(uint64_t seed, bool weights);
  void load(const std::string &path, bool allowExtra, bool withState,
            std::map<std::string, std::string> *metadata);
  void save(const std::string &path, bool withState, uint64_t maxShardBytes,
            const std::map<std::string, std::string> &metadata) const;

  struct Impl;
  std::unique_ptr<Impl> impl_;
};

} // namespace megrt

#endif // MEGRT_SESSION_H
