// RUN: megc-opt %s --split-input-file --meg-ring-attention --verify-diagnostics | FileCheck %s

// cp = 2, 8 tokens in 4 chunks of 2: rank 0 holds chunks 0 and 3, rank 1
// chunks 1 and 2. Step 0 attends to the rank's own block causally (with
// statistics); step 1 to the block shifted on from the other rank, each
// query seeing the keys up to its position in that block: rank 0's block
// 1 (chunks 1, 2) is later, so its chunk-0 queries see nothing (-1) and
// its chunk-3 queries all 4 keys (3); rank 1's block 0 (chunks 0, 3) is
// earlier, so all its queries see chunk 0 only (1). The partial results
// merge in f32 by their statistics (a query that sees no key weighs 0:
// its +-inf statistics clamped, times 0, plus -1e30). The gradient reruns
// each step given the merged output and statistics; the gradients of the
// block received are shifted back on to its rank, which adds its own
// share. Every op keeps the ring's layer; the per-rank constants sit at
// the entry.
// CHECK-LABEL: func.func @grad
// CHECK-SAME: (%[[Q:.*]]: tensor<1x4x2x4xf32>, %[[K:.*]]: tensor<1x4x1x4xf32>, %[[V:.*]]: tensor<1x4x1x4xf32>, %[[DO:.*]]: tensor<1x4x2x4xf32>)
// CHECK: %[[FARS:.*]] = arith.constant dense<[-1.000000e+30, -1.000000e+30, 0.000000e+00, 0.000000e+00, 0.000000e+00, 0.000000e+00, 0.000000e+00, 0.000000e+00]> : tensor<8xf32>
// CHECK-NEXT: %[[FAR:.*]] = meg.shard_slice %[[FARS]] over @world[cp] dim 0 : tensor<8xf32> -> tensor<4xf32>
// CHECK-NEXT: %[[SEESALL:.*]] = arith.constant dense<[0.000000e+00, 0.000000e+00, 1.000000e+00, 1.000000e+00, 1.000000e+00, 1.000000e+00, 1.000000e+00, 1.000000e+00]> : tensor<8xf32>
// CHECK-NEXT: %[[SEES:.*]] = meg.shard_slice %[[SEESALL]] over @world[cp] dim 0 : tensor<8xf32> -> tensor<4xf32>
// CHECK-NEXT: %[[POSALL:.*]] = arith.constant dense<[-1, -1, 3, 3, 1, 1, 1, 1]> : tensor<8xi32>
// CHECK-NEXT: %[[POS:.*]] = meg.shard_slice %[[POSALL]] over @world[cp] dim 0 : tensor<8xi32> -> tensor<4xi32>
// CHECK-NEXT: %[[O0:.*]], %[[L0:.*]] = meg.attention %[[Q]], %[[K]], %[[V]] causal scale 5.000000e-01 stats {meg.layer = 3 : i64}
// CHECK-NEXT: %[[K1:.*]] = meg.shift %[[K]] over @world[cp] by 1 {meg.layer = 3 : i64}
// CHECK-NEXT: %[[V1:.*]] = meg.shift %[[V]] over @world[cp] by 1 {meg.layer = 3 : i64}
// CHECK-NEXT: %[[O1:.*]], %[[L1:.*]] = meg.attention %[[Q]], %[[K1]], %[[V1]] causal positions(%[[POS]] : tensor<4xi32>) scale 5.000000e-01 stats {meg.layer = 3 : i64}
// CHECK-NEXT: %[[LOW:.*]] = arith.constant {meg.layer = 3 : i64} dense<-1.000000e+30> : tensor<1x2x4xf32>
// CHECK-NEXT: %[[C0:.*]] = meg.max %[[L1]], %[[LOW]]
// CHECK-NEXT: %[[C1:.*]] = meg.neg %[[C0]]
// CHECK-NEXT: %[[C2:.*]] = meg.max %[[C1]], %[[LOW]]
// CHECK-NEXT: %[[C3:.*]] = meg.neg %[[C2]]
// CHECK-NEXT: %[[C4:.*]] = meg.mul %[[C3]], %[[SEES]] {meg.layer = 3 : i64} : tensor<1x2x4xf32>, tensor<4xf32>
// CHECK-NEXT: %[[LB:.*]] = meg.add %[[C4]], %[[FAR]] {meg.layer = 3 : i64} : tensor<1x2x4xf32>, tensor<4xf32>
// CHECK-NEXT: %[[TOP:.*]] = meg.max %[[L0]], %[[LB]]
// CHECK-NEXT: %[[D0:.*]] = meg.sub %[[L0]], %[[TOP]]
// CHECK-NEXT: %[[E0:.*]] = meg.exp %[[D0]]
// CHECK-NEXT: %[[D1:.*]] = meg.sub %[[LB]], %[[TOP]]
// CHECK-NEXT: %[[E1:.*]] = meg.exp %[[D1]]
// CHECK-NEXT: %[[SUM:.*]] = meg.add %[[E0]], %[[E1]]
// CHECK-NEXT: %[[LOG:.*]] = meg.log %[[SUM]]
// CHECK-NEXT: %[[LSE:.*]] = meg.add %[[TOP]], %[[LOG]]
// CHECK-NEXT: %[[W0:.*]] = meg.div %[[E0]], %[[SUM]]
// CHECK-NEXT: %[[W0T:.*]] = meg.transpose %[[W0]] [0, 2, 1]
// CHECK-NEXT: %[[W0R:.*]] = meg.reshape %[[W0T]] {meg.layer = 3 : i64} : tensor<1x4x2xf32> to tensor<1x4x2x1xf32>
// CHECK-NEXT: %[[W1:.*]] = meg.div %[[E1]], %[[SUM]]
// CHECK-NEXT: %[[W1T:.*]] = meg.transpose %[[W1]] [0, 2, 1]
// CHECK-NEXT: %[[W1R:.*]] = meg.reshape %[[W1T]]
// CHECK-NEXT: %[[P1:.*]] = meg.mul %[[O1]], %[[W1R]]
// CHECK-NEXT: %[[P0:.*]] = meg.mul %[[O0]], %[[W0R]]
// CHECK-NEXT: %[[O:.*]] = meg.add %[[P0]], %[[P1]]
// CHECK-NEXT: %[[DQ0:.*]], %[[DK0:.*]], %[[DV0:.*]] = meg.attention_grad %[[DO]], %[[Q]], %[[K]], %[[V]], %[[O]] stats %[[LSE]] causal scale 5.000000e-01 {meg.layer = 3 : i64}
// CHECK-NEXT: %[[K1B:.*]] = meg.shift %[[K]] over @world[cp] by 1
// CHECK-NEXT: %[[V1B:.*]] = meg.shift %[[V]] over @world[cp] by 1
// CHECK-NEXT: %[[DQ1:.*]], %[[DK1:.*]], %[[DV1:.*]] = meg.attention_grad %[[DO]], %[[Q]], %[[K1B]], %[[V1B]], %[[O]] stats %[[LSE]] causal positions(%[[POS]] : tensor<4xi32>) scale 5.000000e-01
// CHECK-NEXT: %[[DQ:.*]] = meg.add %[[DQ0]], %[[DQ1]]
// CHECK-NEXT: %[[DK1S:.*]] = meg.shift %[[DK1]] over @world[cp] by 1
// CHECK-NEXT: %[[DK:.*]] = meg.add %[[DK1S]], %[[DK0]]
// CHECK-NEXT: %[[DV1S:.*]] = meg.shift %[[DV1]] over @world[cp] by 1
// CHECK-NEXT: %[[DV:.*]] = meg.add %[[DV1S]], %[[DV0]]
// CHECK-NEXT: return %[[O]], %[[DQ]], %[[DK]], %[[DV]]
module {
  meg.mesh @world [cp = 2]
  meg.submesh @world[cp]
  func.func @grad(%q: tensor<1x4x2x4xf32>, %k: tensor<1x4x1x4xf32>, %v: tensor<1x4x1x4xf32>, %do: tensor<1x4x2x4xf32>) -> (tensor<1x4x2x4xf32>, tensor<1x4x2x4xf32>, tensor<1x4x1x4xf32>, tensor<1x4x1x4xf32>) {
    %o = meg.ring_attention %q, %k, %v over @world[cp] scale 0.5 {meg.layer = 3 : i64} : tensor<1x4x2x4xf32>, tensor<1x4x1x4xf32>, tensor<1x4x1x4xf32>
    %dq, %dk, %dv = meg.ring_attention_grad %do, %q, %k, %v, %o over @world[cp] scale 0.5 {meg.layer = 3 : i64} : tensor<1x4x2x4xf32>, tensor<1x4x2x4xf32>, tensor<1x4x1x4xf32>, tensor<1x4x1x4xf32>
    return %o, %dq, %dk, %dv : tensor<1x4x2x4xf32>, tensor<1x4x2x4xf32>, tensor<1x4x1x4xf32>, tensor<1x4x1x4xf32>
  }
}

