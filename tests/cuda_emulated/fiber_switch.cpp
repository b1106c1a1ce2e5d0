// The emulated block's switch between fibers (x86-64 System V): the callee-saved registers go on the running
// stack, its pointer into *save, and the other stack's registers come back; `ret` resumes where it switched out.
#include <cstdint>

#if !defined(__x86_64__)
#error "the emulated CUDA tests switch fibers with x86-64 code"
#endif

asm(R"(
  .text
  .globl emulated_fiber_switch
  .type emulated_fiber_switch, @function
emulated_fiber_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size emulated_fiber_switch, .-emulated_fiber_switch
)");
