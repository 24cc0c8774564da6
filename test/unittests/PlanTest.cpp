//===- PlanTest.cpp - cluster files, the step simulation, the estimator ---===//

#include "megc/Plan/Cluster.h"
#include "megc/Plan/Estimate.h"
#include "megc/Plan/Simulate.h"

#include "megc/Dialect/Meg/IR/MegDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <string>

using namespace megc;
using namespace megc::plan;

namespace {

const char *kCluster = R"({
  "name": "test",
  "device": {"name": "d", "peak_flops": {"bf16": 4e12, "f32": 1e12},
             "memory_bytes": 1e9, "memory_bandwidth": 1e9, "units": 4},
  "node": {"devices": 2, "link_bandwidth": 1e8, "link_latency": 1e-3},
  "network": {"bandwidth": 1e7, "latency": 2e-3},
  "efficiency": {"gemm": 0.5, "gemm_half_flops": 0, "attention": 0.25,
                 "memory": 0.5, "intra_node": 0.5, "inter_node": 0.25,
                 "launch_seconds": 1e-6, "graph_launch_seconds": 2e-7}
})";

std::string errorOf(const std::string &text) {
  llvm::Expected<Cluster> cluster = parseCluster(text, "c.json");
  if (cluster)
    return "";
  return llvm::toString(cluster.takeError());
}

std::string replaced(std::string text, const std::string &from,
                     const std::string &to) {
  size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return text.replace(at, from.size(), to);
}

TEST(PlanCluster, ReadsAndPrintsBack) {
  llvm::Expected<Cluster> cluster = parseCluster(kCluster, "c.json");
  ASSERT_TRUE(static_cast<bool>(cluster))
      << llvm::toString(cluster.takeError());
  EXPECT_EQ(cluster->device.peakFlops.at("bf16"), 4e12);
  EXPECT_EQ(cluster->peakFor("f16"), 1e12);
  EXPECT_EQ(cluster->node.devices, 2);
  EXPECT_EQ(cluster->efficiency.interNode, 0.25);
  llvm::Expected<Cluster> again =
      parseCluster(printCluster(*cluster), "printed.json");
  ASSERT_TRUE(static_cast<bool>(again)) << llvm::toString(again.takeError());
  EXPECT_EQ(printCluster(*again), printCluster(*cluster));
}

TEST(PlanCluster, ErrorsNameTheField) {
  EXPECT_EQ(errorOf(replaced(kCluster, "\"gemm\": 0.5", "\"gemmm\": 0.5")),
            "c.json: missing field 'efficiency.gemm'");
  EXPECT_EQ(errorOf(replaced(kCluster, "\"launch_seconds\": 1e-6",
                             "\"launch_seconds\": 1e-6, \"extra\": 1")),
            "c.json: unknown field 'efficiency.extra'");
  EXPECT_EQ(errorOf(replaced(kCluster, ", \"graph_launch_seconds\": 2e-7", "")),
            "c.json: missing field 'efficiency.graph_launch_seconds'");
  EXPECT_EQ(errorOf(replaced(kCluster, "\"memory_bandwidth\": 1e9",
                             "\"memory_bandwidth\": -1")),
            "c.json: device.memory_bandwidth: -1 is not physical (expected "
            "> 0)");
  EXPECT_EQ(errorOf(replaced(kCluster, "\"f32\": 1e12", "\"f32\": 0")),
            "c.json: device.peak_flops.f32: 0 is not physical (expected > 0)");
  EXPECT_EQ(errorOf(replaced(kCluster, "\"gemm\": 0.5", "\"gemm\": 1.5")),
            "c.json: efficiency.gemm: 1.5 is not physical (expected > 0 and "
            "<= 1)");
  EXPECT_EQ(errorOf(replaced(kCluster, "\"bf16\": 4e12, ", "\"fp4\": 4e12, ")),
            "c.json: device.peak_flops.fp4: unknown element type (expected "
            "bf16, f16 or f32)");
  EXPECT_EQ(errorOf(replaced(kCluster, "\"devices\": 2", "\"devices\": 2.5")),
            "c.json: node.devices: expected a whole number");
  EXPECT_EQ(errorOf("[1]"), "c.json: expected a JSON object");
}

