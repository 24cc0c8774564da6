// Structure of the Llama preset: HF names, entry signatures, unfused RoPE,
// each layer's ops marked with the layer (meg.layer), the rest not.
// RUN: megc gen llama --layers 2 --hidden 64 --heads 4 --kv-heads 2 --ffn 96 --vocab 128 --seq 8 --batch 2 | FileCheck %s
// RUN: megc gen llama --layers 1 --hidden 64 --heads 4 --kv-heads 4 --seq 8 --rotary-interleaved --rotary-percent 0.5 --dtype bf16 | FileCheck %s --check-prefix=INTER

// CHECK: meg.param @model.embed_tokens.weight : tensor<128x64xf32> init #meg.init<normal(0.02)>
// CHECK: meg.param @model.layers.0.input_layernorm.weight : tensor<64xf32> init #meg.init<ones>
// CHECK: meg.param @model.layers.0.self_attn.k_proj.weight : tensor<32x64xf32>
// CHECK: meg.param @model.layers.1.mlp.down_proj.weight : tensor<64x96xf32>
// CHECK: meg.param @model.norm.weight : tensor<64xf32>
// CHECK: meg.param @lm_head.weight : tensor<128x64xf32>
// CHECK-LABEL: func.func @forward
// CHECK-SAME: tensor<2x8xi32> {meg.name = "input_ids"}
// CHECK-SAME: -> (tensor<2x8x128xf32> {meg.name = "logits"})
// half-split rotate_half: concat(-x2, x1)
// CHECK: %[[X1:.*]] = meg.slice %{{.*}} [0, 0, 0, 0] [2, 8, 4, 8] [1, 1, 1, 1]
// CHECK: %[[X2:.*]] = meg.slice %{{.*}} [0, 0, 0, 8] [2, 8, 4, 8] [1, 1, 1, 1]
// CHECK: %[[N:.*]] = meg.neg %[[X2]]
// CHECK: meg.concat %[[N]], %[[X1]] axis 3
// CHECK: meg.attention %{{.*}} causal scale 2.500000e-01 {meg.layer = 0 : i64} : tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>
// CHECK-NOT: meg.rope
// CHECK: meg.add {{.*}} {meg.layer = 1 : i64}
// CHECK: %[[NW:.*]] = meg.param_ref @model.norm.weight : tensor<64xf32>
// CHECK-NEXT: meg.rms_norm %{{.*}}, %[[NW]] eps 1.000000e-05 : tensor<2x8x64xf32>
// CHECK-LABEL: func.func @loss
// CHECK-SAME: -> (tensor<f32> {meg.name = "loss"})
// CHECK: call @forward
// CHECK: %[[SUM:.*]] = meg.cross_entropy %{{.*}}, %[[LABELS:.*]] sum ignore -100
// CHECK: %[[COUNT:.*]] = meg.label_count %[[LABELS]] ignore -100 global
// CHECK: meg.div %[[SUM]], %[[COUNT]]

// Interleaved, partial: cos/sin rounded to bf16, strided slices, tail kept.
// INTER: %[[COS:.*]] = meg.cos %{{.*}} : tensor<8x8xf32>
// INTER: meg.cast %[[COS]] : tensor<8x8xf32> to tensor<8x8xbf16>
// INTER: %[[ROT:.*]] = meg.slice %[[Q:.*]] [0, 0, 0, 0] [2, 8, 4, 8] [1, 1, 1, 1]
// INTER: meg.slice %[[ROT]] [0, 0, 0, 0] [2, 8, 4, 4] [1, 1, 1, 2]
// INTER: meg.slice %[[ROT]] [0, 0, 0, 1] [2, 8, 4, 4] [1, 1, 1, 2]
// INTER: meg.concat {{.*}} axis 4 {{.*}}: tensor<2x8x4x4x1xbf16>
// INTER: %[[TAIL:.*]] = meg.slice %[[Q]] [0, 0, 0, 8] [2, 8, 4, 8] [1, 1, 1, 1]
// INTER: meg.concat %{{.*}}, %[[TAIL]] axis 3
