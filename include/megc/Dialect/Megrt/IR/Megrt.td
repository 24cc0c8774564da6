//===- Megrt.td - The megrt dialect: the executable program -*- tablegen -*-===//
//
// The `megrt` dialect: one entry of the program the runtime executes, as IR.
// Its buffers are values declared at the top of the entry; each command is
// an op whose operands' roles are memory effects, so that the back half's
// analyses (the memory plan's liveness first) read them from the op's
// definition instead of from a list per command kind.
//
//===----------------------------------------------------------------------===//

#ifndef MEGC_DIALECT_MEGRT_IR_MEGRT_TD
#define MEGC_DIALECT_MEGRT_IR_MEGRT_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Megrt_Dialect : Dialect {
  let name = "megrt";
  let cppNamespace = "::megc::rt";
  let summary = "The executable program: buffers and the runtime's commands";
  let description = [{
    An entry of the program that `megrt` (the runtime) executes: its
    buffers and its commands in order, as the artifact holds them
    (runtime/schema/megc.fbs). A buffer is a value declared at the top of
    the entry (`megrt.arena`, `megrt.param`, `megrt.input`, `megrt.output`,
    `megrt.view`); a command reads and writes buffers, and says which as
    memory effects on its operands:

    ```mlir
    megrt.entry @forward {
      %x = megrt.input 0 : !megrt.buffer<tensor<32x64xf32>>
      %w = megrt.param 2 : !megrt.buffer<tensor<64x64xf32>>
      %y = megrt.arena : !megrt.buffer<tensor<32x64xf32>>
      %o = megrt.output 0 : !megrt.buffer<tensor<32x64xf32>>
      megrt.gemm %x : !megrt.buffer<tensor<32x64xf32>> x
                 %w : !megrt.buffer<tensor<64x64xf32>> -> %y :
                 !megrt.buffer<tensor<32x64xf32>> {m = 32, n = 64, k = 64,
                 trans_b}
      megrt.launch @megk0_meg_relu(%y, %o) : !megrt.buffer<tensor<32x64xf32>>,
                   !megrt.buffer<tensor<32x64xf32>>
    }
    ```

    `megrt-plan-memory` places the arena buffers from the commands'
    effects; `megc` runs it on every entry it compiles.
  }];
  let useDefaultTypePrinterParser = 1;
}

class Megrt_Type<string name, string typeMnemonic>
    : TypeDef<Megrt_Dialect, name> {
  let mnemonic = typeMnemonic;
}

def Megrt_Buffer : Megrt_Type<"Buffer", "buffer"> {
  let summary = "A buffer of the program holding one tensor";
  let parameters = (ins "::mlir::RankedTensorType":$tensor);
  let assemblyFormat = "`<` $tensor `>`";
  let extraClassDeclaration = [{
    /// The bytes the buffer takes: its elements times their whole bytes.
    uint64_t getBytes() const;
  }];
}

// Operands and results of buffer type, printed with the dialect's prefix
// (`!megrt.buffer<...>`) in the ops' assembly.
def Megrt_AnyBuffer : Type<CPred<"::llvm::isa<::megc::rt::BufferType>($_self)">,
                           "a megrt buffer">;

def Megrt_Token : Megrt_Type<"Token", "token"> {
  let summary = "A started collective, which `megrt.wait` completes";
}
def Megrt_AnyToken
    : Type<CPred<"::llvm::isa<::megc::rt::TokenType>($_self)">,
           "a megrt token">,
      BuildableType<"::megc::rt::TokenType::get($_builder.getContext())">;

// Declares a buffer; no command. The memory plan counts commands only.
def Megrt_BufferDeclaration : NativeOpTrait<"BufferDeclaration"> {
  let cppNamespace = "::megc::rt";
}

class Megrt_Op<string mnemonic, list<Trait> traits = []>
    : Op<Megrt_Dialect, mnemonic, traits>;

