// RUN: aicfc-opt %s -p aicfc-plan-memory | filecheck %s
// RUN: aicfc-opt %s -p 'aicfc-plan-memory{branches=false}' | filecheck %s

// A reshape (alias "view") makes its result a view of its operand: the two are placed as
// one buffer live over both lifetimes, so %v is at %a's offset (the backends then read
// %a's bytes instead of copying) and %b, written after %a's last use, does not take them.
// Lifetimes: %a [0, 1], %v [1, 3], %b [2, end], %c [3, end].

// CHECK-LABEL: exec.program @reshape_shares_its_operand arena = 768 {
// CHECK:         %a = exec.alloc offset = 0 : !exec.buffer<64xf32, tmp>
// CHECK-NEXT:    %v = exec.alloc offset = 0 : !exec.buffer<8x8xf32, tmp>
// CHECK-NEXT:    %b = exec.alloc offset = 256 : !exec.buffer<64xf32, tmp>
// CHECK-NEXT:    %c = exec.alloc offset = 512 : !exec.buffer<8x8xf32, tmp>
exec.program @reshape_shares_its_operand {
  %x = exec.buffer "x" : !exec.buffer<64xf32, input>
  %a = exec.alloc : !exec.buffer<64xf32, tmp>
  %v = exec.alloc : !exec.buffer<8x8xf32, tmp>
  %b = exec.alloc : !exec.buffer<64xf32, tmp>
  %c = exec.alloc : !exec.buffer<8x8xf32, tmp>
  exec.graph {
    exec.launch "numpy.tanh"(%x) outs(%a) : (!exec.buffer<64xf32, input>) -> (!exec.buffer<64xf32, tmp>)
    exec.launch "numpy.reshape_out"(%a) outs(%v) alias = "view" : (!exec.buffer<64xf32, tmp>) -> (!exec.buffer<8x8xf32, tmp>)
    exec.launch "numpy.tanh"(%x) outs(%b) : (!exec.buffer<64xf32, input>) -> (!exec.buffer<64xf32, tmp>)
    exec.launch "numpy.relu"(%v) outs(%c) : (!exec.buffer<8x8xf32, tmp>) -> (!exec.buffer<8x8xf32, tmp>)
  }
  exec.output "b" %b : !exec.buffer<64xf32, tmp>
  exec.output "c" %c : !exec.buffer<8x8xf32, tmp>
}

// %a is written again (position 2) while %v still lives: sharing would change what %v
// reads, so the reshape stays a copy into bytes of its own.

// CHECK-LABEL: exec.program @operand_rewritten_while_the_view_lives arena = 768 {
// CHECK:         %a = exec.alloc offset = 0 : !exec.buffer<64xf32, tmp>
// CHECK-NEXT:    %v = exec.alloc offset = 256 : !exec.buffer<8x8xf32, tmp>
// CHECK-NEXT:    %c = exec.alloc offset = 512 : !exec.buffer<8x8xf32, tmp>
exec.program @operand_rewritten_while_the_view_lives {
  %x = exec.buffer "x" : !exec.buffer<64xf32, input>
  %a = exec.alloc : !exec.buffer<64xf32, tmp>
  %v = exec.alloc : !exec.buffer<8x8xf32, tmp>
  %c = exec.alloc : !exec.buffer<8x8xf32, tmp>
  exec.graph {
    exec.launch "numpy.tanh"(%x) outs(%a) : (!exec.buffer<64xf32, input>) -> (!exec.buffer<64xf32, tmp>)
    exec.launch "numpy.reshape_out"(%a) outs(%v) alias = "view" : (!exec.buffer<64xf32, tmp>) -> (!exec.buffer<8x8xf32, tmp>)
    exec.launch "numpy.relu"(%x) outs(%a) : (!exec.buffer<64xf32, input>) -> (!exec.buffer<64xf32, tmp>)
    exec.launch "numpy.relu"(%v) outs(%c) : (!exec.buffer<8x8xf32, tmp>) -> (!exec.buffer<8x8xf32, tmp>)
  }
  exec.output "a" %a : !exec.buffer<64xf32, tmp>
  exec.output "c" %c : !exec.buffer<8x8xf32, tmp>
}

// A chain of views (%a -> %v -> %w) is one group at one offset.

// CHECK-LABEL: exec.program @chain_of_views arena = 512 {
// CHECK:         %a = exec.alloc offset = 0 : !exec.buffer<64xf32, tmp>
// CHECK-NEXT:    %v = exec.alloc offset = 0 : !exec.buffer<8x8xf32, tmp>
// CHECK-NEXT:    %w = exec.alloc offset = 0 : !exec.buffer<4x16xf32, tmp>
// CHECK-NEXT:    %c = exec.alloc offset = 256 : !exec.buffer<4x16xf32, tmp>
exec.program @chain_of_views {
  %x = exec.buffer "x" : !exec.buffer<64xf32, input>
  %a = exec.alloc : !exec.buffer<64xf32, tmp>
  %v = exec.alloc : !exec.buffer<8x8xf32, tmp>
  %w = exec.alloc : !exec.buffer<4x16xf32, tmp>
  %c = exec.alloc : !exec.buffer<4x16xf32, tmp>
  exec.graph {
    exec.launch "numpy.tanh"(%x) outs(%a) : (!exec.buffer<64xf32, input>) -> (!exec.buffer<64xf32, tmp>)
    exec.launch "numpy.reshape_out"(%a) outs(%v) alias = "view" : (!exec.buffer<64xf32, tmp>) -> (!exec.buffer<8x8xf32, tmp>)
    exec.launch "numpy.reshape_out"(%v) outs(%w) alias = "view" : (!exec.buffer<8x8xf32, tmp>) -> (!exec.buffer<4x16xf32, tmp>)
    exec.launch "numpy.relu"(%w) outs(%c) : (!exec.buffer<4x16xf32, tmp>) -> (!exec.buffer<4x16xf32, tmp>)
  }
  exec.output "c" %c : !exec.buffer<4x16xf32, tmp>
}
