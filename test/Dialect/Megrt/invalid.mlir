// Every verifier diagnostic of the megrt dialect.
// RUN: megc-opt %s -split-input-file -verify-diagnostics

megrt.entry @f {
  %a = megrt.arena : !megrt.buffer<tensor<4xf32>>
  %b = megrt.arena : !megrt.buffer<tensor<4xf32>>
  megrt.copy %a : !megrt.buffer<tensor<4xf32>> -> %b : !megrt.buffer<tensor<4xf32>> {bytes = 16}
  // expected-error @+1 {{'megrt.arena' op declares a buffer after the entry's first command}}
  %c = megrt.arena : !megrt.buffer<tensor<4xf32>>
}

// -----

megrt.entry @f {
  %a = megrt.arena : !megrt.buffer<tensor<4xf32>>
  // expected-error @+1 {{'megrt.view' op views 32 bytes of a buffer of 16}}
  %b = megrt.view %a : !megrt.buffer<tensor<4xf32>> to !megrt.buffer<tensor<8xf32>>
}

// -----

megrt.entry @f {
  %a = megrt.arena : !megrt.buffer<tensor<4xf32>>
  %b = megrt.arena : !megrt.buffer<tensor<2xf32>>
  // expected-error @+1 {{'megrt.copy' op copies 16 bytes, more than a buffer of 8 holds}}
  megrt.copy %a : !megrt.buffer<tensor<4xf32>> -> %b : !megrt.buffer<tensor<2xf32>> {bytes = 16}
}

// -----

megrt.entry @f {
  %a = megrt.arena : !megrt.buffer<tensor<4xf32>>
  %b = megrt.arena : !megrt.buffer<tensor<4xf32>>
  // expected-error @+1 {{'megrt.launch' op updates input 2; the 2 inputs are named once each, in order}}
  megrt.launch @k(%a, %b : !megrt.buffer<tensor<4xf32>>, !megrt.buffer<tensor<4xf32>>) -> () updates [0, 2]
}

// -----

megrt.entry @f {
  %a = megrt.arena : !megrt.buffer<tensor<4xf32>>
  // expected-error @+1 {{'megrt.launch' op updates input 0; the 1 inputs are named once each, in order}}
  megrt.launch @k(%a : !megrt.buffer<tensor<4xf32>>) -> () updates [0, 0]
}

// -----

megrt.entry @f {
  %a = megrt.arena : !megrt.buffer<tensor<4xf32>>
  // expected-error @+1 {{'megrt.library_call' op calls 'scatter_rows', which is not a library kernel}}
  megrt.library_call "scatter_rows"(%a) slots [0] params [] : !megrt.buffer<tensor<4xf32>>
}

// -----

megrt.entry @f {
  %g = megrt.arena : !megrt.buffer<tensor<4x2xf32>>
  %t = megrt.arena : !megrt.buffer<tensor<8x2xf32>>
  // expected-error @+1 {{'megrt.library_call' op leaves out operand 'ids' of 'embedding_grad', which is not optional}}
  megrt.library_call "embedding_grad"(%g, %t) slots [0, 3] params [4, 8, 2] : !megrt.buffer<tensor<4x2xf32>>, !megrt.buffer<tensor<8x2xf32>>
}

// -----

megrt.entry @f {
  %g = megrt.arena : !megrt.buffer<tensor<4x2xf32>>
  %i = megrt.input 0 : !megrt.buffer<tensor<4xi32>>
  %t = megrt.arena : !megrt.buffer<tensor<8x2xf32>>
  // expected-error @+1 {{'megrt.library_call' op operand 2 fills slot 1; 'embedding_grad' has 4 operand slots, filled in order}}
  megrt.library_call "embedding_grad"(%g, %i, %t) slots [0, 1, 1] params [4, 8, 2] : !megrt.buffer<tensor<4x2xf32>>, !megrt.buffer<tensor<4xi32>>, !megrt.buffer<tensor<8x2xf32>>
}

// -----

megrt.entry @f {
  %g = megrt.arena : !megrt.buffer<tensor<4x2xf32>>
  %i = megrt.input 0 : !megrt.buffer<tensor<4xi32>>
  %t = megrt.arena : !megrt.buffer<tensor<8x2xf32>>
  // expected-error @+1 {{'megrt.library_call' op passes 2 parameters; 'embedding_grad' takes 3}}
  megrt.library_call "embedding_grad"(%g, %i, %t) slots [0, 1, 3] params [4, 8] : !megrt.buffer<tensor<4x2xf32>>, !megrt.buffer<tensor<4xi32>>, !megrt.buffer<tensor<8x2xf32>>
}

// -----

megrt.entry @f {
  %a = megrt.arena : !megrt.buffer<tensor<4xf32>>
  // expected-error @+1 {{'megrt.collective' op 'broadcast' is not a collective}}
  megrt.collective "broadcast" %a : !megrt.buffer<tensor<4xf32>> -> %a : !megrt.buffer<tensor<4xf32>> {submesh = 0, count = 4}
}

// -----

megrt.entry @f {
  %a = megrt.arena : !megrt.buffer<tensor<4xf32>>
  // expected-error @+1 {{'megrt.collective' op 'send' takes 3 parameters, not 0}}
  megrt.collective "send" %a : !megrt.buffer<tensor<4xf32>> -> %a : !megrt.buffer<tensor<4xf32>> {submesh = 0, count = 4}
}

// -----

megrt.entry @f {
  %a = megrt.arena : !megrt.buffer<tensor<4xf32>>
  // expected-error @+1 {{'megrt.collective' op reduces by 'min'; one of sum, avg, max}}
  megrt.collective "all_reduce" %a : !megrt.buffer<tensor<4xf32>> -> %a : !megrt.buffer<tensor<4xf32>> {submesh = 0, count = 4, reduce = "min"}
}

// -----

megrt.entry @f {
  %a = megrt.arena : !megrt.buffer<tensor<4xf32>>
  %b = megrt.arena : !megrt.buffer<tensor<4xf32>>
  %t = megrt.collective "all_reduce" %a : !megrt.buffer<tensor<4xf32>> -> %a : !megrt.buffer<tensor<4xf32>> {submesh = 0, count = 4} -> !megrt.token
  // expected-error @+1 {{'megrt.wait' op names buffers other than its collective's}}
  megrt.wait %t, %b : !megrt.buffer<tensor<4xf32>> -> %b : !megrt.buffer<tensor<4xf32>>
}

// -----

megrt.entry @f {
  %a = megrt.arena : !megrt.buffer<tensor<4xf32>>
  %b = megrt.arena : !megrt.buffer<tensor<4xf32>>
  // expected-error @+1 {{'megrt.gemm' op attribute 'm' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive}}
  megrt.gemm %a : !megrt.buffer<tensor<4xf32>> x %a : !megrt.buffer<tensor<4xf32>> -> %b : !megrt.buffer<tensor<4xf32>> {m = 0, n = 2, k = 2}
}