def Megrt_EntryOp : Megrt_Op<"entry", [IsolatedFromAbove, Symbol,
                                       SingleBlock, NoTerminator]> {
  let summary = "One entry: its buffers, then its commands in order";
  let description = [{
    `loss_output` is the index of the output named `loss`, if any: the
    memory plan reports what is live when it is first written. The plan's
    figures (`arena_bytes`, `peak_bytes`, `unplanned_bytes`,
    `live_at_loss_bytes`) are set by `megrt-plan-memory`.
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       OptionalAttr<I64Attr>:$loss_output,
                       OptionalAttr<I64Attr>:$arena_bytes,
                       OptionalAttr<I64Attr>:$peak_bytes,
                       OptionalAttr<I64Attr>:$unplanned_bytes,
                       OptionalAttr<I64Attr>:$live_at_loss_bytes);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$sym_name attr-dict-with-keyword $body";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Buffers
//===----------------------------------------------------------------------===//

def Megrt_ArenaOp : Megrt_Op<"arena", [Pure, Megrt_BufferDeclaration]> {
  let summary = "An intermediate in the entry's arena";
  let description = [{
    `offset` is its byte offset in the arena, set by `megrt-plan-memory`.
  }];
  let arguments = (ins OptionalAttr<I64Attr>:$offset);
  let results = (outs Megrt_AnyBuffer:$buffer);
  let assemblyFormat = "attr-dict `:` type($buffer)";
}

class Megrt_BoundBufferOp<string mnemonic, string what>
    : Megrt_Op<mnemonic, [Pure, Megrt_BufferDeclaration]> {
  let summary = what;
  let arguments = (ins ConfinedAttr<I64Attr, [IntNonNegative]>:$index);
  let results = (outs Megrt_AnyBuffer:$buffer);
  let assemblyFormat = "$index attr-dict `:` type($buffer)";
}

def Megrt_ParamOp : Megrt_BoundBufferOp<"param",
    "The storage of the program's parameter `index`">;
def Megrt_InputOp : Megrt_BoundBufferOp<"input",
    "The entry's input `index`, as the caller passes it">;
def Megrt_OutputOp : Megrt_BoundBufferOp<"output",
    "The entry's output `index`, returned to the caller">;

def Megrt_ViewOp : Megrt_Op<"view", [Pure, Megrt_BufferDeclaration]> {
  let summary = "Another shape of a buffer's storage (a reshape)";
  let arguments = (ins Megrt_AnyBuffer:$source);
  let results = (outs Megrt_AnyBuffer:$buffer);
  let assemblyFormat = "$source attr-dict `:` type($source) `to` type($buffer)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Commands
//===----------------------------------------------------------------------===//

def Megrt_LaunchOp : Megrt_Op<"launch",
    [AttrSizedOperandSegments, DeclareOpInterfaceMethods<MemoryEffectsOpInterface>]> {
  let summary = "Runs a generated kernel on its arguments";
  let description = [{
    The kernel's arguments: its inputs, which it reads, then its outputs,
    which it writes. `updates` lists the inputs it also overwrites (an
    optimizer update storing its results into the state it reads, in
    place: those results have no output of their own).
  }];
  let arguments = (ins FlatSymbolRefAttr:$kernel,
                       Variadic<Megrt_AnyBuffer>:$inputs,
                       Variadic<Megrt_AnyBuffer>:$outputs,
                       OptionalAttr<DenseI64ArrayAttr>:$updates);
  let assemblyFormat = [{
    $kernel `(` ($inputs^ `:` type($inputs))? `)`
    `->` `(` ($outputs^ `:` type($outputs))? `)`
    (`updates` $updates^)? attr-dict
  }];
  let hasVerifier = 1;
}

def Megrt_GemmOp : Megrt_Op<"gemm",
    [DeclareOpInterfaceMethods<MemoryEffectsOpInterface>]> {
  let summary = "C = op(A) op(B) (+ bias, GELU), or C += op(A) op(B)";
  let description = [{
    `batch` products of `m`x`k` by `k`x`n`, the operands `stride_*`
    elements apart; `trans_a`/`trans_b` transpose an operand. `gelu`
    applies tanh-approximated GELU after the bias; `accumulate` adds the
    product to C (which the command then reads too).
  }];
  let arguments = (ins Megrt_AnyBuffer:$a, Megrt_AnyBuffer:$b, Megrt_AnyBuffer:$c,
                       Optional<Megrt_AnyBuffer>:$bias,
                       ConfinedAttr<I64Attr, [IntPositive]>:$m,
                       ConfinedAttr<I64Attr, [IntPositive]>:$n,
                       ConfinedAttr<I64Attr, [IntPositive]>:$k,
                       DefaultValuedAttr<I64Attr, "1">:$batch,
                       DefaultValuedAttr<I64Attr, "0">:$stride_a,
                       DefaultValuedAttr<I64Attr, "0">:$stride_b,
                       DefaultValuedAttr<I64Attr, "0">:$stride_c,
                       UnitAttr:$trans_a, UnitAttr:$trans_b, UnitAttr:$gelu,
                       UnitAttr:$accumulate);
  let assemblyFormat = [{
    $a `:` type($a) `x` $b `:` type($b) `->` $c `:` type($c)
    (`bias` $bias^ `:` type($bias))? attr-dict
  }];
}

def Megrt_CopyOp : Megrt_Op<"copy"> {
  let summary = "Copies `bytes` bytes from one buffer to another";
  let arguments = (ins Arg<Megrt_AnyBuffer, "source", [MemRead]>:$src,
                       Arg<Megrt_AnyBuffer, "destination", [MemWrite]>:$dst,
                       ConfinedAttr<I64Attr, [IntNonNegative]>:$bytes);
  let assemblyFormat = [{
    $src `:` type($src) `->` $dst `:` type($dst) attr-dict
  }];
  let hasVerifier = 1;
}

defvar Megrt_AttentionSizes = (ins ConfinedAttr<I64Attr, [IntPositive]>:$batch,
                   ConfinedAttr<I64Attr, [IntPositive]>:$seq_q,
                   ConfinedAttr<I64Attr, [IntPositive]>:$seq_kv,
                   ConfinedAttr<I64Attr, [IntPositive]>:$heads,
                   ConfinedAttr<I64Attr, [IntPositive]>:$kv_heads,
                   ConfinedAttr<I64Attr, [IntPositive]>:$head_dim,
                   ConfinedAttr<I64Attr, [IntPositive]>:$value_dim,
                   UnitAttr:$causal, F32Attr:$scale);

def Megrt_AttentionOp : Megrt_Op<"attention", [AttrSizedOperandSegments]> {
  let summary = "Fused attention: out = softmax(q k^T scale) v";
  let description = [{
    `stats`, when present, receives the softmax statistics (log-sum-exp per
    query) for the backward; `positions` gives each query's position in the
    key sequence (else query i is at i + seq_kv - seq_q).
  }];
  let arguments = !con((ins Arg<Megrt_AnyBuffer, "q", [MemRead]>:$q,
                            Arg<Megrt_AnyBuffer, "k", [MemRead]>:$k,
                            Arg<Megrt_AnyBuffer, "v", [MemRead]>:$v,
                            Arg<Megrt_AnyBuffer, "out", [MemWrite]>:$out,
                            Arg<Optional<Megrt_AnyBuffer>, "softmax statistics",
                                [MemWrite]>:$stats,
                            Arg<Optional<Megrt_AnyBuffer>, "query positions",
                                [MemRead]>:$positions),
                       Megrt_AttentionSizes);
  let assemblyFormat = [{
    `(` $q `:` type($q) `,` $k `:` type($k) `,` $v `:` type($v) `)`
    `->` $out `:` type($out)
    (`stats` $stats^ `:` type($stats))?
    (`positions` $positions^ `:` type($positions))? attr-dict
  }];
}

def Megrt_AttentionGradOp : Megrt_Op<"attention_grad",
    [AttrSizedOperandSegments]> {
  let summary = "The gradients of fused attention's q, k and v";
  let arguments = !con((ins Arg<Megrt_AnyBuffer, "q", [MemRead]>:$q,
                            Arg<Megrt_AnyBuffer, "k", [MemRead]>:$k,
                            Arg<Megrt_AnyBuffer, "v", [MemRead]>:$v,
                            Arg<Megrt_AnyBuffer, "out", [MemRead]>:$out,
                            Arg<Megrt_AnyBuffer, "gradient of out",
                                [MemRead]>:$grad_out,
                            Arg<Megrt_AnyBuffer, "gradient of q",
                                [MemWrite]>:$grad_q,
                            Arg<Megrt_AnyBuffer, "gradient of k",
                                [MemWrite]>:$grad_k,
                            Arg<Megrt_AnyBuffer, "gradient of v",
                                [MemWrite]>:$grad_v,
                            Arg<Optional<Megrt_AnyBuffer>, "softmax statistics",
                                [MemRead]>:$stats,
                            Arg<Optional<Megrt_AnyBuffer>, "query positions",
                                [MemRead]>:$positions),
                       Megrt_AttentionSizes);
  let assemblyFormat = [{
    `(` $q `:` type($q) `,` $k `:` type($k) `,` $v `:` type($v) `,`
        $out `:` type($out) `,` $grad_out `:` type($grad_out) `)`
    `->` `(` $grad_q `:` type($grad_q) `,` $grad_k `:` type($grad_k) `,`
             $grad_v `:` type($grad_v) `)`
    (`stats` $stats^ `:` type($stats))?
    (`positions` $positions^ `:` type($positions))? attr-dict
  }];
}

def Megrt_LibraryCallOp : Megrt_Op<"library_call",
    [DeclareOpInterfaceMethods<MemoryEffectsOpInterface>]> {
  let summary = "Calls one of the runtime's library kernels";
  let description = [{
    `kernel` names a line of megrt/LibraryKernels.def. Operand i fills the
    kernel's operand slot `slots[i]` (an optional slot left out has no
    operand); `params` are the kernel's integer parameters in its order.
    Each operand is read or written as the kernel's signature says.
  }];
  let arguments = (ins StrAttr:$kernel, Variadic<Megrt_AnyBuffer>:$operands,
                       DenseI64ArrayAttr:$slots, DenseI64ArrayAttr:$params);
  let assemblyFormat = [{
    $kernel `(` $operands `)` `slots` $slots `params` $params attr-dict `:`
    type($operands)
  }];
  let hasVerifier = 1;
}

def Megrt_CollectiveOp : Megrt_Op<"collective"> {
  let summary = "A collective over a registered submesh";
  let description = [{
    `kind` is a line of megrt/Collectives.def (all_reduce, send, ...), over
    the program's registered submesh `submesh`, `count` elements per rank
    piece; `reduce` (sum, avg, max) for the reducing ones, `params` for
    those with parameters. A started collective returns a token that
    `megrt.wait` completes.
  }];
  let arguments = (ins StrAttr:$kind,
                       Arg<Megrt_AnyBuffer, "source", [MemRead]>:$src,
                       Arg<Megrt_AnyBuffer, "destination", [MemWrite]>:$dst,
                       ConfinedAttr<I64Attr, [IntNonNegative]>:$submesh,
                       ConfinedAttr<I64Attr, [IntNonNegative]>:$count,
                       DefaultValuedAttr<StrAttr, "\"sum\"">:$reduce,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{}">:$params);
  let results = (outs Optional<Megrt_AnyToken>:$token);
  let assemblyFormat = [{
    $kind $src `:` type($src) `->` $dst `:` type($dst) attr-dict
    (`->` type($token)^)?
  }];
  let hasVerifier = 1;
}

def Megrt_WaitOp : Megrt_Op<"wait"> {
  let summary = "Completes a started collective";
  let description = [{
    Names the collective's buffers again, so that they stay live until
    here: the source is still read, the destination written.
  }];
  let arguments = (ins Megrt_AnyToken:$token,
                       Arg<Megrt_AnyBuffer, "source", [MemRead]>:$src,
                       Arg<Megrt_AnyBuffer, "destination", [MemWrite]>:$dst);
  let assemblyFormat = [{
    $token `,` $src `:` type($src) `->` $dst `:` type($dst) attr-dict
  }];
  let hasVerifier = 1;
}

#endif // MEGC_DIALECT_MEGRT_IR_MEGRT_TD
