// Structure of the MMDiT and Flux presets.
// RUN: megc gen mmdit --layers 1 --hidden 64 --heads 4 --seq 16 --text-seq 8 | FileCheck %s --check-prefix=MMDIT
// RUN: megc gen flux --layers 1 --hidden 64 --heads 4 --seq 16 --text-seq 8 | FileCheck %s --check-prefix=FLUX

// MMDIT: meg.param @transformer_blocks.0.norm1.linear.weight : tensor<384x64xf32>
// MMDIT: meg.param @transformer_blocks.0.attn.add_q_proj.weight : tensor<64x64xf32> init {{.*}} {meg.layer = 0 : i64}
// MMDIT: meg.param @proj_out.weight : tensor<16x64xf32> init #meg.init<normal(0.02)>{{$}}
// MMDIT-LABEL: func.func @forward
// MMDIT-SAME: {meg.name = "latents"}
// MMDIT-SAME: {meg.name = "context"}
// MMDIT-SAME: {meg.name = "conditioning"}
// MMDIT: meg.split %{{.*}} axis 1 sizes [64, 64, 64, 64, 64, 64]
// MMDIT: meg.modulate
// Joint attention over image and text tokens, no mask, then two streams.
// MMDIT: %[[A:.*]] = meg.attention %{{.*}} scale 2.500000e-01 {meg.layer = 0 : i64} : tensor<2x24x4x16xf32>
// MMDIT: meg.split %[[A]] axis 1 sizes [16, 8]
// MMDIT: meg.gelu %{{.*}} approximate tanh
// MMDIT-LABEL: func.func @loss
// MMDIT: meg.reduce mean %{{.*}} dims [0, 1, 2]

// FLUX: meg.param @single_transformer_blocks.0.proj_out.weight : tensor<64x320xf32> init {{.*}} {meg.layer = 0 : i64}
// FLUX-LABEL: func.func @forward
// FLUX: meg.concat %{{.*}}, %{{.*}} axis 1 : tensor<2x8x64xf32>, tensor<2x16x64xf32>
// FLUX: meg.rms_norm
// FLUX: meg.attention %{{.*}} scale 2.500000e-01 {meg.layer = 0 : i64} : tensor<2x24x4x16xf32>
// FLUX: meg.concat %{{.*}}, %{{.*}} axis 2 {meg.layer = 0 : i64} : tensor<2x24x64xf32>, tensor<2x24x256xf32>
// FLUX: meg.slice %{{.*}} [0, 8, 0] [2, 16, 64] [1, 1, 1] :
