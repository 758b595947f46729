// KernelGen's elementwise kernel (only MapOuter stages; see cuda_codegen.h for the grid mapping).
// GCC 12 reports a false -Wrestrict in `"literal" + std::string&&` at -O2/-O3 (GCC bug 105329);
// this file is made of such concatenations.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wrestrict"
#endif
#include "backends/cuda/kernel_gen.h"

#include <map>
#include <set>

#include "backends/cuda/cuda_expr.h"

namespace lt::cudagen {

// An access of the elementwise space at exactly offset + flat outer index (row-major), offset a
// multiple of 4: the 4 points of a vector lane are 4 consecutive, aligned elements.
bool KernelGen::flat_access(const Index& ix) const {
  if (sym_) return flat_access_symbolic(ix);
  if (!ix.affine() || ix.offset % 4 != 0 || ix.offset < 0) return false;
  int64_t want = 1;
  for (int d = static_cast<int>(ext_.size()) - 1; d >= 0; --d) {
    int64_t st = d < static_cast<int>(ix.strides.size()) ? ix.strides[static_cast<size_t>(d)] : 0;
    if (d >= nouter_) {
      if (st && ext_[static_cast<size_t>(d)] > 1) return false;
      continue;
    }
    if (ext_[static_cast<size_t>(d)] > 1 && st != want) return false;
    want *= ext_[static_cast<size_t>(d)];
  }
  return true;
}

// flat_access at every binding of a symbolic kernel: the offset is static, and each stride is
// the product of the extents after its dim, decided on the parameters (a stride equal to that
// product only at the hint does not count). The product is tracked as a static factor times at
// most one parameter; anything longer is taken as not flat.
bool KernelGen::flat_access_symbolic(const Index& ix) const {
  if (!ix.affine() || ix.offset_param >= 0 || ix.offset % 4 != 0 || ix.offset < 0) return false;
  int64_t want = 1;     // the stride a flat access has at the current dim: want,
  int want_param = -1;  // times this parameter (when >= 0)
  for (int d = static_cast<int>(ext_.size()) - 1; d >= 0; --d) {
    const size_t v = static_cast<size_t>(d);
    const int64_t st = v < ix.strides.size() ? ix.strides[v] : 0;
    const int sp = stride_param(ix, v);
    if (unit_ext(v)) continue;
    if (d >= nouter_) {
      if (st || sp >= 0) return false;
      continue;
    }
    const bool match = want_param >= 0 ? (sp == want_param && want == 1) : (sp < 0 && st == want);
    if (!match) return false;
    if (ext_param(v) >= 0) {
      if (want_param >= 0 || want != 1) {
        // want becomes a product the parameters do not name: no earlier dim can match it.
        for (int e = d - 1; e >= 0; --e)
          if (!unit_ext(static_cast<size_t>(e))) return false;
        return true;
      }
      want_param = ext_param(v);
    } else if (want_param >= 0) {
      for (int e = d - 1; e >= 0; --e)
        if (!unit_ext(static_cast<size_t>(e))) return false;
      return true;
    } else {
      want *= ext_[v];
    }
  }
  return true;
}

void KernelGen::gen_elementwise(CudaKernelLaunch& launch) {
  const int threads = 256;
  launch.mode = CudaKernelMode::Elementwise;
  launch.threads = threads;
  const int64_t n = outer_n_;

  // Accesses that become vector loads/stores. Not for a heavy body (the 20-sin chain): it is
  // bound by arithmetic, not memory, so 16-byte accesses gain nothing there, while the vector
  // path's four unrolled copies of the body (plus the scalar tail's) take NVRTC ~3x longer.
  std::map<std::pair<int, int>, std::string> vec_load;  // (stage, instr) -> vector variable
  std::map<int, std::string> vec_store;                 // arg -> vector variable
  std::set<int> aligned_args;
  // (A symbolic outer space may hold any number of points: the tail loop takes the rest.)
  if ((n >= 4 || !outer_static()) && cuda_point_cost(k_) <= kVectorPointCostLimit) {
    for (size_t s = 0; s < k_.stages.size(); ++s) {
      const Stage& st = k_.stages[s];
      std::string pre = k_.stages.size() == 1 ? "" : "s" + std::to_string(s) + "_";
      for (size_t i = 0; i < st.body.size(); ++i) {
        const Instr& in = st.body[i];
        if (in.kind != IKind::Load || k_.args[in.arg].scalar || !vtype(k_.args[in.arg].dtype) ||
            !flat_access(in.index))
          continue;
        vec_load[{int(s), int(i)}] = pre + "x" + std::to_string(i);
        aligned_args.insert(in.arg);
      }
    }
    // A stored argument becomes a vector store when it is stored exactly once, flat.
    std::map<int, int> stores_of;
    std::map<int, const loop::Store*> the_store;
    for (const auto& st : k_.stages)
      for (const auto& store : st.stores) ++stores_of[store.arg], the_store[store.arg] = &store;
    for (const auto& [arg, count] : stores_of)
      if (count == 1 && vtype(k_.args[arg].dtype) && flat_access(the_store[arg]->index) &&
          !the_store[arg]->accumulate) {
        vec_store[arg] = "y" + std::to_string(arg);
        aligned_args.insert(arg);
      }
  }
  launch.vectorized = !vec_load.empty() || !vec_store.empty();
  int64_t work = launch.vectorized ? n / 4 : n;
  launch.max_blocks = (std::max<int64_t>(work, n > 0 ? 1 : 0) + threads - 1) / threads;

  os_ << "// " << k_.name << ": elementwise over outer "
      << (sym_ ? shape_comment(0, nouter_) : shape_str(k_.outer))
      << ", one thread per point, grid-stride"
      << (launch.vectorized ? "; 4 points per thread with vector accesses" : "") << "\n";
  emit_signature(threads);
  const std::string T = itype_;
  line("const " + T + " n = " + (sym_ ? outer_expr() : ilit(n)) + ";");
  line("const " + T + " stride = (" + T + ")gridDim.x * " + ilit(threads) + ";");
  line("const " + T + " tid = (" + T + ")blockIdx.x * " + ilit(threads) + " + threadIdx.x;");
  Hooks scalar_hooks;
  std::string scalar_start = "tid";
  if (launch.vectorized) {
    // Vector path when every vector-accessed pointer is aligned (always true for buffers of the
    // caching allocator; checked so that any buffer stays correct). The tail and unaligned
    // buffers take the scalar loop below.
    line(T + " start = tid;");
    open("if (" + all_aligned(aligned_args) + ")");
    line("const " + T + " nv = n / 4u;");
    open("for (" + T + " q = tid; q < nv; q += stride)");
    for (const auto& [key, var] : vec_load) {
      const Instr& in = k_.stages[key.first].body[key.second];
      const loop::Arg& arg = k_.args[in.arg];
      line("const " + std::string(vtype(arg.dtype)) + " " + var + " = reinterpret_cast<const " +
           vtype(arg.dtype) + "*>(a" + std::to_string(in.arg) +
           (in.index.offset ? " + " + ilit(in.index.offset) : "") + ")[q];");
    }
    std::map<int, int64_t> store_offset;
    for (const auto& [arg, var] : vec_store)
      line(std::string(vtype(k_.args[arg].dtype)) + " " + var + ";");
    static const char* lanes[4] = {"x", "y", "z", "w"};
    // A static innermost extent divisible by 4: the four points share every index but the
    // innermost, which steps by one; decomposed once (vi<d>) instead of once per point (each a
    // division by constants: ~6 instructions of the ~40 a bf16 GELU spends per point).
    const bool lanes_share =
        !sym_ && nouter_ > 0 && ext_[static_cast<size_t>(nouter_ - 1)] % 4 == 0;
    if (lanes_share) {
      line("const " + T + " flat4 = q * 4u;");
      decompose("flat4", 0, nouter_, "vi");
    }
    for (int lane = 0; lane < 4; ++lane) {
      open("");
      line("const " + T + " flat = q * 4u + " + ilit(lane) + ";");
      if (lanes_share) {
        for (int d = 0; d < nouter_; ++d)
          if (used_vars_.count(d))
            line("const " + T + " i" + std::to_string(d) + " = vi" + std::to_string(d) +
                 (d == nouter_ - 1 && lane ? " + " + ilit(lane) : "") + ";");
      } else {
        decompose("flat", 0, nouter_);
      }
      Hooks h;
      h.load = [&, lane](int s, int i) -> std::string {
        auto it = vec_load.find({s, i});
        return it == vec_load.end() ? "" : it->second + "." + lanes[lane];
      };
      h.store = [&, lane](int, const loop::Store& st, const std::string& v) {
        auto it = vec_store.find(st.arg);
        if (it == vec_store.end() || !flat_access(st.index)) return false;
        store_offset[st.arg] = st.index.offset;
        line(it->second + "." + lanes[lane] + " = " + to_storage(k_.args[st.arg].dtype, v) + ";");
        return true;
      };
      for (size_t s = 0; s < k_.stages.size(); ++s) {
        emit_body(static_cast<int>(s), h);
        emit_stores(static_cast<int>(s), h);
      }
      close();
    }
    for (const auto& [arg, var] : vec_store) {
      int64_t off = store_offset.count(arg) ? store_offset[arg] : 0;
      line("reinterpret_cast<" + std::string(vtype(k_.args[arg].dtype)) + "*>(a" +
           std::to_string(arg) + (off ? " + " + ilit(off) : "") + ")[q] = " + var + ";");
    }
    close();
    line("start = nv * 4u + tid;");
    close();
    scalar_start = "start";
  }
  open("for (" + T + " flat = " + scalar_start + "; flat < n; flat += stride)");
  decompose("flat", 0, nouter_);
  for (size_t s = 0; s < k_.stages.size(); ++s) {
    emit_body(static_cast<int>(s), scalar_hooks);
    emit_stores(static_cast<int>(s), scalar_hooks);
  }
  close();
  close();
}

}  // namespace lt::cudagen
