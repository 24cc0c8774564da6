// Round-trip test (custom and generic form) of every megrt op and type.
// RUN: megc-opt %s | megc-opt | FileCheck %s
// RUN: megc-opt %s --mlir-print-op-generic | megc-opt | FileCheck %s

!f = !megrt.buffer<tensor<2x16x64xf32>>
!w = !megrt.buffer<tensor<64x64xf32>>
!ids = !megrt.buffer<tensor<2x16xi32>>
!heads = !megrt.buffer<tensor<2x16x4x16xf32>>
!stats = !megrt.buffer<tensor<2x4x16xf32>>
!pos = !megrt.buffer<tensor<16xi32>>
!table = !megrt.buffer<tensor<256x64xf32>>

// CHECK-LABEL: megrt.entry @train_step attributes {loss_output = 0 : i64}
megrt.entry @train_step attributes {loss_output = 0} {
  // CHECK: %[[IDS:.*]] = megrt.input 0 : !megrt.buffer<tensor<2x16xi32>>
  %ids = megrt.input 0 : !ids
  // CHECK: %[[W:.*]] = megrt.param 1 : !megrt.buffer<tensor<64x64xf32>>
  %w = megrt.param 1 : !w
  %table = megrt.param 0 : !table
  // CHECK: %[[X:.*]] = megrt.arena {offset = 128 : i64} : !megrt.buffer<tensor<2x16x64xf32>>
  %x = megrt.arena {offset = 128} : !f
  %y = megrt.arena : !f
  // CHECK: megrt.view %[[X]] : !megrt.buffer<tensor<2x16x64xf32>> to !megrt.buffer<tensor<2x16x4x16xf32>>
  %q = megrt.view %x : !f to !heads
  %out = megrt.arena : !heads
  %stats = megrt.arena : !stats
  %pos = megrt.arena : !pos
  %gq = megrt.arena : !heads
  %grad = megrt.arena : !table
  %loss = megrt.output 0 : !f
  // CHECK: megrt.launch @megk0_meg_embedding(%{{.*}}, %[[IDS]] : !megrt.buffer<tensor<256x64xf32>>, !megrt.buffer<tensor<2x16xi32>>) -> (%[[X]] : !megrt.buffer<tensor<2x16x64xf32>>)
  megrt.launch @megk0_meg_embedding(%table, %ids : !table, !ids) -> (%x : !f)
  // An update in place: the kernel reads and overwrites its first input.
  // CHECK: megrt.launch @megk1_adamw(%[[X]], %[[Y:.*]] : {{.*}}) -> () updates [0]
  megrt.launch @megk1_adamw(%x, %y : !f, !f) -> () updates [0]
  // CHECK: megrt.gemm %[[X]] : {{.*}} x %[[W]] : {{.*}} -> %[[Y:.*]] : !megrt.buffer<tensor<2x16x64xf32>> {k = 64 : i64, m = 32 : i64, n = 64 : i64, trans_b}
  megrt.gemm %x : !f x %w : !w -> %y : !f {m = 32, n = 64, k = 64, trans_b}
  // CHECK: megrt.gemm {{.*}} bias %{{.*}} : {{.*}} {accumulate, batch = 2 : i64
  megrt.gemm %x : !f x %w : !w -> %y : !f bias %w : !w {m = 16, n = 64, k = 64, batch = 2, stride_a = 1024, stride_c = 1024, accumulate, gelu}
  // CHECK: megrt.attention(%[[Q:.*]] : {{.*}}, %[[Q]] : {{.*}}, %[[Q]] : {{.*}}) -> %[[OUT:.*]] : {{.*}} stats %{{.*}} : !megrt.buffer<tensor<2x4x16xf32>> {batch = 2 : i64, causal
  megrt.attention(%q : !heads, %q : !heads, %q : !heads) -> %out : !heads stats %stats : !stats {batch = 2, seq_q = 16, seq_kv = 16, heads = 4, kv_heads = 4, head_dim = 16, value_dim = 16, causal, scale = 0.25 : f32}
  // CHECK: megrt.attention_grad({{.*}}) -> ({{.*}}) stats {{.*}} positions {{.*}} : !megrt.buffer<tensor<16xi32>>
  megrt.attention_grad(%q : !heads, %q : !heads, %q : !heads, %out : !heads, %out : !heads) -> (%gq : !heads, %gq : !heads, %gq : !heads) stats %stats : !stats positions %pos : !pos {batch = 2, seq_q = 16, seq_kv = 16, heads = 4, kv_heads = 4, head_dim = 16, value_dim = 16, scale = 0.25 : f32}
  // CHECK: megrt.library_call "embedding_grad"
  megrt.library_call "embedding_grad"(%y, %ids, %grad) slots [0, 1, 3] params [32, 256, 64] : !f, !ids, !table
  // CHECK: %[[T:.*]] = megrt.collective "all_reduce" %[[Y]] : {{.*}} -> %[[Y]] : {{.*}} {count = 2048 : i64, reduce = "avg", submesh = 0 : i64} -> !megrt.token
  %t = megrt.collective "all_reduce" %y : !f -> %y : !f {submesh = 0, count = 2048, reduce = "avg"} -> !megrt.token
  // CHECK: megrt.collective "send" {{.*}} {count = 2048 : i64, params = array<i64: 1, -1, 1>, submesh = 1 : i64}
  megrt.collective "send" %x : !f -> %x : !f {submesh = 1, count = 2048, params = array<i64: 1, -1, 1>}
  // CHECK: megrt.wait %[[T]], %[[Y]] : {{.*}} -> %[[Y]]
  megrt.wait %t, %y : !f -> %y : !f
  // CHECK: megrt.copy %[[Y]] : {{.*}} -> %{{.*}} : {{.*}} {bytes = 8192 : i64}
  megrt.copy %y : !f -> %loss : !f {bytes = 8192}
}
