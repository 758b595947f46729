#include "backends/cpu/erf_table.h"

#include <llvm/IR/IntrinsicsX86.h>
#include <llvm/IR/Module.h>

#include <array>
#include <cmath>
#include <functional>
#include <string>

#include "backends/cpu/jit.h"
#include "backends/cpu/vector_variant.h"

namespace lt::cpu {
namespace {

using llvm::IRBuilder;
using llvm::Value;
using Table = std::array<float, 4>;

// erf(u), u = |x| clamped below 4, on the 4 intervals k = floor(u), with s = u - k:
//   k = 0: u + s Q_0(s);  k > 0: c_k + s Q_k(s),  c_k = erf(k) rounded to float32.
// Each result is one FMA onto a term that carries most of it, so Q's rounding error is small in
// ulps of the result. Q_k has degree 8 (degree 7 measured 1.82 ulp, too close to the 2 ulp bar);
// coefficients from erf_table_fit.py (Lawson-weighted least squares, error weighted by 1/ulp),
// highest degree first. Over all floats in [0, 4] the AVX2 code measured at most 1.41 ulp.
constexpr Table kBase = {INFINITY, 0.842700779f, 0.995322287f, 0.999977887f};  // inf: see erf_body
constexpr std::array<Table, 9> kQ = {{
    {-0.00105115445f, 0.00329360389f, -0.00310842041f, 0.00338963582f},
    {0.013939877f, -0.0172265377f, 0.0142999487f, -0.0150841288f},
    {-0.0414293483f, 0.0335756019f, -0.0270727165f, 0.0280405581f},
    {0.0085704634f, -0.0121765733f, 0.0244822484f, -0.0283137653f},
    {0.109911136f, -0.0597791448f, -0.00112018257f, 0.0170417428f},
    {0.000558332074f, 0.066014573f, -0.0295087956f, -0.00651422748f},
    {-0.376179606f, 0.13897641f, 0.0472599268f, 0.00183785066f},
    {1.95901816e-06f, -0.41516614f, -0.0412398502f, -0.000518506218f},
    {0.128379151f, 0.415109694f, 0.0206634421f, 0.000142981924f},
}};

// Largest float below 4: the clamp keeps floor(u) at most 3. erf there rounds to 1 (1 - erf(4) is
// below half an ulp of 1), as it does for every larger u, inf included.
constexpr float kClamp = 3.99999976f;

using Lookup = std::function<Value*(const Table&, Value* idx)>;
using Truncate = std::function<Value*(Value* u)>;

// The body shared by the scalar and the vector functions: x and the result are float,
// <8 x float> or <16 x float>; `truncate` gives floor(u) as i32 with x86 semantics (NaN does not
// make poison, as LLVM's fptosi would; its index 0x80000000 reads entry 0, and NaN stays NaN
// through s), and `lookup` picks each lane's entry of a table by the low 2 bits of that index.
// Besides the polynomial's 9 lookups and 8 FMAs: 10 instructions (abs, clamp, floor, truncate, s,
// base lookup and min, FMA, sign and/or).
Value* erf_body(IRBuilder<>& b, Value* x, const Lookup& lookup, const Truncate& truncate) {
  llvm::Type* f = x->getType();
  llvm::Type* i = b.getInt32Ty();
  if (auto* v = llvm::dyn_cast<llvm::VectorType>(f)) i = llvm::VectorType::get(i, v);
  auto c = [&](double v) { return llvm::ConstantFP::get(f, v); };
  Value* u = b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
  u = b.CreateSelect(b.CreateFCmpOGT(u, c(kClamp)), c(kClamp), u);  // vminps; NaN passes
  Value* idx = truncate(u);
  Value* s = b.CreateFSub(u, b.CreateUnaryIntrinsic(llvm::Intrinsic::floor, u));  // exact
  Value* q = lookup(kQ[0], idx);
  for (size_t j = 1; j < kQ.size(); ++j)
    q = b.CreateIntrinsic(llvm::Intrinsic::fma, {f}, {q, s, lookup(kQ[j], idx)});
  // The term s q is added to: u on interval 0, else c_k. One min does both: kBase holds +inf for
  // k = 0 and c_k < 1 <= u for k > 0.
  Value* cb = lookup(kBase, idx);
  Value* base = b.CreateSelect(b.CreateFCmpOGT(cb, u), u, cb);
  Value* r = b.CreateBitCast(b.CreateIntrinsic(llvm::Intrinsic::fma, {f}, {s, q, base}), i);
  // r >= 0; x's sign bit makes erf odd and keeps erf(-0) = -0.
  Value* sign = b.CreateAnd(b.CreateBitCast(x, i), llvm::ConstantInt::get(i, 0x80000000u));
  return b.CreateBitCast(b.CreateOr(r, sign), f);
}

llvm::Function* make_function(llvm::Module& m, const char* name, llvm::Type* t) {
  auto* fn = llvm::Function::Create(llvm::FunctionType::get(t, {t}, false),
                                    llvm::Function::InternalLinkage, name, m);
  fn->setDoesNotAccessMemory();
  fn->setDoesNotThrow();
  fn->setWillReturn();
  fn->addFnAttr(llvm::Attribute::NoRecurse);
  return fn;
}

// Scalar lookup: a load from a constant 4-entry array (the scalar remainder loop runs this).
Value* scalar_lookup(IRBuilder<>& b, llvm::Module& m, const Table& t, Value* idx) {
  auto* ty = llvm::ArrayType::get(b.getFloatTy(), 4);
  llvm::Constant* init = llvm::ConstantDataArray::get(m.getContext(), llvm::ArrayRef<float>(t));
  auto* g = new llvm::GlobalVariable(m, ty, true, llvm::GlobalValue::PrivateLinkage, init,
                                     "lt_erf_table");
  g->setUnnamedAddr(llvm::GlobalValue::UnnamedAddr::Global);
  Value* k = b.CreateZExt(b.CreateAnd(idx, 3), b.getInt64Ty());
  return b.CreateLoad(b.getFloatTy(), b.CreateInBoundsGEP(ty, g, {b.getInt64(0), k}));
}

// Vector lookup, 8 lanes (AVX2): the table repeated in both 128-bit lanes, vpermilps reads idx's
// low 2 bits.
Value* vector_lookup8(IRBuilder<>& b, const Table& t, Value* idx) {
  float both[8] = {t[0], t[1], t[2], t[3], t[0], t[1], t[2], t[3]};
  Value* table = llvm::ConstantDataVector::get(b.getContext(), llvm::ArrayRef<float>(both));
  return b.CreateIntrinsic(llvm::Intrinsic::x86_avx_vpermilvar_ps_256, {}, {table, idx});
}

// Vector lookup, 16 lanes (AVX-512): vpermps reads idx's low 4 bits, so the table is repeated 4
// times and entry (idx & 3) is read as in the 8-lane form (NaN's index 0x80000000 reads entry 0).
Value* vector_lookup16(IRBuilder<>& b, const Table& t, Value* idx) {
  float all[16];
  for (int i = 0; i < 16; ++i) all[i] = t[i % 4];
  Value* table = llvm::ConstantDataVector::get(b.getContext(), llvm::ArrayRef<float>(all));
  return b.CreateIntrinsic(llvm::Intrinsic::x86_avx512_permvar_sf_512, {}, {table, idx});
}

llvm::Function* erf_functions(llvm::Module& m) {
  if (llvm::Function* fn = m.getFunction("lt_erf_f32")) return fn;
  llvm::LLVMContext& ctx = m.getContext();
  llvm::Type* f32 = llvm::Type::getFloatTy(ctx);
  llvm::Function* scalar = make_function(m, "lt_erf_f32", f32);
  IRBuilder<> b(ctx);
  b.SetInsertPoint(llvm::BasicBlock::Create(ctx, "entry", scalar));
  b.CreateRet(erf_body(
      b, scalar->getArg(0), [&](const Table& t, Value* idx) { return scalar_lookup(b, m, t, idx); },
      [&](Value* u) {
        Value* v = b.CreateInsertElement(llvm::PoisonValue::get(llvm::FixedVectorType::get(f32, 4)),
                                         u, uint64_t{0});
        return b.CreateIntrinsic(llvm::Intrinsic::x86_sse_cvttss2si, {}, {v});
      }));
  // One vector variant per width the loop vectorizer may choose.
  auto add_variant = [&](unsigned lanes, const Lookup& lookup, const Truncate& truncate) {
    llvm::Function* vec = make_function(m, ("lt_erf_f32_v" + std::to_string(lanes)).c_str(),
                                        llvm::FixedVectorType::get(f32, lanes));
    b.SetInsertPoint(llvm::BasicBlock::Create(ctx, "entry", vec));
    b.CreateRet(erf_body(b, vec->getArg(0), lookup, truncate));
    map_vector_variant(m, scalar, vec, lanes);
  };
  add_variant(
      8, [&](const Table& t, Value* idx) { return vector_lookup8(b, t, idx); },
      [&](Value* u) {
        return b.CreateIntrinsic(llvm::Intrinsic::x86_avx_cvtt_ps2dq_256, {}, {u});
      });
  // Where the target has AVX-512 the vectorizer may choose 16 lanes for the whole loop (it does
  // where the target prefers 512-bit vectors, e.g. AMD Zen 4/5); without a 16-lane variant it
  // would fall back to 8 lanes for every operation in the loop, not only erf.
  if (jit_target_has("avx512f"))
    add_variant(
        16, [&](const Table& t, Value* idx) { return vector_lookup16(b, t, idx); },
        [&](Value* u) {
          // vcvttps2dq zmm, with every lane written (mask all ones) and the current rounding mode
          // (4 = _MM_FROUND_CUR_DIRECTION; truncation ignores it).
          auto* i16 = llvm::FixedVectorType::get(b.getInt32Ty(), 16);
          return b.CreateIntrinsic(
              llvm::Intrinsic::x86_avx512_mask_cvttps2dq_512, {},
              {u, llvm::PoisonValue::get(i16), b.getInt16(0xffff), b.getInt32(4)});
        });
  return scalar;
}

}  // namespace

bool erf_table_available() { return jit_target_has("avx2") && jit_target_has("fma"); }

Value* emit_erf_table_call(IRBuilder<>& b, llvm::Module& m, Value* x) {
  return b.CreateCall(erf_functions(m), {x});
}

}  // namespace lt::cpu
