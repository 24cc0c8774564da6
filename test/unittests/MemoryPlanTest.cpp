//===- MemoryPlanTest.cpp - the static arena plan of a command list -------===//

#include "megc/Compiler/Program.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

using namespace megc;

namespace {

/// An entry over f32 buffers of the given element counts (arena unless
/// `kinds` says otherwise) running `commands`.
EntryDesc makeEntry(mlir::MLIRContext &context,
                    std::vector<std::pair<int64_t, BufferKind>> buffers,
                    std::vector<Command> commands) {
  EntryDesc entry;
  entry.name = "train_step";
  auto f32 = mlir::Float32Type::get(&context);
  for (auto [elements, kind] : buffers) {
    BufferDesc buffer;
    buffer.kind = kind;
    buffer.type = mlir::RankedTensorType::get({elements}, f32);
    entry.buffers.push_back(buffer);
  }
  TensorSpec loss;
  loss.name = "loss";
  loss.type = mlir::RankedTensorType::get({}, f32);
  entry.outputs.push_back(loss);
  entry.commands = std::move(commands);
  return entry;
}

LaunchCommand launch(std::vector<uint32_t> args) {
  auto inputs = static_cast<uint32_t>(args.size() - 1);
  return {0, std::move(args), inputs};
}

/// Plans `entry` as the only entry of a program with one kernel.
MemoryPlan plan(EntryDesc entry) {
  ProgramDesc program;
  program.kernels.push_back({"kernel", 3});
  program.entries.push_back(std::move(entry));
  EXPECT_TRUE(succeeded(planMemory(program)));
  return program.entries.front().plan;
}

} // namespace

// A forward keeps an activation (buffer 1, 100 floats) for its backward;
// the loss (buffer 3) is computed between them and copied into the output
// (buffer 5) only at the end, after the backward's scratch (buffer 4, 1000
// floats) is gone: what is live at the loss is the activation, the
// forward's last value and the loss, not the backward's scratch.
TEST(MemoryPlan, LiveAtTheLossFollowsTheCopyBackToTheLoss) {
  mlir::MLIRContext context;
  EntryDesc entry = makeEntry(
      context,
      {{10, BufferKind::Input},
       {100, BufferKind::Arena},
       {10, BufferKind::Arena},
       {1, BufferKind::Arena},
       {1000, BufferKind::Arena},
       {1, BufferKind::Output}},
      {launch({0, 1}),    // forward: the activation
       launch({1, 2}),    // forward: the last value
       launch({2, 3}),    // the loss
       launch({3, 4}),    // backward: scratch
       launch({4, 1, 2}), // backward reads the activation
       CopyCommand{3, 5, 4}});
  MemoryPlan planned = plan(entry);
  EXPECT_EQ(planned.liveAtLossBytes, (100 + 10 + 1) * 4u);
  EXPECT_GE(planned.arenaBytes, (1000 + 100 + 10 + 1) * 4u);

  // Averaged over the data-parallel ranks into the output (an all-reduce
  // at the end): followed back the same way.
  CollectiveCommand average;
  average.kind = CollectiveCommand::Kind::AllReduce;
  average.src = 3, average.dst = 5, average.count = 1;
  entry.commands.back() = average;
  EXPECT_EQ(plan(entry).liveAtLossBytes, (100 + 10 + 1) * 4u);

  // No output named loss: nothing is measured.
  entry.outputs.front().name = "logits";
  EXPECT_EQ(plan(entry).liveAtLossBytes, 0u);
}
