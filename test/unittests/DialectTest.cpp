//===- DialectTest.cpp - meg dialect C++ API tests ---------------------===//
//
// Type inference through the builders, attribute printing, and the
// collective group check, exercised from C++.
//
//===----------------------------------------------------------------------===//

#include "megc/Dialect/Meg/IR/MegOps.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace mlir::meg;

namespace {

class MegDialectTest : public ::testing::Test {
protected:
  MegDialectTest() : builder(&context) {
    context.loadDialect<MegDialect, func::FuncDialect, arith::ArithDialect>();
    module = ModuleOp::create(builder.getUnknownLoc());
    auto func = func::FuncOp::create(builder, builder.getUnknownLoc(), "f",
                                     builder.getFunctionType({}, {}));
    module->push_back(func);
    builder.setInsertionPointToStart(func.addEntryBlock());
  }

  /// A placeholder value of the given type.
  Value value(ArrayRef<int64_t> shape, Type element = {}) {
    Type type = RankedTensorType::get(shape, element ? element
                                                     : builder.getF32Type());
    return arith::ConstantOp::create(
        builder, builder.getUnknownLoc(), type,
        SplatElementsAttr::get(cast<ShapedType>(type),
                               builder.getZeroAttr(
                                   cast<ShapedType>(type).getElementType())));
  }

  static ArrayRef<int64_t> shape(Value v) {
    return cast<RankedTensorType>(v.getType()).getShape();
  }

  MLIRContext context;
  OpBuilder builder;
  OwningOpRef<ModuleOp> module;
};

TEST_F(MegDialectTest, MatmulInfersBatchedShapeWithTransposes) {
  Location loc = builder.getUnknownLoc();
  Value q = value({2, 8, 128, 64}), k = value({2, 8, 96, 64});
  auto scores = MatmulOp::create(builder, loc, q, k, /*transpose_lhs=*/false,
                                 /*transpose_rhs=*/true);
  EXPECT_EQ(shape(scores), (ArrayRef<int64_t>{2, 8, 128, 96}));
  Value w = value({64, 32});
  auto shared = MatmulOp::create(builder, loc, q, w, false, false);
  EXPECT_EQ(shape(shared), (ArrayRef<int64_t>{2, 8, 128, 32}));
}

TEST_F(MegDialectTest, BinaryOpsBroadcastLikeNumPy) {
  Location loc = builder.getUnknownLoc();
  auto sum = AddOp::create(builder, loc, value({2, 1, 64}), value({16, 1}));
  EXPECT_EQ(shape(sum), (ArrayRef<int64_t>{2, 16, 64}));
}

TEST_F(MegDialectTest, InferenceRejectsMismatchedContraction) {
  std::string message;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
    message = diag.str();
    return success();
  });
  SmallVector<Type> inferred;
  Value lhs = value({4, 8}), rhs = value({16, 4});
  MatmulOp::Adaptor adaptor({lhs, rhs});
  EXPECT_TRUE(failed(MatmulOp::inferReturnTypes(
      &context, builder.getUnknownLoc(), adaptor, inferred)));
  EXPECT_NE(message.find("over K = 8"), std::string::npos) << message;
}

TEST_F(MegDialectTest, AttentionInfersGroupedQueryShape) {
  Location loc = builder.getUnknownLoc();
  auto out = AttentionOp::create(builder, loc, value({2, 16, 8, 32}),
                                 value({2, 16, 2, 32}), value({2, 16, 2, 48}),
                                 /*positions=*/Value(), builder.getUnitAttr(),
                                 builder.getF64FloatAttr(0.125), UnitAttr());
  EXPECT_EQ(shape(out.getResult()), (ArrayRef<int64_t>{2, 16, 8, 48}));
  EXPECT_FALSE(out.getStats());
  // With `stats`, the softmax statistics: [batch, heads, seq_q] f32.
  auto kept = AttentionOp::create(
      builder, loc, value({2, 16, 8, 32}), value({2, 16, 2, 32}),
      value({2, 16, 2, 48}), /*positions=*/Value(), builder.getUnitAttr(),
      builder.getF64FloatAttr(0.125), builder.getUnitAttr());
  EXPECT_EQ(shape(kept.getStats()), (ArrayRef<int64_t>{2, 8, 16}));
  EXPECT_TRUE(cast<RankedTensorType>(kept.getStats().getType())
                  .getElementType()
                  .isF32());
}

/// Prints an attribute to a string.
std::string print(Attribute attr) {
  std::string text;
  llvm::raw_string_ostream os(text);
  attr.print(os);
  return text;
}

TEST_F(MegDialectTest, FloatParametersPrintShortestRoundTrippingForm) {
  auto adamw = AdamWAttr::get(&context, APFloat(3e-4), APFloat(0.9),
                              APFloat(0.95), APFloat(1e-8), APFloat(0.1));
  EXPECT_EQ(print(adamw), "#meg.adamw<lr = 0.0003, beta1 = 0.9, beta2 = 0.95, "
                          "eps = 1.0e-08, weight_decay = 0.1>");
  double third = 1.0 / 3.0;
  auto init = InitAttr::get(&context, InitKind::normal, APFloat(third));
  Attribute parsed = parseAttribute(print(init), &context);
  ASSERT_TRUE(parsed);
  EXPECT_EQ(cast<InitAttr>(parsed).getScale().convertToDouble(), third);
}

TEST_F(MegDialectTest, CollectiveOverUnregisteredGroupNamesRegisteredOnes) {
  const char *source = R"mlir(
    meg.mesh @world [dp_outer = 2, dp_shard = 4]
    meg.submesh @world[dp_shard]
    func.func @f(%x: tensor<8xf32>) -> tensor<8xf32> {
      %y = meg.all_reduce %x over @world[dp_outer, dp_shard] sum : tensor<8xf32>
      return %y : tensor<8xf32>
    })mlir";
  std::string message;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
    message = diag.str();
    return success();
  });
  OwningOpRef<ModuleOp> parsed = parseSourceString<ModuleOp>(source, &context);
  EXPECT_FALSE(parsed);
  EXPECT_NE(message.find("@world[dp_outer, dp_shard], which is not a "
                         "registered submesh; registered: @world[dp_shard]"),
            std::string::npos)
      << message;
}

} // namespace
