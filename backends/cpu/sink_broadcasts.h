// Loop-invariant scalars broadcast into vectors, moved back into the loops that use them when there
// are too many to keep in registers. A kernel with many scalar arguments (a 500-step chain of
// `y * a + b`, an optimizer step over many parameters) loads each scalar in its loop, and LICM
// hoists each load and broadcast out of the vector loop, so hundreds of broadcast values live
// across it. With 16 or 32 vector registers, LLVM's greedy register allocator then spends most of
// the compile splitting and spilling them (~70% of the code generation of a kernel with 256 such
// scalars). Loaded again next to their uses, each is a broadcast memory operand (AVX-512) or a
// short-lived register, and register allocation is cheap again.
#pragma once
#include <llvm/IR/PassManager.h>

namespace lt::cpu {

// For the end of the O2 pipeline (PassBuilder::registerOptimizerLastEPCallback): in each innermost
// loop that uses more splats of scalar loads made outside it than half the target's vector
// registers (16 with AVX-512, 8 with AVX2), re-emits load + broadcast in every block that uses
// one, before its first use there. Only loads whose location no instruction in the loop may
// write (alias analysis), so the re-load reads the value the hoisted load read.
struct SinkHoistedBroadcastsPass : llvm::PassInfoMixin<SinkHoistedBroadcastsPass> {
  llvm::PreservedAnalyses run(llvm::Function& f, llvm::FunctionAnalysisManager& fam);
};

}  // namespace lt::cpu
