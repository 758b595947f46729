// Loop IR -> LLVM IR. Each kernel becomes
//   void <name>(void** args, int64_t begin, int64_t end)
// which computes the outer points [begin, end) of the kernel's row-major flattened outer space
// (an empty outer space is one point, [0, 1)). args[i] points at the data of Kernel::args[i]
// (for a scalar arg: an 8-byte slot holding the value in the arg's dtype). A symbolic kernel
// (loop::Kernel::symbolic) also reads args[args.size()]: the int64 values of the size parameters
// its fields name (cpu_executable.h), loaded once per call; its loops, strides, offsets and
// constants use them where the fields are annotated, and constants elsewhere.
//
// Loop nest per call: rows of the flattened range (the outer index is split into its dims once
// per row with constant div/mod), then a loop along the innermost outer dim; per outer point the
// stages run in order: Reduce loops the inner dims into an accumulator, MapInner loops the inner
// dims and stores, MapOuter stores once. Affine indices are summed outermost variable first so
// each partial sum is loop-invariant one level down (LICM and strength reduction finish the job)
// and the innermost access is a plain induction the vectorizer recognizes. The buffer pointers
// are noalias parameters of an always-inlined body function, which becomes scoped-noalias
// metadata once inlined into the wrapper. Except for a kernel's in-place pairs (an input the
// runtime may donate to an output, Kernel::inplace): they get a body without that promise, and a
// second body, chosen when the pointers are equal, that reads the input through the output's.
#pragma once
#include <string>

#include "lowering/loop_ir.h"

namespace llvm {
class Module;
}

namespace lt::cpu {

// Appends the kernel (already validated and dim-merged) to `m` as function `name`.
void emit_kernel(llvm::Module& m, const loop::Kernel& k, const std::string& name);

}  // namespace lt::cpu
