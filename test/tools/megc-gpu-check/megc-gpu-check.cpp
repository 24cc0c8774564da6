//===- megc-gpu-check.cpp - megc's CUDA kernels checked on the emulator --===//
//
// Compiles a model for the CPU and maps its kernels to the GPU exactly as
// `megc --target=cuda` does, lowers the GPU kernels (as the NVVM
// conversion receives them) for the GPU emulator, runs an entry of the
// model on the CPU runtime, and replays every kernel launch on the
// emulator with the CUDA launch table, comparing what the two wrote
// (LaunchComparator). Prints a line per kernel and exits 1 at any
// difference or emulator finding, each naming its kernel. --mutate plants
// a bug first (Mutations.h), for the check's own tests.
//
//===----------------------------------------------------------------------===//

#include "LaunchComparator.h"
#include "Mutations.h"

#include "megc/Compiler/CompilePipeline.h"
#include "megc/Compiler/Program.h"

#include "megrt/Error.h"
#include "megrt/Session.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdio>
#include <random>

using namespace llvm;
using namespace megc;
using namespace megc::gpucheck;

namespace {

cl::opt<std::string> inputFile(cl::Positional, cl::desc("<model.mlir>"),
                               cl::Required);
cl::opt<std::string>
    entryName("entry",
              cl::desc("Entry to run (default: every entry, so that every "
                       "kernel runs)"));
cl::opt<unsigned> steps("steps", cl::desc("Runs of each entry"), cl::init(1));
cl::opt<uint64_t> seed("seed", cl::desc("Parameter and input seed"),
                       cl::init(1));
cl::opt<unsigned>
    maxLaunches("max-launches",
                cl::desc("Launches of each kernel to compare (later ones "
                         "run on the CPU only)"),
                cl::init(3));
cl::list<std::string>
    mutations("mutate",
              cl::desc("Plant a bug first: barrier:KERNEL[:N], "
                       "shared-index:KERNEL, misalign:KERNEL or grid:KERNEL"));
cl::opt<bool> noFuse("no-fuse", cl::desc("Compile without meg-fuse"));

int fail(const Twine &message) {
  WithColor::error(errs(), "megc-gpu-check") << message << "\n";
  return 1;
}

std::string dtypeOf(mlir::Type type) {
  auto element = mlir::cast<mlir::ShapedType>(type).getElementType();
  if (element.isF32())
    return "f32";
  if (element.isBF16())
    return "bf16";
  if (element.isF16())
    return "f16";
  if (element.isInteger(32))
    return "i32";
  if (element.isInteger(64))
    return "i64";
  return "i1";
}

/// Whether a GPU function calls one of the functions the CPU code
/// approximates with polynomials (meg-approximate-math).
bool callsApproximatedMath(mlir::gpu::GPUFuncOp func) {
  bool found = false;
  func.walk([&](mlir::Operation *op) {
    found |= mlir::isa<mlir::math::ExpOp, mlir::math::ExpM1Op,
                       mlir::math::LogOp, mlir::math::Log1pOp,
                       mlir::math::Log2Op, mlir::math::TanhOp,
                       mlir::math::ErfOp>(op);
  });
  return found;
}

std::vector<KernelFacts> kernelFacts(const ProgramDesc &program,
                                     mlir::ModuleOp device,
                                     const std::vector<KernelCodeDesc> &codes) {
  std::vector<KernelFacts> facts;
  mlir::ModuleOp kernels = *program.kernelModule;
  for (size_t k = 0; k < program.kernels.size(); ++k) {
    KernelFacts fact;
    fact.name = program.kernels[k].name;
    auto func = kernels.lookupSymbol<mlir::func::FuncOp>(fact.name);
    int64_t largestInput = 1;
    for (mlir::Type type : func.getArgumentTypes()) {
      fact.argTypes.push_back(dtypeOf(type));
      largestInput = std::max<int64_t>(
          largestInput, mlir::cast<mlir::ShapedType>(type).getNumElements());
    }
    fact.inputs = func.getNumArguments();
    for (mlir::Type type : func.getResultTypes())
      fact.argTypes.push_back(dtypeOf(type));
    const KernelCodeDesc &code = codes[k];
    fact.strategy = code.strategy.kind;
    int64_t domain = 1;
    for (int64_t extent : code.strategy.domain)
      domain *= extent;
    fact.reductionLength =
        fact.strategy == "pointwise" ? 1 : std::max<int64_t>(1, largestInput / domain);
    for (const DispatchDesc &dispatch : code.dispatches)
      device.walk([&](mlir::gpu::GPUFuncOp f) {
        if (f.getName() == dispatch.entry)
          fact.approximatedMath |= callsApproximatedMath(f);
      });
    facts.push_back(std::move(fact));
  }
  return facts;
}

/// The code paths the GPU kernels take, counted: what the check covers.
std::string describePaths(mlir::ModuleOp device,
                          const std::vector<KernelCodeDesc> &codes) {
  std::map<std::string, unsigned> strategies;
  unsigned partials = 0;
  for (const KernelCodeDesc &code : codes) {
    ++strategies[code.strategy.kind];
    partials += code.dispatches.size() > 1 && code.scratchBytes > 0;
  }
  // Shared buffers by their maker: meg-map-kernels-to-gpu's staged tiles
  // and (maximum, sum) pairs of 2 x warps f32 carry llvm.align (from
  // meg-align-workgroup-buffers); MLIR's block reductions' buffers, made
  // later by meg-lower-gpu-reductions, do not.
  unsigned functions = 0, vectors = 0, shuffles = 0, staged = 0, pairs = 0,
           blockReductions = 0;
  int64_t pairElements = 2 * 256 / 32;
  device.walk([&](mlir::gpu::GPUFuncOp func) {
    ++functions;
    bool vector = false, shuffle = false;
    func.walk([&](mlir::Operation *op) {
      vector |= mlir::isa<mlir::vector::LoadOp, mlir::vector::StoreOp>(op);
      shuffle |= mlir::isa<mlir::gpu::ShuffleOp>(op);
    });
    bool tile = false, pair = false, block = false;
    for (unsigned i = 0; i < func.getNumWorkgroupAttributions(); ++i) {
      auto type = mlir::cast<mlir::MemRefType>(
          func.getWorkgroupAttributions()[i].getType());
      if (!func.getWorkgroupAttributionAttr(i, "llvm.align"))
        block = true;
      else if (type.getRank() == 1 && type.getNumElements() == pairElements &&
               type.getElementType().isF32())
        pair = true;
      else
        tile = true;
    }
    vectors += vector;
    shuffles += shuffle;
    staged += tile;
    pairs += pair;
    blockReductions += block;
  });
  std::string text;
  raw_string_ostream os(text);
  for (const auto &[kind, count] : strategies)
    os << count << " " << kind << ", ";
  os << partials << " with partials combined by a second dispatch; "
     << functions << " GPU functions: " << vectors
     << " with 128-bit accesses, " << shuffles << " with warp shuffles, "
     << blockReductions << " with block reductions, " << pairs
     << " with online-softmax pairs across warps, " << staged
     << " with staged tiles";
  return text;
}

megrt::Tensor randomInput(const megrt::TensorSpec &spec, std::mt19937_64 &rng) {
  megrt::Tensor tensor(spec.dtype, spec.shape);
  size_t count = static_cast<size_t>(tensor.numElements());
  if (spec.dtype == megrt::DType::I32 || spec.dtype == megrt::DType::I64) {
    int64_t bound = spec.indexBound > 0 ? spec.indexBound : 64;
    std::uniform_int_distribution<int64_t> pick(0, bound - 1);
    for (size_t i = 0; i < count; ++i) {
      int64_t v = pick(rng);
      if (spec.dtype == megrt::DType::I32)
        reinterpret_cast<int32_t *>(tensor.data())[i] = static_cast<int32_t>(v);
      else
        reinterpret_cast<int64_t *>(tensor.data())[i] = v;
    }
    return tensor;
  }
  std::normal_distribution<float> normal(0.0f, 0.5f);
  std::vector<float> values(count);
  for (float &v : values)
    v = normal(rng);
  return megrt::Tensor::fromFloats(spec.dtype, spec.shape, values);
}

} // namespace

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  // Every pipeline applies the pass manager's options.
  mlir::registerPassManagerCLOptions();
  cl::ParseCommandLineOptions(
      argc, argv,
      "megc-gpu-check: megc's CUDA kernels on the GPU emulator, launch by "
      "launch against its CPU kernels\n");

  CompileFlags flags;
  flags.targets = {"cpu", "cuda"};
  flags.noFuse = noFuse;
  Expected<CompileOptions> options = parseCompileFlags(flags);
  if (!options)
    return fail(toString(options.takeError()));
  std::vector<Mutation> planted;
  for (const std::string &text : mutations) {
    Expected<Mutation> mutation = parseMutation(text);
    if (!mutation)
      return fail(toString(mutation.takeError()));
    planted.push_back(*mutation);
  }

  mlir::DialectRegistry registry;
  registerCompilerDialects(registry);
  mlir::MLIRContext context(registry);
  context.loadAllAvailableDialects();
  SourceMgr sourceMgr;
  mlir::SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  std::string error;
  mlir::OwningOpRef<mlir::ModuleOp> module =
      parseModuleFile(inputFile, sourceMgr, context, error);
  if (!module)
    return error.empty() ? 1 : fail(error);
  if (failed(runFrontEnd(*module, *options)))
    return 1;
  mlir::FailureOr<ProgramDesc> program = buildProgram(*module, *options);
  if (failed(program))
    return 1;
  mlir::FailureOr<CpuModuleDesc> cpu = compileCpuKernels(*program, *options);
  mlir::FailureOr<CudaKernelMapping> cuda =
      mapCudaKernels(*program, *options, /*prepare=*/true);
  if (failed(cpu) || failed(cuda))
    return 1;
  std::vector<KernelFacts> facts =
      kernelFacts(*program, *cuda->device, cuda->kernels);
  std::string paths = describePaths(*cuda->device, cuda->kernels);
  for (const Mutation &mutation : planted)
    if (Error e = applyMutation(mutation, *program, *cuda->device,
                                cuda->kernels))
      return fail(toString(std::move(e)));
  mlir::FailureOr<std::string> library = compileCudaEmulation(*cuda->device);
  if (failed(library))
    return 1;
  if (failed(planMemory(*program)))
    return 1;
  std::string artifact = serializeProgram(*program, &*cpu, nullptr);

  SmallString<128> libraryPath;
  int fd;
  if (sys::fs::createTemporaryFile("megc-gpu-check", "so", fd, libraryPath))
    return fail("cannot create a temporary file");
  {
    raw_fd_ostream os(fd, /*shouldClose=*/true);
    os << *library;
  }
  struct Remove {
    std::string path;
    ~Remove() { sys::fs::remove(path); }
  } remove{libraryPath.str().str()};

  try {
    megemu::KernelLibrary kernels(libraryPath.str().str());
    LaunchComparator comparator(kernels, cuda->kernels, facts, maxLaunches);
    megrt::Program loaded =
        megrt::Program::fromBytes(artifact.data(), artifact.size());
    std::vector<std::string> names;
    for (const megrt::EntrySpec &entry : loaded.entries())
      if (entryName.empty() || entry.name == entryName)
        names.push_back(entry.name);
    if (names.empty())
      return fail("the model has no entry '" + entryName + "'");
    megrt::SessionOptions sessionOptions;
    sessionOptions.seed = seed;
    sessionOptions.kernelObserver = &comparator;
    megrt::Session session(loaded, sessionOptions);
    std::mt19937_64 rng(seed);
    std::string entriesText;
    for (const std::string &name : names) {
      std::map<std::string, megrt::Tensor> inputs;
      for (const megrt::TensorSpec &spec : loaded.findEntry(name)->inputs)
        inputs.emplace(spec.name, randomInput(spec, rng));
      for (unsigned step = 0; step < steps; ++step)
        session.run(name, inputs);
      entriesText += (entriesText.empty() ? "" : ", ") + name;
    }

    unsigned failed = 0, bitwise = 0, checked = 0, launches = 0;
    outs() << "megc-gpu-check: " << inputFile << ", entries " << entriesText
           << " x" << steps << ": " << facts.size() << " kernels\n";
    outs() << "  paths: " << paths << "\n";
    for (const auto &[index, result] : comparator.results()) {
      const KernelFacts &fact = facts[index];
      ++checked;
      launches += result.launches;
      outs() << "  " << fact.name << " (" << fact.strategy << ", "
             << result.launches << " launches): ";
      if (!result.failure.empty()) {
        ++failed;
        outs() << "FAILED\n    " << result.failure << "\n";
        continue;
      }
      if (result.bitwise) {
        ++bitwise;
        outs() << "bitwise\n";
      } else {
        outs() << format("max difference %.2e of the output's magnitude "
                         "(bound %.2e)\n",
                         result.error, result.bound);
      }
    }
    if (checked < facts.size())
      outs() << "  (" << facts.size() - checked
             << " kernels the entry never launches)\n";
    if (failed) {
      outs().flush();
      return fail(Twine(failed) + " of " + Twine(checked) +
                  " kernels differ from the CPU backend or broke a rule of "
                  "the GPU (the lines marked FAILED)");
    }
    outs() << "all " << checked << " kernels launched (" << launches
           << " launches compared) match the CPU backend: " << bitwise
           << " bitwise, " << checked - bitwise << " within their bound\n";
  } catch (const megemu::EmulationError &e) {
    return fail(e.what());
  } catch (const megrt::Error &e) {
    return fail(e.what());
  }
  return 0;
}
