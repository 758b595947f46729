#include "backends/cpu/vector_variant.h"

#include <llvm/IR/Instructions.h>
#include <llvm/IR/Module.h>
#include <llvm/Transforms/Utils/Cloning.h>
#include <llvm/Transforms/Utils/ModuleUtils.h>

#include <string>
#include <vector>

#include "ir/error.h"

namespace lt::cpu {
namespace {

// Marks the functions inline_vector_variants must inline once the vectorizer is done.
constexpr const char* kMarker = "lt-vector-variant";

}  // namespace

void map_vector_variant(llvm::Module& m, llvm::Function* scalar, llvm::Function* vec, unsigned vf) {
  // VFABI name for LLVM's internal ISA: _ZGV_LLVM_<unmasked>N<vf><one vector arg v>_<scalar>(vec).
  std::string mapping = "_ZGV_LLVM_N" + std::to_string(vf) + "v_" + scalar->getName().str() + "(" +
                        vec->getName().str() + ")";
  // One scalar function may have several variants (8 and 16 lanes): the attribute lists them all.
  llvm::Attribute prior = scalar->getFnAttribute("vector-function-abi-variant");
  if (prior.isValid()) mapping = prior.getValueAsString().str() + "," + mapping;
  scalar->addFnAttr("vector-function-abi-variant", mapping);
  scalar->addFnAttr(llvm::Attribute::NoInline);
  scalar->addFnAttr(kMarker);
  vec->addFnAttr(kMarker);
  llvm::appendToCompilerUsed(m, {vec});
}

void inline_vector_variants(llvm::Module& m) {
  std::vector<llvm::Function*> marked;
  for (llvm::Function& f : m)
    if (f.hasFnAttribute(kMarker)) marked.push_back(&f);
  if (marked.empty()) return;
  llvm::removeFromUsedLists(m, [](llvm::Constant* c) {
    auto* f = llvm::dyn_cast<llvm::Function>(c);
    return f && f->hasFnAttribute(kMarker);
  });
  for (llvm::Function* f : marked) {
    f->removeFnAttr(llvm::Attribute::NoInline);
    std::vector<llvm::CallBase*> calls;
    for (llvm::User* u : f->users())
      if (auto* call = llvm::dyn_cast<llvm::CallBase>(u)) calls.push_back(call);
    for (llvm::CallBase* call : calls) {
      llvm::InlineFunctionInfo info;
      llvm::InlineResult r = llvm::InlineFunction(*call, info);
      LT_CHECK(r.isSuccess(), ErrorKind::Runtime, "cpu backend: internal: cannot inline ",
               f->getName().str(), ": ", r.getFailureReason());
    }
  }
  for (llvm::Function* f : marked)
    if (f->use_empty()) f->eraseFromParent();
}

}  // namespace lt::cpu
