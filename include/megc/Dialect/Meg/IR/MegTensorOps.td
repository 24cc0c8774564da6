//===- MegTensorOps.td - elementwise and data movement ops -*- tablegen -*-===//
//
// Elementwise arithmetic with broadcasting, unary math, casts and the ops
// that move data: reshape, transpose, strided slice, concat, split, iota,
// broadcast and reductions.
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_DIALECT_MEG_IR_MEGTENSOROPS_TD
#define MEGC_DIALECT_MEG_IR_MEGTENSOROPS_TD

include "megc/Dialect/Meg/IR/MegAttrs.td"
include "megc/Dialect/Meg/IR/MegInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

class Meg_BinaryOp<string mnemonic, string desc, list<Trait> traits = []>
    : Meg_Op<mnemonic, !listconcat(traits, [Pure, InferTypeOpAdaptor],
                                   Meg_ElementwiseTraits)> {
  let summary = "Elementwise " # desc # " with broadcasting";
  let description = [{
    Applies the operation elementwise after broadcasting both operands to a
    common shape with NumPy rules (trailing dimensions aligned; a dimension
    of size 1 stretches). Both operands have the same element type.

    ```mlir
    %r = meg.}] # mnemonic # [{ %a, %b : tensor<2x8x64xf32>, tensor<1x64xf32>
    ```
  }];
  let arguments = (ins Meg_Tensor:$lhs, Meg_Tensor:$rhs);
  let results = (outs Meg_Tensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs)";
}

def Meg_AddOp : Meg_BinaryOp<"add", "addition", [Commutative, Meg_VJP]> {
  let hasFolder = 1;
}
def Meg_SubOp : Meg_BinaryOp<"sub", "subtraction", [Meg_VJP]> { let hasFolder = 1; }
def Meg_MulOp : Meg_BinaryOp<"mul", "multiplication", [Commutative, Meg_VJP]> {
  let hasFolder = 1;
  let hasCanonicalizer = 1;
}
def Meg_DivOp : Meg_BinaryOp<"div", "division", [Meg_VJP]> { let hasFolder = 1; }
def Meg_MaxOp : Meg_BinaryOp<"max", "maximum", [Commutative]>;