// The costs follow from the file's peaks and efficiencies exactly.
TEST(PlanSimulate, CostsFromPeaksAndEfficiencies) {
  Cluster cluster = *parseCluster(kCluster, "c.json");
  CommandCost gemm{CostClass::Gemm, 1e12, 0, true, "bf16"};
  // 1e12 FLOPs at 0.5 of 4e12.
  EXPECT_DOUBLE_EQ(commandSeconds(gemm, cluster), 1e-6 + 0.5);
  cluster.efficiency.gemmHalfFlops = 1e12;
  // Half of the efficiency at the half size.
  EXPECT_DOUBLE_EQ(commandSeconds(gemm, cluster), 1e-6 + 1.0);
  CommandCost memory{CostClass::Memory, 1e9, 0, true, "f32"};
  EXPECT_DOUBLE_EQ(commandSeconds(memory, cluster), 1e-6 + 2.0);
  CommandCost intra{CostClass::Collective, 1e8, 3, true, "f32"};
  EXPECT_DOUBLE_EQ(commandSeconds(intra, cluster), 1e-6 + 3e-3 + 2.0);
  CommandCost inter{CostClass::Collective, 1e7, 3, false, "f32"};
  EXPECT_DOUBLE_EQ(commandSeconds(inter, cluster), 1e-6 + 6e-3 + 4.0);
  // Replayed from a captured graph: the graph's cost per command.
  EXPECT_DOUBLE_EQ(commandSeconds(memory, cluster, /*inGraph=*/true),
                   2e-7 + 2.0);
  EXPECT_TRUE(cluster.efficiency.graphsPay());
  cluster.efficiency.graphLaunchSeconds = cluster.efficiency.launchSeconds;
  EXPECT_FALSE(cluster.efficiency.graphsPay());
}

// A started collective runs beside the compute stream until its wait; the
// bytes sent are the runtime's count (an all-reduce of n bytes over 2
// ranks sends n); a group that spans nodes uses the network.
TEST(PlanSimulate, StartedCollectivesOverlapUntilTheirWait) {
  mlir::MLIRContext context;
  auto f32 = mlir::Float32Type::get(&context);
  auto type = mlir::RankedTensorType::get({1000}, f32);
  ProgramDesc program;
  program.mesh = MeshDesc{"world", {{"dp", 2}, {"tp", 2}}};
  program.submeshes = {{"dp"}, {"tp"}};
  EntryDesc entry;
  entry.name = "step";
  for (int i = 0; i < 4; ++i)
    entry.buffers.push_back(BufferDesc{BufferKind::Arena, 0, 0, type, -1});
  CollectiveCommand reduce{};
  reduce.kind = megrt::CollectiveId::AllReduce;
  reduce.submesh = 1; // tp: ranks 0 and 1, one node
  reduce.src = 0, reduce.dst = 1, reduce.count = 1000, reduce.async = true;
  entry.commands.push_back(reduce);
  entry.commands.push_back(LaunchCommand{0, {2, 3}});
  entry.commands.push_back(WaitCommand{0, 0, 1});
  CollectiveCommand across = reduce;
  across.submesh = 0; // dp: ranks 0 and 2, two nodes
  across.async = false;
  entry.commands.push_back(across);
  Cluster cluster = *parseCluster(kCluster, "c.json");
  Simulation sim = simulateEntry(program, entry, cluster);
  double launch = 1e-6;
  double reduceSeconds = launch + 2 * 1e-3 + 4000.0 / (1e8 * 0.5);
  double kernelSeconds = launch + 8000.0 / (1e9 * 0.5);
  double acrossSeconds = launch + 2 * 2e-3 + 4000.0 / (1e7 * 0.25);
  EXPECT_DOUBLE_EQ(sim.bytesSent, 8000.0);
  EXPECT_DOUBLE_EQ(sim.computeSeconds, kernelSeconds);
  EXPECT_DOUBLE_EQ(sim.commSeconds, reduceSeconds + acrossSeconds);
  EXPECT_DOUBLE_EQ(sim.stepSeconds,
                   std::max(reduceSeconds, kernelSeconds) + acrossSeconds);
  EXPECT_DOUBLE_EQ(sim.exposedCommSeconds, sim.stepSeconds - kernelSeconds);
}

// The commands of a captured CUDA graph pay the graph's cost per command,
// and the graph one launch; the others their own launch.
TEST(PlanSimulate, GraphRegionsReplayAtTheGraphCost) {
  mlir::MLIRContext context;
  auto type =
      mlir::RankedTensorType::get({1000}, mlir::Float32Type::get(&context));
  ProgramDesc program;
  EntryDesc entry;
  entry.name = "step";
  for (int i = 0; i < 2; ++i)
    entry.buffers.push_back(BufferDesc{BufferKind::Arena, 0, 0, type, -1});
  for (int i = 0; i < 4; ++i)
    entry.commands.push_back(LaunchCommand{0, {0, 1}});
  Cluster cluster = *parseCluster(kCluster, "c.json");
  double work = 8000.0 / (1e9 * 0.5);
  Simulation alone = simulateEntry(program, entry, cluster);
  EXPECT_DOUBLE_EQ(alone.stepSeconds, 4 * (1e-6 + work));
  // Commands 1 to 3 in one graph.
  entry.graphs.push_back(GraphRegionDesc{"layer", 1, 3, false, false});
  Simulation graphed = simulateEntry(program, entry, cluster);
  EXPECT_DOUBLE_EQ(graphed.stepSeconds,
                   (1e-6 + work) + 1e-6 + 3 * (2e-7 + work));
}

