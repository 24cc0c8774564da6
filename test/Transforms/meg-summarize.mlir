// RUN: megc-opt %s --meg-summarize -o /dev/null | FileCheck %s
// RUN: megc-opt %s --meg-summarize=output=%t -o /dev/null && FileCheck %s < %t

// CHECK: meg model summary
// CHECK-NEXT: parameters: 2 tensors, 0.01 M elements, 0.0 MB (trainable 1, frozen 1)
// CHECK-NEXT: mesh @world: 8 devices [dp_outer = 2, dp_shard = 4]
// CHECK-NEXT: submesh @world[dp_shard]
// CHECK-NEXT: meg.optimizer = #meg.adamw<lr = 0.001
// CHECK-LABEL: func @f: 4 ops
// CHECK-NEXT: meg.param_ref 2
// CHECK-NEXT: func.return 1
// CHECK-NEXT: meg.embedding 1

module attributes {meg.optimizer = #meg.adamw<lr = 1.0e-3, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-8, weight_decay = 0.0>} {
  meg.mesh @world [dp_outer = 2, dp_shard = 4]
  meg.submesh @world[dp_shard]
  meg.param @embed : tensor<128x64xf32> init #meg.init<normal(0.02)>
  meg.param frozen @norm : tensor<64xf32> init #meg.init<ones>
  func.func @f(%ids: tensor<2x16xi32>) -> tensor<2x16x64xf32> {
    %t = meg.param_ref @embed : tensor<128x64xf32>
    %w = meg.param_ref @norm : tensor<64xf32>
    %h = meg.embedding %t, %ids : tensor<128x64xf32>, tensor<2x16xi32>
    return %h : tensor<2x16x64xf32>
  }
}

// The example in the pass description (docs/reference/MegPasses.md).
// RUN: megc gen llama --layers 2 --hidden 128 --heads 8 --kv-heads 2 --ffn 352 --vocab 512 --seq 64 --batch 2 | megc-opt --meg-summarize -o /dev/null | FileCheck %s --check-prefix=DOC
// DOC: meg model summary
// DOC-NEXT: parameters: 21 tensors, 0.48 M elements, 1.9 MB (trainable 21, frozen 0)
// DOC-NEXT: meg.hf_config: LlamaForCausalLM (Hugging Face config)
// DOC-NEXT: func @forward: 98 ops
// DOC-NEXT: meg.param_ref 21
// DOC-NEXT: meg.linear 15