// -----

// cp = 4, 16 tokens in 8 chunks of 2 (rank i: chunks i and 7 - i): each
// step's block is of an earlier rank (all queries see its first chunk: 1)
// or a later one (the first query chunk sees nothing, the second all 4
// keys: -1 -1 3 3); three steps, three shifts of k and v each, a bf16
// result merged in f32 and cast back. In the gradient a block's gradients
// gather over three shifts too.
// CHECK-LABEL: func.func @forward
// CHECK-DAG: arith.constant dense<[-1, -1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]> : tensor<16xi32>
// CHECK-DAG: arith.constant dense<[-1, -1, 3, 3, -1, -1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1]> : tensor<16xi32>
// CHECK-DAG: arith.constant dense<[-1, -1, 3, 3, -1, -1, 3, 3, -1, -1, 3, 3, 1, 1, 1, 1]> : tensor<16xi32>
// CHECK: %[[O0:.*]], %{{.*}} = meg.attention %{{.*}} causal scale 2.500000e-01 stats
// CHECK-NEXT: %[[ACC:.*]] = meg.cast %[[O0]] : tensor<1x4x2x8xbf16> to tensor<1x4x2x8xf32>
// CHECK-COUNT-6: meg.shift
// CHECK: %[[R:.*]] = meg.cast %{{.*}} : tensor<1x4x2x8xf32> to tensor<1x4x2x8xbf16>
// CHECK-NEXT: %{{.*}}, %[[DK0:.*]], %{{.*}} = meg.attention_grad
// CHECK-NEXT: %[[K1:.*]] = meg.shift
// CHECK-NEXT: %[[V1:.*]] = meg.shift
// CHECK-NEXT: %{{.*}}, %[[DK1:.*]], %{{.*}} = meg.attention_grad %{{.*}}, %{{.*}}, %[[K1]], %[[V1]]
// CHECK-NEXT: meg.add
// CHECK-NEXT: %[[K2:.*]] = meg.shift %[[K1]]
// CHECK-NEXT: %[[V2:.*]] = meg.shift %[[V1]]
// CHECK-NEXT: %[[DK1S:.*]] = meg.shift %[[DK1]]
// CHECK-NEXT: meg.shift
// CHECK-NEXT: %{{.*}}, %[[DK2:.*]], %{{.*}} = meg.attention_grad %{{.*}}, %{{.*}}, %[[K2]], %[[V2]]
// CHECK-NEXT: meg.add
// CHECK-NEXT: %[[DKA2:.*]] = meg.add %[[DK1S]], %[[DK2]]
// CHECK-NEXT: meg.add
// CHECK-NEXT: %[[K3:.*]] = meg.shift %[[K2]]
// CHECK-NEXT: %[[V3:.*]] = meg.shift %[[V2]]
// CHECK-NEXT: %[[DK2S:.*]] = meg.shift %[[DKA2]]
// CHECK-NEXT: meg.shift
// CHECK-NEXT: %{{.*}}, %[[DK3:.*]], %{{.*}} = meg.attention_grad %{{.*}}, %{{.*}}, %[[K3]], %[[V3]]
// CHECK-NEXT: meg.add
// CHECK-NEXT: %[[DKA3:.*]] = meg.add %[[DK2S]], %[[DK3]]
// CHECK-NEXT: meg.add
// CHECK-NEXT: %[[DKS:.*]] = meg.shift %[[DKA3]]
// CHECK-NEXT: %[[DK:.*]] = meg.add %[[DKS]], %[[DK0]]
// CHECK: return %[[R]], %[[DK]]
module {
  meg.mesh @world [dp = 2, cp = 4]
  meg.submesh @world[cp]
  func.func @forward(%q: tensor<1x4x2x8xbf16>, %k: tensor<1x4x2x8xbf16>, %v: tensor<1x4x2x8xbf16>) -> (tensor<1x4x2x8xbf16>, tensor<1x4x2x8xbf16>) {
    %o = meg.ring_attention %q, %k, %v over @world[cp] scale 0.25 : tensor<1x4x2x8xbf16>, tensor<1x4x2x8xbf16>, tensor<1x4x2x8xbf16>
    %dq, %dk, %dv = meg.ring_attention_grad %o, %q, %k, %v, %o over @world[cp] scale 0.25 : tensor<1x4x2x8xbf16>, tensor<1x4x2x8xbf16>, tensor<1x4x2x8xbf16>, tensor<1x4x2x8xbf16>
    return %o, %dk : tensor<1x4x2x8xbf16>, tensor<1x4x2x8xbf16>
  }
}

// -----

module {
  meg.mesh @world [cp = 2]
  meg.submesh @world[cp]
  func.func @grad(%q: tensor<1x4x2x4xf32>, %k: tensor<1x4x1x4xf32>, %v: tensor<1x4x1x4xf32>, %do: tensor<1x4x2x4xf32>, %o: tensor<1x4x2x4xf32>) -> tensor<1x4x2x4xf32> {
    // expected-error @+1 {{meg-ring-attention: the output this gradient reads is not a meg.ring_attention's of the same function}}
    %dq, %dk, %dv = meg.ring_attention_grad %do, %q, %k, %v, %o over @world[cp] scale 0.5 : tensor<1x4x2x4xf32>, tensor<1x4x2x4xf32>, tensor<1x4x1x4xf32>, tensor<1x4x1x4xf32>
    return %dq : tensor<1x4x2x4xf32>
  }
}
