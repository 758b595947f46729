// Scalar functions with a hand-written vector body for the loop vectorizer. LLVM IR has no
// portable table lookup across vector lanes (a scalar load from a constant array becomes a gather),
// so code that needs one (erf_table.h: vpermilps per coefficient) is written twice: a scalar
// function, which the kernel calls, and a vector function the loop vectorizer calls in its place
// through a VFABI mapping. Both stay out of line through the O2 pipeline (a call is what the
// vectorizer maps) and are inlined into their callers afterwards, so a kernel loop ends up as
// straight-line vector code with no call.
#pragma once

namespace llvm {
class Function;
class Module;
}  // namespace llvm

namespace lt::cpu {

// Maps calls of `scalar` (one float argument) to `vec` (the same on <vf x float>), in addition to
// any variant mapped before for another vf: the vectorizer
// widens a call by VF `vf` into a call of `vec`. Keeps `vec` alive through the pipeline (it has no
// caller until the vectorizer makes one) and keeps `scalar` out of line until then.
void map_vector_variant(llvm::Module& m, llvm::Function* scalar, llvm::Function* vec, unsigned vf);

// After the O2 pipeline: inlines every call of a function given to map_vector_variant and deletes
// those functions, so no call is left in the object code.
void inline_vector_variants(llvm::Module& m);

}  // namespace lt::cpu
