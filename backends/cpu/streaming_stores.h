// Non-temporal ("streaming") stores for kernels that write large outputs. A plain store first
// reads its cache line (read for ownership) and leaves the written data in cache, where an 8 MB
// output evicts the kernel's own inputs; a non-temporal store writes around the cache. Measured on
// gelu(layer_norm(x, w, b)) + r, 2048 x 1024 float32 (2 cores, AMD EPYC): layer_norm alone
// 0.88-0.92 -> 0.38-0.47 ms, the fused row 1.73 -> 1.45 ms (bench/run.py rows, same runs).
//
// x86 has them only for whole aligned vectors, and the loop vectorizer refuses a loop whose scalar
// stores carry !nontemporal without that alignment. So the kernel gets a separate body for
// streaming, kept out of line, whose streamed output arguments promise kStreamAlign bytes of
// alignment (the wrapper checks the pointers and runs the plain body otherwise); after the O2
// pipeline, stream_stores() marks the vector stores that provably land on aligned addresses.
#pragma once
#include <vector>

#include "lowering/loop_ir.h"

namespace llvm {
class Function;
class Module;
}  // namespace llvm

namespace lt::cpu {

// Alignment (bytes) a streaming body requires of its streamed outputs: one AVX-512 vector (and one
// cache line). A non-temporal store needs its vector's own alignment: with 32, the 16-lane loops
// LLVM builds for hosts that prefer 512-bit vectors could not stream. HostBuffer gives 64.
constexpr unsigned kStreamAlign = 64;

// Per kernel argument: whether the kernel streams its stores to it. Outputs of row kernels (a
// loop over inner dims per outer point) of at least 4 MiB written with plain (not accumulating)
// stores; smaller outputs are often read again soon, from cache.
std::vector<bool> streamed_outputs(const loop::Kernel& k);

// Marks `body` (the streaming body of a kernel, see above) for stream_stores.
void mark_streaming_body(llvm::Function* body, const std::vector<bool>& streamed);

// After the O2 pipeline: in each marked body, a vector store into a streamed argument at an
// address known to be kStreamAlign-aligned becomes non-temporal, and the body ends with sfence
// (non-temporal stores are weakly ordered; the fence makes them visible before the threads that
// ran the chunks report done).
void stream_stores(llvm::Module& m);

}  // namespace lt::cpu
