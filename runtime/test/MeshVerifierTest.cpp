// Verification of multi-rank programs: the mesh and submeshes, sharded
// parameters, split inputs, collectives and their waits, each broken
// artifact with the message that names it.
#include "ArtifactBuilder.h"
#include "SamplePrograms.h"
#include "megrt/Error.h"
#include "megrt/Program.h"

#include <functional>
#include <gtest/gtest.h>

namespace megrt::test {
namespace {

/// dataParallelProgram(2, 2) broken by `breakIt`: the error, or "(loaded)".
std::string errorAfter(const std::function<void(ProgramDesc &)> &breakIt) {
  ProgramDesc desc = dataParallelProgram(2, 2);
  breakIt(desc);
  try {
    Program::fromBytes(buildArtifact(desc));
  } catch (const Error &error) {
    return error.what();
  }
  return "(loaded)";
}

std::vector<CommandDesc> &commands(ProgramDesc &desc) {
  return desc.entries[0].commands;
}
CollectiveDesc &collective(ProgramDesc &desc, size_t index) {
  return std::get<CollectiveDesc>(commands(desc)[index]);
}

TEST(MeshVerifier, AcceptsTheDataParallelSample) {
  EXPECT_EQ(errorAfter([](ProgramDesc &) {}), "(loaded)");
}

TEST(MeshVerifier, MeshAxes) {
  EXPECT_EQ(errorAfter([](ProgramDesc &d) { d.mesh->name = ""; }),
            "the mesh has an empty name");
  EXPECT_EQ(errorAfter([](ProgramDesc &d) {
              d.mesh->axes.clear();
              d.submeshes.clear();
            }),
            "mesh @world has no axes");
  EXPECT_EQ(errorAfter([](ProgramDesc &d) { d.mesh->axes[1].first = ""; }),
            "mesh @world: axis 1 has an empty name");
  EXPECT_EQ(
      errorAfter([](ProgramDesc &d) { d.mesh->axes[1].first = "dp_outer"; }),
      "mesh @world: axis name 'dp_outer' is used twice");
  EXPECT_EQ(errorAfter([](ProgramDesc &d) { d.mesh->axes[0].second = 0; }),
            "mesh @world: axis 'dp_outer' has size 0, expected at least 1");
  EXPECT_EQ(errorAfter([](ProgramDesc &d) {
              d.mesh->axes[0].second = 1 << 16;
              d.mesh->axes[1].second = 1 << 16;
            }),
            "mesh @world: more than 2147483647 ranks");
}

TEST(MeshVerifier, SubmeshAxes) {
  EXPECT_EQ(errorAfter([](ProgramDesc &d) { d.submeshes[2] = {}; }),
            "submesh 2 has no axes");
  EXPECT_EQ(errorAfter([](ProgramDesc &d) { d.submeshes[2] = {"tp"}; }),
            "submesh 2: 'tp' is not an axis of mesh @world (axes dp_outer, "
            "dp_shard)");
  EXPECT_EQ(errorAfter([](ProgramDesc &d) {
              d.submeshes[1] = {"dp_shard", "dp_shard"};
            }),
            "submesh 1: axis 'dp_shard' is listed twice");
}

TEST(MeshVerifier, MultiRankWorkNeedsAMesh) {
  EXPECT_EQ(errorAfter([](ProgramDesc &d) { d.mesh.reset(); }),
            "the program has 3 submeshes but no mesh to take their axes "
            "from");
  ProgramDesc desc = linearProgram();
  desc.params[1].sharding = ShardingDesc{0, {3}};
  try {
    Program::fromBytes(buildArtifact(desc));
    FAIL() << "expected an error";
  } catch (const Error &error) {
    EXPECT_EQ(std::string(error.what()),
              "parameter 'b': sharding: refers to submesh 0, but the program "
              "has no mesh (a multi-rank program needs one)");
  }
}

TEST(MeshVerifier, ShardedParameters) {
  EXPECT_EQ(
      errorAfter([](ProgramDesc &d) { d.params[0].sharding->submesh = 3; }),
      "parameter 'w': sharding: submesh index 3 is out of range "
      "(submesh count 3)");
  // Pieces of 8 on 2 ranks hold at most 16 elements.
  EXPECT_EQ(errorAfter([](ProgramDesc &d) {
              d.params[0].sharding->fullShape = {17};
              d.params[2].sharding->fullShape = {17};
            }),
            "parameter 'w': sharding: pieces of 8 elements on the submesh 0 "
            "(dp_shard: 2 ranks) cannot hold full shape [17] (17 elements)");
  EXPECT_EQ(errorAfter(
                [](ProgramDesc &d) { d.params[0].sharding->fullShape = {-1}; }),
            "parameter 'w': sharding full_shape: expected non-negative "
            "dimensions, found shape [-1]");
  // Padding need not be minimal.
  EXPECT_EQ(
      errorAfter([](ProgramDesc &d) { d.params[0].sharding->fullShape = {2}; }),
      "(loaded)");
}

TEST(MeshVerifier, BlockShardedParameters) {
  // Parameter 'w' [8] as one of the two blocks of a tensor.
  auto blocks = [](ProgramDesc &d, Shape fullShape, int dim) {
    d.params[0].sharding->fullShape = fullShape;
    d.params[0].sharding->dim = dim;
  };
  EXPECT_EQ(errorAfter([&](ProgramDesc &d) { blocks(d, {16}, 0); }),
            "(loaded)");
  EXPECT_EQ(errorAfter([&](ProgramDesc &d) { blocks(d, {16}, 1); }),
            "parameter 'w': sharding: dim 1 is out of range for full shape "
            "[16]");
  EXPECT_EQ(errorAfter([&](ProgramDesc &d) { blocks(d, {15}, 0); }),
            "parameter 'w': sharding: dim 0 of full shape [15] does not split "
            "into the submesh 0 (dp_shard: 2 ranks)");
  EXPECT_EQ(errorAfter([&](ProgramDesc &d) { blocks(d, {18}, 0); }),
            "parameter 'w': sharding: a block along dim 0 of full shape [18] "
            "on the submesh 0 (dp_shard: 2 ranks) has shape [9], found [8]");
  EXPECT_EQ(errorAfter([&](ProgramDesc &d) { blocks(d, {16}, -2); }),
            "parameter 'w': sharding: invalid dim -2 (-1 means flattened)");
  // Pieces (over dp_shard, submesh 0) of blocks over submesh 2 (dp_outer).
  auto pieces = [](ProgramDesc &d, Shape fullShape, int blockSubmesh) {
    d.params[0].sharding->fullShape = fullShape;
    d.params[0].sharding->dim = 0;
    d.params[0].sharding->blockSubmesh = blockSubmesh;
  };
  EXPECT_EQ(errorAfter([&](ProgramDesc &d) { pieces(d, {4, 8}, 2); }),
            "(loaded)");
  EXPECT_EQ(errorAfter([&](ProgramDesc &d) { pieces(d, {3, 8}, 2); }),
            "parameter 'w': sharding: dim 0 of full shape [3,8] does not "
            "split into the submesh 2 (dp_outer: 2 ranks)");
  EXPECT_EQ(errorAfter([&](ProgramDesc &d) { pieces(d, {4, 9}, 2); }),
            "parameter 'w': sharding: pieces of 8 elements on the submesh 0 "
            "(dp_shard: 2 ranks) cannot hold a block of shape [2,9] (18 "
            "elements)");
  EXPECT_EQ(errorAfter([&](ProgramDesc &d) { pieces(d, {4, 8}, 7); }),
            "parameter 'w': sharding block_submesh: submesh index 7 is out "
            "of range (submesh count 3)");
  // A copy is laid out as its source.
  EXPECT_EQ(errorAfter([&](ProgramDesc &d) {
              d.params[0].sharding->fullShape = {16};
              d.params[0].sharding->dim = 0;
              d.params[2].initSource = "w";
              d.params[2].sharding->fullShape = {16};
            }),
            "parameter 'piece': copies 'w', sharded over submesh 0 with full "
            "shape [16] in blocks along dim 0, but is sharded over submesh 0 "
            "with full shape [16]");
  // A block cannot copy a replicated parameter.
  EXPECT_EQ(errorAfter([](ProgramDesc &d) {
              d.params[1].shape = {4, 5};
              d.params[2].shape = {2, 5};
              d.params[2].sharding->fullShape = {4, 5};
              d.params[2].sharding->dim = 0;
            }),
            "parameter 'piece': copies 'full', which is not sharded, but is "
            "a block of a sharded tensor");
}

TEST(MeshVerifier, ShardedCopies) {
  // "piece" copies the replicated "full" [3,5]: its full shape must match.
  EXPECT_EQ(errorAfter(
                [](ProgramDesc &d) { d.params[2].sharding->fullShape = {15}; }),
            "parameter 'piece': copies 'full' of shape [3,5] but is sharded "
            "with full shape [15]");
  // A copy sharded like its source copies elementwise.
  EXPECT_EQ(errorAfter([](ProgramDesc &d) { d.params[2].initSource = "w"; }),
            "(loaded)");
  EXPECT_EQ(errorAfter([](ProgramDesc &d) {
              d.params[2].initSource = "w";
              d.params[2].sharding->submesh = 1;
              d.params[2].shape = {4};
            }),
            "parameter 'piece': copies 'w', sharded over submesh 0 with full "
            "shape [3,5], but is sharded over submesh 1 with full shape "
            "[3,5]");
  EXPECT_EQ(errorAfter([](ProgramDesc &d) {
              d.params[1].init = fb::InitKind::copy;
              d.params[1].initSource = "w";
              d.params[2].initSource = "";
              d.params[2].init = fb::InitKind::zeros;
            }),
            "parameter 'full': copies 'w', which is sharded, but is not "
            "sharded itself");
}

TEST(MeshVerifier, SplitInputs) {
  EXPECT_EQ(
      errorAfter([](ProgramDesc &d) { d.entries[0].inputs[0].split = 3; }),
      "entry 'step': input 'x': split: submesh index 3 is out of range "
      "(submesh count 3)");
  EXPECT_EQ(
      errorAfter([](ProgramDesc &d) { d.entries[0].inputs[0].split = -2; }),
      "entry 'step': input 'x': invalid split -2 (-1 means not split)");
  EXPECT_EQ(
      errorAfter([](ProgramDesc &d) { d.entries[0].outputs[1].split = 0; }),
      "entry 'step': output 'sum': split applies to entry inputs only");
  ProgramDesc desc = dataParallelProgram(2, 2);
  desc.entries[0].inputs.push_back({"scalar", fb::DType::f32, {}, 0});
  try {
    Program::fromBytes(buildArtifact(desc));
    FAIL() << "expected an error";
  } catch (const Error &error) {
    EXPECT_EQ(std::string(error.what()),
              "entry 'step': input 'scalar': a split input needs a dim 0, "
              "found a scalar");
  }
}

TEST(MeshVerifier, CollectiveOperands) {
  EXPECT_EQ(errorAfter([](ProgramDesc &d) { collective(d, 1).submesh = 7; }),
            "entry 'step', command 1 (collective): submesh index 7 is out of "
            "range (submesh count 3)");
  EXPECT_EQ(errorAfter([](ProgramDesc &d) { collective(d, 1).src = 10; }),
            "entry 'step', command 1 (collective): source buffer index 10 is "
            "out of range (buffer count 10)");
  EXPECT_EQ(errorAfter([](ProgramDesc &d) {
              collective(d, 1).dtype = fb::DType::bf16;
            }),
            "entry 'step', command 1 (collective): source (buffer 0, "
            "f32[2,4]) does not have the collective's dtype bf16");
  EXPECT_EQ(errorAfter([](ProgramDesc &d) {
              collective(d, 1).kind = "all_gather_everything";
            }),
            "entry 'step', command 1 (collective): unknown collective "
            "'all_gather_everything' (megrt/Collectives.def lists the ones "
            "this runtime runs)");
  EXPECT_EQ(errorAfter([](ProgramDesc &d) { collective(d, 1).params = {1}; }),
            "entry 'step', command 1 (collective): the all_reduce takes 0 "
            "integer parameter(s), the command has 1");
  EXPECT_EQ(errorAfter([](ProgramDesc &d) {
              collective(d, 1).reduce = static_cast<fb::ReduceOp>(5);
            }),
            "entry 'step', command 1 (collective): invalid reduce value 5");
}

TEST(MeshVerifier, CollectiveCountsFitTheBuffers) {
  // all_gather of w (8 elements) into gathered (16): 9 need 18.
  EXPECT_EQ(errorAfter([](ProgramDesc &d) { collective(d, 0).count = 9; }),
            "entry 'step', command 0 (collective): the all_gather of 9 f32 "
            "elements per rank over submesh 0 (dp_shard: 2 ranks) needs 9 "
            "elements in its source (buffer 2, f32[8]), which has 8");
  // reduce_scatter of 4 per rank reads 8 from x as f32[8]: 5 need 10.
  EXPECT_EQ(errorAfter([](ProgramDesc &d) { collective(d, 3).count = 5; }),
            "entry 'step', command 3 (collective): the reduce_scatter of 5 "
            "f32 elements per rank over submesh 0 (dp_shard: 2 ranks) needs "
            "10 elements in its source (buffer 1, f32[8]), which has 8");
  EXPECT_EQ(errorAfter([](ProgramDesc &d) { collective(d, 1).dst = 6; }),
            "entry 'step', command 1 (collective): the all_reduce of 8 f32 "
            "elements per rank over submesh 1 (dp_outer, dp_shard: 4 ranks) "
            "needs 8 elements in its destination (buffer 6, f32[4]), which "
            "has 4");
  // A slice reads the whole source: count x group size.
  EXPECT_EQ(errorAfter([](ProgramDesc &d) { collective(d, 4).count = 5; }),
            "entry 'step', command 4 (collective): the shard_slice of 5 f32 "
            "elements per rank over submesh 0 (dp_shard: 2 ranks) needs 10 "
            "elements in its source (buffer 1, f32[8]), which has 8");
  EXPECT_EQ(errorAfter([](ProgramDesc &d) {
              collective(d, 1).count = uint64_t(1) << 62;
            }),
            "entry 'step', command 1 (collective): count 4611686018427387904 "
            "x 4 ranks overflows");
}

TEST(MeshVerifier, ReductionsNeedFloatingPoint) {
  auto withIntegers = [](const char *kind) {
    return [kind](ProgramDesc &d) {
      EntryDesc &step = d.entries[0];
      step.inputs.push_back({"ids", fb::DType::i32, {8}});
      step.outputs.push_back({"ids_out", fb::DType::i32, {16}});
      step.buffers.push_back(inputBuffer(1, {8}, fb::DType::i32));
      step.buffers.push_back(outputBuffer(6, {16}, fb::DType::i32));
      step.commands.push_back(CollectiveDesc{kind, 0, fb::ReduceOp::sum,
                                             fb::DType::i32, 8, 10, 11});
    };
  };
  EXPECT_EQ(errorAfter(withIntegers("all_gather")), "(loaded)");
  EXPECT_EQ(errorAfter(withIntegers("all_reduce")),
            "entry 'step', command 9 (collective): all_reduce reduces, which "
            "needs a floating-point dtype, found i32");
}

TEST(MeshVerifier, OnlyAnAllReduceRunsInPlace) {
  EXPECT_EQ(errorAfter([](ProgramDesc &d) { collective(d, 3).dst = 1; }),
            "entry 'step', command 3 (collective): source and destination of "
            "the reduce_scatter overlap in memory; only an all_reduce may run "
            "in place (same address)");
  EXPECT_EQ(errorAfter([](ProgramDesc &d) {
              d.entries[0].buffers.push_back(arenaBuffer(16, {2, 4}));
              d.entries[0].arenaBytes = 48;
              collective(d, 6).dst = 10;
            }),
            "entry 'step', command 6 (collective): source and destination of "
            "the all_reduce overlap in memory; only an all_reduce may run in "
            "place (same address)");
}

TEST(MeshVerifier, EachAsyncCollectiveIsWaitedForOnce) {
  EXPECT_EQ(errorAfter([](ProgramDesc &d) {
              std::get<WaitDesc>(commands(d)[8]).collective = 8;
            }),
            "entry 'step', command 8 (wait): waits for command 8, which is "
            "not an earlier command");
  EXPECT_EQ(errorAfter([](ProgramDesc &d) {
              std::get<WaitDesc>(commands(d)[8]).collective = 1;
            }),
            "entry 'step', command 8 (wait): waits for command 1, which is "
            "not an async collective");
  EXPECT_EQ(errorAfter([](ProgramDesc &d) {
              std::get<WaitDesc>(commands(d)[8]).collective = 5;
            }),
            "entry 'step', command 8 (wait): waits for command 5, which is "
            "not an async collective");
  EXPECT_EQ(
      errorAfter([](ProgramDesc &d) { commands(d).push_back(WaitDesc{0}); }),
      "entry 'step', command 9 (wait): command 0 was already waited "
      "for by command 8");
  EXPECT_EQ(errorAfter([](ProgramDesc &d) { commands(d).pop_back(); }),
            "entry 'step', command 0 (collective): the async all_gather is "
            "never waited for; the entry must end with no collective pending");
}

// A send and a receive of one batch (params: peer, batch, size), each
// waited for after both are issued.
void addTransferBatch(ProgramDesc &d, std::vector<int64_t> sendParams,
                      std::vector<int64_t> recvParams, bool waitEarly) {
  EntryDesc &step = d.entries[0];
  step.inputs.push_back({"act", fb::DType::f32, {8}});
  step.outputs.push_back({"grad", fb::DType::f32, {8}});
  step.buffers.push_back(inputBuffer(1, {8}, fb::DType::f32));
  step.buffers.push_back(outputBuffer(6, {8}, fb::DType::f32));
  step.commands.push_back(CollectiveDesc{"send", 0, fb::ReduceOp::sum,
                                         fb::DType::f32, 8, 10, 10, true,
                                         std::move(sendParams)});
  if (waitEarly)
    step.commands.push_back(WaitDesc{9});
  step.commands.push_back(CollectiveDesc{"recv", 0, fb::ReduceOp::sum,
                                         fb::DType::f32, 8, 11, 11, true,
                                         std::move(recvParams)});
  if (!waitEarly)
    step.commands.push_back(WaitDesc{9});
  step.commands.push_back(WaitDesc{waitEarly ? 11u : 10u});
}

TEST(MeshVerifier, TransferBatchesAreWholeBeforeTheirWaits) {
  EXPECT_EQ(errorAfter([](ProgramDesc &d) {
              addTransferBatch(d, {1, 0, 2}, {1, 0, 2}, false);
            }),
            "(loaded)");
  EXPECT_EQ(errorAfter([](ProgramDesc &d) {
              addTransferBatch(d, {1, -1, 1}, {1, -1, 1}, true);
            }),
            "(loaded)");
  EXPECT_EQ(
      errorAfter([](ProgramDesc &d) {
        addTransferBatch(d, {1, 0, 2}, {1, 0, 2}, true);
      }),
      "entry 'step', command 10 (wait): waits for command 9 of transfer batch "
      "0 before its 1 remaining transfer(s) are issued (the batch starts "
      "with its last)");
  EXPECT_EQ(
      errorAfter([](ProgramDesc &d) {
        addTransferBatch(d, {1, 0, 2}, {1, -1, 1}, false);
      }),
      "entry 'step', command 11 (wait): waits for command 9 of transfer batch "
      "0 before its 1 remaining transfer(s) are issued (the batch starts "
      "with its last)");
  EXPECT_EQ(
      errorAfter([](ProgramDesc &d) {
        addTransferBatch(d, {1, 0, 2}, {1, 0, 3}, false);
      }),
      "entry 'step', command 10 (collective): batch 0 was of 2 transfers on "
      "submesh 0, here of 3 on submesh 0");
  EXPECT_EQ(errorAfter([](ProgramDesc &d) {
              addTransferBatch(d, {9, -1, 1}, {1, -1, 1}, false);
            }),
            "entry 'step', command 9 (collective): peer 9 is not a rank of its "
            "2-rank group");
  EXPECT_EQ(errorAfter([](ProgramDesc &d) {
              addTransferBatch(d, {1, 0, 1}, {1, -1, 1}, false);
            }),
            "entry 'step', command 9 (collective): batch 0 of 1 transfers; a "
            "transfer alone is batch -1 of 1, a batch has an index >= 0 and "
            "two transfers or more");
}

TEST(MeshVerifier, AsyncCollectivesAreWaitedForInTheirGraphRegion) {
  // Copies, slices and blocking collectives may be captured, and so may an
  // async collective with its wait.
  for (auto [name, first, count] :
       {std::tuple{"local", 4u, 2u}, {"layer", 5u, 3u}, {"step", 0u, 9u}})
    EXPECT_EQ(errorAfter([&](ProgramDesc &d) {
                d.entries[0].graphs = {{name, first, count}};
              }),
              "(loaded)")
        << name;
  EXPECT_EQ(errorAfter([](ProgramDesc &d) {
              d.entries[0].graphs = {{"tail", 7, 2}};
            }),
            "entry 'step', graph region 'tail': command 8 (wait) completes "
            "command 0, which is outside the region; an async collective "
            "and its wait must be in one region");
  EXPECT_EQ(errorAfter([](ProgramDesc &d) {
              d.entries[0].graphs = {{"head", 0, 2}};
            }),
            "entry 'step', graph region 'head': command 0 (async "
            "collective) is waited for by command 8, which is outside the "
            "region; an async collective and its wait must be in one "
            "region");
}

} // namespace
} // namespace megrt::test