class Meg_UnaryOp<string mnemonic, string desc, list<Trait> traits = []>
    : Meg_Op<mnemonic, !listconcat(traits, [Pure, SameOperandsAndResultType,
                                            Meg_VJP], Meg_ElementwiseTraits)> {
  let summary = "Elementwise " # desc;
  let description = [{
    Applies the operation to every element; the result has the operand's
    type. Floating-point element types only.

    ```mlir
    %r = meg.}] # mnemonic # [{ %x : tensor<2048x64xf32>
    ```
  }];
  let arguments = (ins Meg_FloatTensor:$input);
  let results = (outs Meg_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Meg_NegOp : Meg_UnaryOp<"neg", "negation"> { let hasFolder = 1; }
def Meg_ExpOp : Meg_UnaryOp<"exp", "exponential">;
def Meg_LogOp : Meg_UnaryOp<"log", "natural logarithm">;
def Meg_CosOp : Meg_UnaryOp<"cos", "cosine">;
def Meg_SinOp : Meg_UnaryOp<"sin", "sine">;
def Meg_SqrtOp : Meg_UnaryOp<"sqrt", "square root">;
def Meg_RsqrtOp : Meg_UnaryOp<"rsqrt", "reciprocal square root">;
def Meg_TanhOp : Meg_UnaryOp<"tanh", "hyperbolic tangent">;
def Meg_SigmoidOp : Meg_UnaryOp<"sigmoid", "logistic sigmoid">;

//===----------------------------------------------------------------------===//
// Casts and shapes
//===----------------------------------------------------------------------===//

def Meg_StopGradientOp : Meg_Op<"stop_gradient", !listconcat([Meg_VJP, Pure,
    AllTypesMatch<["input", "result"]>], Meg_ElementwiseTraits)> {
  let summary = "Identity that passes no gradient";
  let description = [{
    The value, treated by meg-autodiff as a constant (PyTorch's `detach`):
    for terms the loss does not depend on, such as the maximum a
    vocab-parallel cross-entropy subtracts before exponentiating. The
    program lowering forwards the input.

    ```mlir
    %c = meg.stop_gradient %max : tensor<2x16xf32>
    ```
  }];
  let arguments = (ins Meg_Tensor:$input);
  let results = (outs Meg_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Meg_CastOp : Meg_Op<"cast", !listconcat([Meg_VJP, Pure,
    SameOperandsAndResultShape], Meg_ElementwiseTraits)> {
  let summary = "Converts the element type of a tensor";
  let description = [{
    Rounds to nearest even when narrowing between floating-point types;
    integer to float conversion is exact where representable.

    ```mlir
    %y = meg.cast %x : tensor<8x64xf32> to tensor<8x64xbf16>
    ```
  }];
  let arguments = (ins Meg_Tensor:$input);
  let results = (outs Meg_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
  let hasFolder = 1;
  let hasCanonicalizer = 1;
}

def Meg_ReshapeOp : Meg_Op<"reshape", [Meg_VJP, Meg_TP, Pure]> {
  let summary = "Reinterprets a tensor with another shape";
  let description = [{
    The element order (row-major) is kept; the element count must match.

    ```mlir
    %y = meg.reshape %x : tensor<2x16x512xf32> to tensor<2x16x8x64xf32>
    ```
  }];
  let arguments = (ins Meg_Tensor:$input);
  let results = (outs Meg_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Meg_TransposeOp : Meg_Op<"transpose", [Meg_VJP, Meg_TP, Pure, InferTypeOpAdaptor]> {
  let summary = "Permutes the dimensions of a tensor";
  let description = [{
    Result dimension `i` is input dimension `permutation[i]`.

    ```mlir
    %y = meg.transpose %x [1, 0, 2, 3] : tensor<2x16x8x64xf32>
    ```
  }];
  let arguments = (ins Meg_Tensor:$input, DenseI64ArrayAttr:$permutation);
  let results = (outs Meg_Tensor:$result);
  let assemblyFormat = "$input $permutation attr-dict `:` type($input)";
  let hasFolder = 1;
}

def Meg_SliceOp : Meg_Op<"slice", [Meg_VJP, Meg_TP, Pure, InferTypeOpAdaptor]> {
  let summary = "Extracts a strided slice";
  let description = [{
    Takes `sizes[i]` elements along dimension `i`, starting at `offsets[i]`
    and stepping by `strides[i]` (positive). Every element read must lie
    inside the input. Used for rotate_half (`x[..., 0::2]` is offset 0,
    stride 2) and for partial rotary dimensions.

    ```mlir
    %even = meg.slice %x [0, 0, 0, 0] [2, 16, 8, 32] [1, 1, 1, 2]
        : tensor<2x16x8x64xf32>
    ```
  }];
  let arguments = (ins Meg_Tensor:$input, DenseI64ArrayAttr:$offsets,
                       DenseI64ArrayAttr:$sizes, DenseI64ArrayAttr:$strides);
  let results = (outs Meg_Tensor:$result);
  let assemblyFormat = [{
    $input $offsets $sizes $strides attr-dict `:` type($input)
  }];
  let hasFolder = 1;
}

def Meg_ConcatOp : Meg_Op<"concat", [Meg_VJP, Meg_TP, Pure, InferTypeOpAdaptor]> {
  let summary = "Concatenates tensors along one dimension";
  let description = [{
    All inputs have the same rank and element type and agree on every
    dimension but `axis`.

    ```mlir
    %y = meg.concat %a, %b axis 3 : tensor<2x16x8x32xf32>, tensor<2x16x8x32xf32>
    ```
  }];
  let arguments = (ins Variadic<Meg_Tensor>:$inputs, I64Attr:$axis);
  let results = (outs Meg_Tensor:$result);
  let assemblyFormat = "$inputs `axis` $axis attr-dict `:` type($inputs)";
  let hasFolder = 1;
}

def Meg_SplitOp : Meg_Op<"split", [Meg_VJP, Meg_TP, Pure, InferTypeOpAdaptor]> {
  let summary = "Splits a tensor into pieces along one dimension";
  let description = [{
    Result `i` holds `sizes[i]` consecutive elements along `axis`; the sizes
    add up to the input's extent.

    ```mlir
    %a, %b = meg.split %x axis 3 sizes [32, 32] : tensor<2x16x8x64xf32>
    ```
  }];
  let arguments = (ins Meg_Tensor:$input, I64Attr:$axis,
                       DenseI64ArrayAttr:$sizes);
  let results = (outs Variadic<Meg_Tensor>:$results);
  let assemblyFormat = "$input `axis` $axis `sizes` $sizes attr-dict `:` type($input)";
}

def Meg_IotaOp : Meg_Op<"iota", [Pure]> {
  let summary = "Counts along one dimension";
  let description = [{
    Element `[i0, ..., in]` is `i_dim` converted to the element type; used
    for token positions.

    ```mlir
    %pos = meg.iota dim 0 : tensor<2048xf32>
    ```
  }];
  let arguments = (ins I64Attr:$dim);
  let results = (outs Meg_Tensor:$result);
  let assemblyFormat = "`dim` $dim attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Meg_BroadcastOp : Meg_Op<"broadcast", [Meg_VJP, Meg_TP, Pure]> {
  let summary = "Broadcasts a tensor to a larger shape";
  let description = [{
    NumPy broadcasting to the result shape: trailing dimensions aligned,
    dimensions of size 1 (or missing leading dimensions) stretched.

    ```mlir
    %y = meg.broadcast %x : tensor<1x64xf32> to tensor<16x64xf32>
    ```
  }];
  let arguments = (ins Meg_Tensor:$input);
  let results = (outs Meg_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Meg_ReduceOp : Meg_Op<"reduce", [Meg_VJP, Meg_TP, Pure, InferTypeOpAdaptor]> {
  let summary = "Reduces a tensor over some dimensions";
  let description = [{
    Sums, averages or takes the maximum over `dims` (distinct, increasing).
    With `keep_dims` the reduced dimensions stay with size 1. Floating-point
    reductions accumulate in f32.

    ```mlir
    %s = meg.reduce sum %x dims [0, 1] : tensor<2x16x64xf32>
    ```
  }];
  let arguments = (ins Meg_ReduceKindAttr:$kind, Meg_FloatTensor:$input,
                       DenseI64ArrayAttr:$dims, UnitAttr:$keep_dims);
  let results = (outs Meg_FloatTensor:$result);
  let assemblyFormat = [{
    `` $kind $input `dims` $dims (`keep_dims` $keep_dims^)? attr-dict `:` type($input)
  }];
}

#endif // MEGC_DIALECT_MEG_IR_MEGTENSOROPS_TD
