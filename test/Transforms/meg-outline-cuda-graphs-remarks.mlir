// RUN: megc-opt %s -verify-diagnostics \
// RUN:   --meg-outline-cuda-graphs='scope=layer remarks=true' -o /dev/null
// RUN: not megc-opt %s --meg-outline-cuda-graphs='scope=block' -o /dev/null 2>&1 \
// RUN:   | FileCheck %s --check-prefix=SCOPE
// SCOPE: error: meg-outline-cuda-graphs: unknown scope 'block'; expected step or layer

meg.mesh @world [dp = 2]
meg.submesh @world[dp]
meg.param @model.layers.0.w : tensor<8x8xf32> init #meg.init<normal(0.02)> {meg.layer = 0 : i64}

func.func @with_collective(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %w = meg.param_ref @model.layers.0.w : tensor<8x8xf32>
  %a = meg.linear %x, %w : tensor<4x8xf32>, tensor<8x8xf32>
  // expected-remark @+1 {{not captured in a CUDA graph: 'meg.all_reduce' collectives are captured only with capture-collectives}}
  %r = meg.all_reduce %a over @world[dp] sum : tensor<4x8xf32>
  %b = meg.linear %r, %w : tensor<4x8xf32>, tensor<8x8xf32>
  return %b : tensor<4x8xf32>
}