// A kernel is costed by what it writes and, of each input, what its body
// reads: a slice reads its part, an elementwise op the whole input.
TEST(PlanSimulate, KernelsCostWhatTheirBodiesRead) {
  mlir::MLIRContext context;
  context.loadDialect<mlir::func::FuncDialect, mlir::meg::MegDialect>();
  ProgramDesc program;
  program.kernelModule = mlir::parseSourceString<mlir::ModuleOp>(
      R"(func.func @slice(%a: tensor<1000xf32>) -> tensor<100xf32> {
           %0 = meg.slice %a [0] [100] [1] : tensor<1000xf32>
           return %0 : tensor<100xf32>
         }
         func.func @neg(%a: tensor<1000xf32>) -> tensor<1000xf32> {
           %0 = meg.neg %a : tensor<1000xf32>
           return %0 : tensor<1000xf32>
         })",
      &context);
  ASSERT_TRUE(program.kernelModule);
  program.kernels = {{"slice", 2}, {"neg", 2}};
  auto f32 = mlir::Float32Type::get(&context);
  EntryDesc entry;
  for (int64_t elements : {1000, 100, 1000})
    entry.buffers.push_back(
        BufferDesc{BufferKind::Arena, 0, 0,
                   mlir::RankedTensorType::get({elements}, f32), -1});
  entry.commands.push_back(LaunchCommand{0, {0, 1}});
  entry.commands.push_back(LaunchCommand{1, {0, 2}});
  Cluster cluster = *parseCluster(kCluster, "c.json");
  EXPECT_DOUBLE_EQ(commandCost(program, entry, 0, cluster).work, 800.0);
  EXPECT_DOUBLE_EQ(commandCost(program, entry, 1, cluster).work, 8000.0);
}

} // namespace

// Slices of a step whose time is 2 + 0.5 n + m (1 + 3 n) (its compute
// 0.25 n + m (1 + 3 n): a micro-batch adds 1 + 3 n), state 10 + 4 n
// and arena 5 + 7 n (plus 2 + n with a second micro-batch), of which 1 + 3 n
// live at the loss (3 per layer kept for the backward), for n layers and m
// micro-batches: the estimate extends them exactly, with a pipeline's
// M + P - 1 slots and its micro-batches in flight (each more one keeps
// 3 per layer, not the whole arena slope of 7).
TEST(PlanEstimate, ExtendsSlicesAlongLayersAndMicroBatches) {
  SliceGrid grid;
  grid.layers = 2;
  for (int extra : {0, 1})
    for (int micro : {1, 2}) {
      double n = 2 + extra, m = micro;
      SliceMeasure &at = grid.at[extra][micro - 1];
      at.stepSeconds = 2 + 0.5 * n + m * (1 + 3 * n);
      at.computeSeconds = 0.25 * n + m * (1 + 3 * n);
      at.stateBytes = 10 + 4 * n;
      at.arenaBytes = 5 + 7 * n + (micro > 1 ? 2 + n : 0);
      at.heldBytes = 1 + 3 * n;
    }
  LayoutShape shape;
  shape.layersPerStage = 10, shape.microBatches = 8;
  LayoutEstimate flat = estimateLayout(grid, shape);
  EXPECT_DOUBLE_EQ(flat.stepSeconds, 7 + 8 * 31);
  EXPECT_DOUBLE_EQ(flat.stateBytes, 50);
  EXPECT_DOUBLE_EQ(flat.arenaBytes, 5 + 70 + 12);
  EXPECT_DOUBLE_EQ(flat.peakBytes(), 50 + 87);

  shape.slots = 8 + 4 - 1, shape.inFlight = 4;
  LayoutEstimate piped = estimateLayout(grid, shape);
  EXPECT_DOUBLE_EQ(piped.stepSeconds, 7 + 11 * 31);
  EXPECT_DOUBLE_EQ(piped.arenaBytes, 5 + 7 * 10 + 12 + 3 * 10 * 3);

  // One micro-batch: nothing accumulates.
  shape = LayoutShape();
  shape.layersPerStage = 2;
  EXPECT_DOUBLE_EQ(estimateLayout(grid, shape).arenaBytes, 19);
  EXPECT_DOUBLE_EQ(estimateLayout(grid, shape).stepSeconds,
                   grid.at[0][0].stepSeconds);
}
