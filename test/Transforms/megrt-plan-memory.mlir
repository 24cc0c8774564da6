// RUN: megc-opt %s --pass-pipeline='builtin.module(megrt.entry(megrt-plan-memory))' -split-input-file | FileCheck %s

// A buffer lives from the first command with an effect on it to the last:
// %a (0..1) and %b (1..2) overlap at the second launch, %c (3) reuses the
// arena from 0. The largest is placed first: %c and %a at 0, %b above %a.
// The peak is the 256 + 64 bytes live at once; without reuse, 576.
// CHECK-LABEL: megrt.entry @lifetimes
// CHECK-SAME: arena_bytes = 320 : i64, peak_bytes = 320 : i64, unplanned_bytes = 576 : i64
// CHECK: megrt.arena {offset = 0 : i64} : !megrt.buffer<tensor<64xf32>>
// CHECK-NEXT: megrt.arena {offset = 256 : i64} : !megrt.buffer<tensor<16xf32>>
// CHECK-NEXT: megrt.arena {offset = 0 : i64} : !megrt.buffer<tensor<64xf32>>
// CHECK-NEXT: megrt.input 0
// CHECK-NOT: offset
megrt.entry @lifetimes {
  %a = megrt.arena : !megrt.buffer<tensor<64xf32>>
  %b = megrt.arena : !megrt.buffer<tensor<16xf32>>
  %c = megrt.arena : !megrt.buffer<tensor<64xf32>>
  %in = megrt.input 0 : !megrt.buffer<tensor<64xf32>>
  megrt.launch @k0(%in : !megrt.buffer<tensor<64xf32>>) -> (%a : !megrt.buffer<tensor<64xf32>>)
  megrt.launch @k1(%a : !megrt.buffer<tensor<64xf32>>) -> (%b : !megrt.buffer<tensor<16xf32>>)
  megrt.launch @k2(%b : !megrt.buffer<tensor<16xf32>>) -> (%in : !megrt.buffer<tensor<64xf32>>)
  megrt.launch @k3(%in : !megrt.buffer<tensor<64xf32>>) -> (%c : !megrt.buffer<tensor<64xf32>>)
}

// -----

// A view's uses are its storage's: %a is read through %v at the third
// command, so %b (written at the second) cannot take its place. A started
// collective's buffers live until its wait: %s stays live over the launch
// between them, so %t is placed beside it.
// CHECK-LABEL: megrt.entry @views_and_waits
// CHECK: megrt.arena {offset = 0 : i64} : !megrt.buffer<tensor<4x4xf32>>
// CHECK-NEXT: megrt.arena {offset = 64 : i64} : !megrt.buffer<tensor<16xf32>>
// CHECK-NEXT: megrt.view
// CHECK-NEXT: megrt.arena {offset = 128 : i64} : !megrt.buffer<tensor<16xf32>>
// CHECK-NEXT: megrt.arena {offset = 0 : i64} : !megrt.buffer<tensor<16xf32>>
megrt.entry @views_and_waits {
  %a = megrt.arena : !megrt.buffer<tensor<4x4xf32>>
  %b = megrt.arena : !megrt.buffer<tensor<16xf32>>
  %v = megrt.view %a : !megrt.buffer<tensor<4x4xf32>> to !megrt.buffer<tensor<16xf32>>
  %s = megrt.arena : !megrt.buffer<tensor<16xf32>>
  %t = megrt.arena : !megrt.buffer<tensor<16xf32>>
  megrt.launch @k0() -> (%a : !megrt.buffer<tensor<4x4xf32>>)
  megrt.launch @k1() -> (%b : !megrt.buffer<tensor<16xf32>>)
  megrt.launch @k2(%v, %b : !megrt.buffer<tensor<16xf32>>, !megrt.buffer<tensor<16xf32>>) -> (%s : !megrt.buffer<tensor<16xf32>>)
  %token = megrt.collective "all_reduce" %s : !megrt.buffer<tensor<16xf32>> -> %s : !megrt.buffer<tensor<16xf32>> {submesh = 0, count = 16} -> !megrt.token
  megrt.launch @k3() -> (%t : !megrt.buffer<tensor<16xf32>>)
  megrt.wait %token, %s : !megrt.buffer<tensor<16xf32>> -> %s : !megrt.buffer<tensor<16xf32>>
}

// -----

// What is live when the loss is first computed: the loss is copied into
// its output only after the backward, so the copy is followed back to
// where the loss was written (the third command), where the activation
// %act, the last forward value %last and the loss %l are live, not the
// backward's scratch %scratch: (100 + 10 + 1) * 4 bytes.
// CHECK-LABEL: megrt.entry @loss
// CHECK-SAME: live_at_loss_bytes = 444 : i64
megrt.entry @loss attributes {loss_output = 0} {
  %in = megrt.input 0 : !megrt.buffer<tensor<10xf32>>
  %act = megrt.arena : !megrt.buffer<tensor<100xf32>>
  %last = megrt.arena : !megrt.buffer<tensor<10xf32>>
  %l = megrt.arena : !megrt.buffer<tensor<1xf32>>
  %scratch = megrt.arena : !megrt.buffer<tensor<1000xf32>>
  %out = megrt.output 0 : !megrt.buffer<tensor<1xf32>>
  megrt.launch @forward(%in : !megrt.buffer<tensor<10xf32>>) -> (%act : !megrt.buffer<tensor<100xf32>>)
  megrt.launch @last(%act : !megrt.buffer<tensor<100xf32>>) -> (%last : !megrt.buffer<tensor<10xf32>>)
  megrt.launch @loss(%last : !megrt.buffer<tensor<10xf32>>) -> (%l : !megrt.buffer<tensor<1xf32>>)
  megrt.launch @backward(%l : !megrt.buffer<tensor<1xf32>>) -> (%scratch : !megrt.buffer<tensor<1000xf32>>)
  megrt.launch @backward2(%scratch, %act : !megrt.buffer<tensor<1000xf32>>, !megrt.buffer<tensor<100xf32>>) -> (%last : !megrt.buffer<tensor<10xf32>>)
  megrt.copy %l : !megrt.buffer<tensor<1xf32>> -> %out : !megrt.buffer<tensor<1xf32>> {bytes = 4}
}
