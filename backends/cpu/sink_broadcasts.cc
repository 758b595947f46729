#include "backends/cpu/sink_broadcasts.h"

#include <llvm/Analysis/AliasAnalysis.h>
#include <llvm/Analysis/LoopInfo.h>
#include <llvm/Analysis/MemoryLocation.h>
#include <llvm/Analysis/TargetTransformInfo.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/Instructions.h>

#include <algorithm>
#include <map>
#include <vector>

namespace lt::cpu {
namespace {

// `v` as shufflevector(insertelement(_, load, 0), _, zeroinitializer) made outside `loop`: the
// load, else null.
llvm::LoadInst* hoisted_broadcast_load(llvm::Value* v, const llvm::Loop& loop) {
  auto* sv = llvm::dyn_cast<llvm::ShuffleVectorInst>(v);
  if (!sv || loop.contains(sv) || !sv->isZeroEltSplat()) return nullptr;
  auto* ie = llvm::dyn_cast<llvm::InsertElementInst>(sv->getOperand(0));
  if (!ie || loop.contains(ie)) return nullptr;
  auto* idx = llvm::dyn_cast<llvm::ConstantInt>(ie->getOperand(2));
  if (!idx || !idx->isZero()) return nullptr;
  auto* ld = llvm::dyn_cast<llvm::LoadInst>(ie->getOperand(1));
  if (!ld || !ld->isSimple() || loop.contains(ld)) return nullptr;
  return ld;
}

// What a loop may write, gathered once per loop: the loads to remake are checked against it.
struct LoopWrites {
  const llvm::Loop& loop;
  llvm::AAResults& aa;
  std::vector<llvm::Instruction*> writers;

  LoopWrites(const llvm::Loop& l, llvm::AAResults& a) : loop(l), aa(a) {
    for (llvm::BasicBlock* bb : loop.blocks())
      for (llvm::Instruction& in : *bb)
        if (in.mayWriteToMemory()) writers.push_back(&in);
  }
  bool may_write(const llvm::LoadInst* ld) const {
    if (ld->hasMetadata(llvm::LLVMContext::MD_invariant_load)) return false;  // by its promise
    const llvm::MemoryLocation loc = llvm::MemoryLocation::get(ld);
    for (llvm::Instruction* w : writers)
      if (llvm::isModSet(aa.getModRefInfo(w, loc))) return true;
    return false;
  }
};

// Re-makes `v` before `before` when it is outside the loop and cheap to make again: a load no
// instruction of the loop may write, a constant-index address, or the insert and shuffle of a
// broadcast, each from operands made the same way. Anything else (an argument, a value computed
// before the loop) is used as it is. `made` holds this block's copies, each made once.
llvm::Value* remake(llvm::Value* v, llvm::Instruction* before, const LoopWrites& writes,
                    std::map<llvm::Value*, llvm::Instruction*>& made) {
  auto* in = llvm::dyn_cast<llvm::Instruction>(v);
  if (!in || writes.loop.contains(in)) return v;
  if (auto it = made.find(in); it != made.end()) return it->second;
  bool cheap = false;
  if (auto* ld = llvm::dyn_cast<llvm::LoadInst>(in))
    cheap = ld->isSimple() && !writes.may_write(ld);
  else if (auto* gep = llvm::dyn_cast<llvm::GetElementPtrInst>(in))
    cheap = gep->hasAllConstantIndices();
  else
    cheap = llvm::isa<llvm::InsertElementInst>(in) || llvm::isa<llvm::ShuffleVectorInst>(in);
  if (!cheap) return v;
  llvm::Instruction* copy = in->clone();
  for (unsigned i = 0; i < copy->getNumOperands(); ++i)
    copy->setOperand(i, remake(in->getOperand(i), before, writes, made));
  copy->insertBefore(before);
  made[in] = copy;
  return copy;
}

bool sink_in(llvm::Loop& loop, llvm::AAResults& aa, unsigned limit) {
  // The uses in the loop of broadcasts of hoisted loads, in block order (phis excluded: their
  // uses are on edges).
  std::vector<llvm::Use*> uses;
  std::vector<llvm::Value*> distinct;
  for (llvm::BasicBlock* bb : loop.blocks())
    for (llvm::Instruction& in : *bb) {
      if (llvm::isa<llvm::PHINode>(in)) continue;
      for (llvm::Use& u : in.operands())
        if (hoisted_broadcast_load(u.get(), loop)) {
          uses.push_back(&u);
          if (std::find(distinct.begin(), distinct.end(), u.get()) == distinct.end())
            distinct.push_back(u.get());
        }
    }
  if (distinct.size() <= limit) return false;
  const LoopWrites writes(loop, aa);
  std::map<llvm::BasicBlock*, std::map<llvm::Value*, llvm::Instruction*>> made;
  bool changed = false;
  for (llvm::Use* u : uses) {
    auto* user = llvm::cast<llvm::Instruction>(u->getUser());
    llvm::Value* copy = remake(u->get(), user, writes, made[user->getParent()]);
    if (copy != u->get()) u->set(copy), changed = true;
  }
  // The originals, now unused where every use was remade (a load the loop may write keeps its
  // broadcast outside), go, operands after users.
  for (llvm::Value* v : distinct) {
    std::vector<llvm::Instruction*> dead{llvm::cast<llvm::Instruction>(v)};
    while (!dead.empty()) {
      llvm::Instruction* in = dead.back();
      dead.pop_back();
      if (!in->use_empty() || in->mayHaveSideEffects()) continue;
      std::vector<llvm::Instruction*> ops;
      for (llvm::Value* op : in->operands())
        if (auto* o = llvm::dyn_cast<llvm::Instruction>(op)) ops.push_back(o);
      in->eraseFromParent();
      for (llvm::Instruction* o : ops)
        if (std::find(dead.begin(), dead.end(), o) == dead.end()) dead.push_back(o);
    }
  }
  return changed;
}

}  // namespace

llvm::PreservedAnalyses SinkHoistedBroadcastsPass::run(llvm::Function& f,
                                                       llvm::FunctionAnalysisManager& fam) {
  if (f.isDeclaration()) return llvm::PreservedAnalyses::all();
  auto& li = fam.getResult<llvm::LoopAnalysis>(f);
  auto& aa = fam.getResult<llvm::AAManager>(f);
  const auto& tti = fam.getResult<llvm::TargetIRAnalysis>(f);
  // Half the vector registers (AVX-512: 16 of 32; AVX2: 8 of 16) may hold broadcasts; the loop's
  // own values need the rest.
  const unsigned limit = tti.getNumberOfRegisters(tti.getRegisterClassForType(true)) / 2;
  bool changed = false;
  for (llvm::Loop* loop : li.getLoopsInPreorder())
    if (loop->isInnermost()) changed |= sink_in(*loop, aa, limit);
  if (!changed) return llvm::PreservedAnalyses::all();
  llvm::PreservedAnalyses pa;
  pa.preserveSet<llvm::CFGAnalyses>();
  return pa;
}

}  // namespace lt::cpu
