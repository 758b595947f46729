#include "backends/cpu/streaming_stores.h"

#include <llvm/Analysis/ValueTracking.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/IntrinsicInst.h>
#include <llvm/IR/IntrinsicsX86.h>
#include <llvm/IR/Module.h>
#include <llvm/Transforms/Utils/Local.h>

namespace lt::cpu {
namespace {

// Marks a streaming body, and its streamed arguments (on the arguments themselves, so the mark
// stays right if the pipeline drops an unused argument).
constexpr const char* kStreamBody = "lt-stream-body";
constexpr const char* kStreamed = "lt-streamed";
constexpr int64_t kStreamBytes = int64_t{4} << 20;

}  // namespace

std::vector<bool> streamed_outputs(const loop::Kernel& k) {
  std::vector<bool> r(k.args.size(), false);
  // Row kernels only: their vector loops start each row at inner index 0, so a row that starts
  // aligned is stored in aligned vectors and stream_stores can prove it. An elementwise loop
  // starts wherever the thread pool's chunk does, which LLVM cannot know.
  if (k.inner.empty() || numel(k.inner) == 0) return r;
  for (size_t i = 0; i < k.args.size(); ++i) {
    const loop::Arg& a = k.args[i];
    r[i] = a.output && !a.scalar &&
           a.numel * static_cast<int64_t>(dtype_size(a.dtype)) >= kStreamBytes;
  }
  for (const auto& st : k.stages)
    for (const auto& s : st.stores)
      if (s.accumulate) r[static_cast<size_t>(s.arg)] = false;
  return r;
}

void mark_streaming_body(llvm::Function* body, const std::vector<bool>& streamed) {
  body->addFnAttr(kStreamBody);
  for (size_t i = 0; i < streamed.size(); ++i)
    if (streamed[i])
      body->addParamAttr(static_cast<unsigned>(i),
                         llvm::Attribute::get(body->getContext(), kStreamed));
}

void stream_stores(llvm::Module& m) {
  const llvm::DataLayout& dl = m.getDataLayout();
  for (llvm::Function& f : m) {
    if (!f.hasFnAttribute(kStreamBody)) continue;
    std::vector<const llvm::Argument*> streamed;
    for (llvm::Argument& a : f.args())
      if (f.getAttributes().hasParamAttr(a.getArgNo(), kStreamed)) streamed.push_back(&a);
    llvm::MDNode* nt =
        llvm::MDNode::get(m.getContext(), {llvm::ConstantAsMetadata::get(llvm::ConstantInt::get(
                                              llvm::Type::getInt32Ty(m.getContext()), 1))});
    std::vector<llvm::ReturnInst*> rets;
    for (llvm::BasicBlock& bb : f) {
      for (llvm::Instruction& in : bb) {
        if (auto* ret = llvm::dyn_cast<llvm::ReturnInst>(&in)) rets.push_back(ret);
        auto* st = llvm::dyn_cast<llvm::StoreInst>(&in);
        if (!st || !st->getValueOperand()->getType()->isVectorTy()) continue;
        const llvm::Value* base = llvm::getUnderlyingObject(st->getPointerOperand());
        bool into_streamed = false;
        for (const llvm::Argument* a : streamed) into_streamed |= base == a;
        const uint64_t bytes = dl.getTypeStoreSize(st->getValueOperand()->getType());
        if (!into_streamed || bytes < 16) continue;
        llvm::Align known = llvm::getKnownAlignment(st->getPointerOperand(), dl, st);
        if (known.value() < bytes) continue;
        st->setAlignment(llvm::Align(bytes));
        st->setMetadata(llvm::LLVMContext::MD_nontemporal, nt);
      }
    }
    for (llvm::ReturnInst* ret : rets) {
      llvm::IRBuilder<> b(ret);
      b.CreateIntrinsic(llvm::Intrinsic::x86_sse_sfence, {}, {});
    }
  }
}

}  // namespace lt::cpu
