// KernelGen's row kernels (Reduce/MapInner stages: Thread, Warp, Block and Tile modes; see
// cuda_codegen.h for the grid mapping).
// GCC 12 reports a false -Wrestrict in `"literal" + std::string&&` at -O2/-O3 (GCC bug 105329);
// this file is made of such concatenations.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wrestrict"
#endif
#include "backends/cuda/kernel_gen.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "backends/cuda/cuda_expr.h"

namespace lt::cudagen {

// An access of a row kernel at (any outer part with strides and offset multiples of 4) + the flat
// row-major index of the inner space: 4 consecutive points of a row are 4 consecutive elements,
// aligned as the buffer is (a vector access in gen_rows).
//
// Symbolic kernels: only with static inner extents (gen_rows checks) and a static offset; an outer
// stride that is a size parameter may not be a multiple of 4 at every binding, so it is not flat.
bool KernelGen::row_flat_access(const Index& ix) const {
  if (!ix.affine() || ix.offset % 4 != 0 || ix.offset < 0) return false;
  if (ix.offset_param >= 0) return false;
  int64_t want = 1;
  for (int d = static_cast<int>(ext_.size()) - 1; d >= 0; --d) {
    const int64_t st =
        d < static_cast<int>(ix.strides.size()) ? ix.strides[static_cast<size_t>(d)] : 0;
    const int64_t e = ext_[static_cast<size_t>(d)];
    if (stride_param(ix, static_cast<size_t>(d)) >= 0 && !unit_ext(static_cast<size_t>(d)))
      return false;
    if (d < nouter_) {
      if (!unit_ext(static_cast<size_t>(d)) && st % 4 != 0) return false;
      continue;
    }
    if (e > 1 && st != want) return false;
    want *= e;
  }
  return true;
}

// Symbolic kernels: the mode is chosen on what holds at every binding, never on the hint's
// sizes. A symbolic extent counts as varying, a symbolic stride as not 1, a symbolic outer
// space as large; a symbolic inner space takes the warp-per-row mode (correct for any row, and
// near the best for rows up to a few thousand points), never the thread-per-row mode that a
// short hint would pick. Every mode loops over any row length and any number of rows.
void KernelGen::choose_row_mode(CudaKernelLaunch& launch) const {
  // The last loop variables that actually vary, to judge which way the loads are contiguous.
  int last_inner = -1, last_outer = -1;
  for (int v = 0; v < nouter_ + ninner_; ++v)
    if (ext_[static_cast<size_t>(v)] > 1 || ext_param(static_cast<size_t>(v)) >= 0)
      (v < nouter_ ? last_outer : last_inner) = v;
  // inner_contig: some load walks rows contiguously; outer_contig: some load that does not walks
  // adjacent outer points contiguously. row_strided: some load jumps along a row (neither
  // contiguous nor broadcast there: uncoalesced in the row modes); columns_fine: no load jumps
  // between adjacent outer points (every load coalesced or broadcast in the Tile mode). A layer
  // norm's weight gradient reads [rows, C] tensors down columns and the rows' statistics along
  // them: its big loads decide (Tile), not the small ones.
  bool inner_contig = false, outer_contig = false, row_strided = false, columns_fine = true;
  for (const auto& st : k_.stages) {
    if (st.kind == StageKind::MapOuter) continue;
    for (const auto& in : st.body) {
      if (in.kind != IKind::Load || !in.index.affine()) continue;
      auto stride = [&](int v) -> int64_t {
        if (v < 0) return 0;
        if (stride_param(in.index, static_cast<size_t>(v)) >= 0) return -1;
        return in.index.strides.at(static_cast<size_t>(v));
      };
      const int64_t si = stride(last_inner), so = stride(last_outer);
      if (si == 1)
        inner_contig = true;
      else if (so == 1)
        outer_contig = true;
      if (si != 0 && si != 1) row_strided = true;
      if (so != 0 && so != 1) columns_fine = false;
    }
  }
  const bool columns = outer_contig && (!inner_contig || (row_strided && columns_fine));
  launch.threads = 256;
  if (sym_) {
    const bool outer_large = !outer_static() || outer_n_ >= 1024;
    if (inner_static() && inner_n_ <= 16) {
      launch.mode = CudaKernelMode::Thread;
    } else if (columns && outer_large) {
      launch.mode = CudaKernelMode::Tile;
    } else if (!inner_static() || inner_n_ <= 256 || (inner_n_ <= 1024 && outer_large)) {
      launch.mode = CudaKernelMode::Warp;
    } else {
      launch.mode = CudaKernelMode::Block;
      launch.threads = (inner_n_ >= 16384 && outer_static() && outer_n_ < 256) ? 1024
                       : inner_n_ >= 8192                                      ? 512
                                                                               : 256;
      if (opt_.block_threads > 0)
        launch.threads = std::clamp(opt_.block_threads / 32 * 32, 32, 1024);
    }
    launch.max_blocks = cuda_launch_blocks(launch, outer_n_);
    return;
  }
  if (inner_n_ <= 16) {
    // Tiny rows: a thread loops over its row.
    launch.mode = CudaKernelMode::Thread;
    launch.max_blocks = (outer_n_ + 255) / 256;
  } else if (columns && outer_n_ >= 1024) {
    // A reduction down columns: lanes take 32 adjacent outer points (coalesced loads), the warps
    // of a block split the inner space and combine through shared memory. A block has 32 columns
    // whatever the rows' length, so long columns get more warps: enough loads in flight to keep
    // memory busy when there are only a few hundred blocks (a bias gradient: 768 columns).
    launch.mode = CudaKernelMode::Tile;
    launch.threads = inner_n_ >= 2048 ? 1024 : inner_n_ >= 512 ? 512 : 256;
    launch.max_blocks = (outer_n_ + 31) / 32;
  } else if (inner_n_ <= 256 || (inner_n_ <= 1024 && outer_n_ >= 4096)) {
    launch.mode = CudaKernelMode::Warp;
    launch.max_blocks = (outer_n_ + 7) / 8;
  } else {
    launch.mode = CudaKernelMode::Block;
    launch.threads = (inner_n_ >= 16384 && outer_n_ < 256) ? 1024 : inner_n_ >= 8192 ? 512 : 256;
    if (opt_.block_threads > 0) launch.threads = std::clamp(opt_.block_threads / 32 * 32, 32, 1024);
    launch.max_blocks = outer_n_;
  }
}

void KernelGen::gen_rows(CudaKernelLaunch& launch) {
  choose_row_mode(launch);
  const int threads = launch.threads;
  const std::string T = itype_;
  const CudaKernelMode mode = launch.mode;

  // 16-byte row accesses (Block/Warp): when a row's points come in fours and a load or store walks
  // the row contiguously, a thread takes 4 consecutive points at a time ("chunks"): one vector
  // load/store per such access, then the body once per point. Register caching: when each thread
  // holds at most max_cached chunks, the chunk loops are unrolled and a vector load that several
  // stages repeat (softmax and layer_norm read x in every stage) is loaded once and kept.
  const bool row_modes = mode == CudaKernelMode::Block || mode == CudaKernelMode::Warp;
  std::map<std::pair<int, int>, std::string> vload;  // (stage, instr) -> vector variable
  std::map<const loop::Store*, std::string> vstore;  // store -> vector variable
  std::set<int> vector_args;                         // the args those access
  // A symbolic row: only when its length is static (a multiple of 4 at every binding).
  if (opt_.row_vectors && row_modes && inner_n_ % 4 == 0 && inner_static()) {
    for (size_t s = 0; s < k_.stages.size(); ++s) {
      const Stage& st = k_.stages[s];
      if (st.kind == StageKind::MapOuter) continue;
      for (size_t i = 0; i < st.body.size(); ++i) {
        const Instr& in = st.body[i];
        if (in.kind != IKind::Load || k_.args[in.arg].scalar || !vtype(k_.args[in.arg].dtype) ||
            !row_flat_access(in.index))
          continue;
        vload[{int(s), int(i)}] = "x" + std::to_string(s) + "_" + std::to_string(i);
        vector_args.insert(in.arg);
      }
      for (const auto& store : st.stores) {
        if (store.accumulate || !vtype(k_.args[store.arg].dtype) || !row_flat_access(store.index))
          continue;
        vstore[&store] = "y" + std::to_string(s) + "_" + std::to_string(vstore.size());
        vector_args.insert(store.arg);
      }
    }
  }
  const bool vec = !vload.empty() || !vstore.empty();
  const int64_t max_cached = opt_.max_cached_per_thread;
  const int64_t step = mode == CudaKernelMode::Block  ? threads
                       : mode == CudaKernelMode::Warp ? 32
                                                      : 1;
  const int64_t chunks = vec ? inner_n_ / 4 : inner_n_;  // a thread's units of the row
  const int64_t per_thread = (chunks + step - 1) / step;
  std::map<std::string, int> cache_of;        // load key -> cache array number
  std::map<std::pair<int, int>, int> cached;  // (stage, instr) -> cache array number
  std::map<std::pair<int, int>, bool> fills;  // (stage, instr) -> this load fills the cache
  if (vec && per_thread >= 1 && per_thread <= max_cached) {
    // The vector loads (affine, so never data-dependent) by what they read; within a stage only
    // the first load of a key counts. vload iterates in (stage, instr) order.
    std::map<std::string, std::vector<std::pair<int, int>>> uses;
    for (const auto& [at, var] : vload) {
      const Instr& in =
          k_.stages[static_cast<size_t>(at.first)].body[static_cast<size_t>(at.second)];
      auto& list = uses[std::to_string(in.arg) + ":" + index_expr(in.index)];
      if (list.empty() || list.back().first != at.first) list.push_back(at);
    }
    for (const auto& [key, list] : uses) {
      if (list.size() < 2) continue;
      int id = static_cast<int>(cache_of.size());
      cache_of[key] = id;
      for (size_t u = 0; u < list.size(); ++u) cached[list[u]] = id, fills[list[u]] = u == 0;
    }
  }
  const bool unrolled = !cache_of.empty();

  const char* how = mode == CudaKernelMode::Block  ? "one block per outer point"
                    : mode == CudaKernelMode::Warp ? "one warp per outer point (8 per block)"
                    : mode == CudaKernelMode::Tile
                        ? "32 outer points per block, its warps split the inner space"
                        : "one thread per outer point";
  os_ << "// " << k_.name << ": outer " << (sym_ ? shape_comment(0, nouter_) : shape_str(k_.outer))
      << " x inner " << (sym_ ? shape_comment(nouter_, ninner_) : shape_str(k_.inner)) << ", "
      << how << ", " << k_.stages.size() << " stage(s)"
      << (vec ? ", 4 points per thread with vector accesses" : "")
      << (unrolled ? ", row cached in registers" : "") << "\n";
  emit_signature(threads);
  if (vec) {
    // Vector accesses need the buffers 16-byte (8 for 16-bit types) aligned: always so for the
    // caching allocator's buffers; imported memory may not be, and then every vector access goes
    // element by element (lt_ld4/lt_st4; one uniform branch).
    line("const bool al = " + all_aligned(vector_args) + ";");
  }
  std::string red_start, red_step;
  // The number of rows, and of a thread's units of a row: run-time values where symbolic.
  const std::string rows_n = sym_ ? outer_expr() : ilit(outer_n_);
  const std::string chunks_n = sym_ && !vec ? inner_expr() : ilit(chunks);
  switch (mode) {
    case CudaKernelMode::Block:
      open("for (" + T + " row = (" + T + ")blockIdx.x; row < " + rows_n + "; row += (" + T +
           ")gridDim.x)");
      red_start = "(" + T + ")threadIdx.x";
      red_step = ilit(threads);
      break;
    case CudaKernelMode::Warp:
      line("const " + T + " lane = threadIdx.x & 31u;");
      open("for (" + T + " row = (" + T + ")blockIdx.x * " + ilit(threads / 32) +
           " + (threadIdx.x >> 5); row < " + rows_n + "; row += (" + T + ")gridDim.x * " +
           ilit(threads / 32) + ")");
      red_start = "lane";
      red_step = ilit(32);
      break;
    case CudaKernelMode::Tile:
      line("const " + T + " warp = threadIdx.x >> 5;");
      open("for (" + T + " tile = (" + T + ")blockIdx.x; tile < " +
           (sym_ ? "(" + rows_n + " + 31LL) / 32LL" : ilit((outer_n_ + 31) / 32)) + "; tile += (" +
           T + ")gridDim.x)");
      line("const " + T + " row = tile * 32u + (threadIdx.x & 31u);");
      line("const bool active = row < " + rows_n + ";");
      red_start = "warp";
      red_step = ilit(threads / 32);
      break;
    default:
      open("for (" + T + " row = (" + T + ")blockIdx.x * " + ilit(threads) +
           " + threadIdx.x; row < " + rows_n + "; row += (" + T + ")gridDim.x * " + ilit(threads) +
           ")");
      red_start = ilit(0);
      red_step = ilit(1);
      break;
  }
  decompose("row", 0, nouter_);
  for (const auto& [key, id] : cache_of) {
    // The compute type of the cached argument.
    int arg = std::stoi(key.substr(0, key.find(':')));
    line(std::string(vec ? vtype(k_.args[arg].dtype) : ctype(k_.args[arg].dtype)) + " c" +
         std::to_string(id) + "[" + std::to_string(per_thread) + "];  // a" +
         key.substr(0, key.find(':')) + "[" + key.substr(key.find(':') + 1) + "]");
  }

  // Opens the loop over this thread's points of the inner space.
  // With vectors the loop runs over chunks c (points 4c .. 4c+3), and the body is emitted per
  // point.
  const std::string unit = vec ? "c" : "red";
  auto open_inner = [&]() {
    if (unrolled) {
      line("#pragma unroll");
      open("for (int k = 0; k < " + std::to_string(per_thread) + "; ++k)");
      line("const " + T + " " + unit + " = " + red_start + " + (" + T + ")k * " + red_step + ";");
      open("if (" + unit + " < " + ilit(chunks) + ")");
    } else {
      // Tile: a thread's loads down its column are independent; unrolled, several are in flight.
      if (mode == CudaKernelMode::Tile) {
        open("if (active)");
        line("#pragma unroll 4");
      }
      open("for (" + T + " " + unit + " = " + red_start + "; " + unit + " < " + chunks_n + "; " +
           unit + " += " + red_step + ")");
    }
    if (!vec) decompose("red", nouter_, ninner_);
  };
  auto close_inner = [&]() {
    close();
    if (unrolled || mode == CudaKernelMode::Tile) close();
  };
  // Vector path: the stage's vector loads (at the chunk's first point), then `per_point` for each
  // of the 4 points with hooks that read the vectors' lanes and fill the store vectors, then the
  // stores.
  static const char* lanes[4] = {"x", "y", "z", "w"};
  auto at_chunk_start = [&](const std::function<void()>& body) {
    open("");
    line("const " + T + " red = " + unit + " * 4u;");
    decompose("red", nouter_, ninner_);
    body();
    close();
  };
  auto vector_stage = [&](int si, const std::function<void(const Hooks&)>& per_point) {
    const Stage& st = k_.stages[static_cast<size_t>(si)];
    for (const auto& [key, var] : vload) {
      if (key.first != si) continue;
      const Instr& in = st.body[static_cast<size_t>(key.second)];
      const std::string V = vtype(k_.args[in.arg].dtype);
      auto it = cached.find(key);
      if (it != cached.end() && !fills.at(key)) {
        line("const " + V + " " + var + " = c" + std::to_string(it->second) + "[k];");
        continue;
      }
      line(V + " " + var + ";");
      at_chunk_start([&] {
        line(var + " = lt_ld4<" + V + ">(&a" + std::to_string(in.arg) + "[" + index_expr(in.index) +
             "], al);");
      });
      if (it != cached.end()) line("c" + std::to_string(it->second) + "[k] = " + var + ";");
    }
    auto in_stage = [&](const loop::Store* store) {
      return !st.stores.empty() && &st.stores.front() <= store && store <= &st.stores.back();
    };
    for (const auto& [store, var] : vstore)
      if (in_stage(store)) line(std::string(vtype(k_.args[store->arg].dtype)) + " " + var + ";");
    for (int lane = 0; lane < 4; ++lane) {
      open("");
      line("const " + T + " red = " + unit + " * 4u + " + std::to_string(lane) + "u;");
      decompose("red", nouter_, ninner_);
      Hooks h;
      h.load = [&, si, lane](int s2, int i) -> std::string {
        auto it = vload.find({s2, i});
        return it == vload.end() || s2 != si ? "" : it->second + "." + lanes[lane];
      };
      h.store = [&, lane](int, const loop::Store& store, const std::string& v) {
        auto it = vstore.find(&store);
        if (it == vstore.end()) return false;
        line(it->second + "." + lanes[lane] + " = " + to_storage(k_.args[store.arg].dtype, v) +
             ";");
        return true;
      };
      per_point(h);
      close();
    }
    for (const auto& [store, var] : vstore) {
      if (!in_stage(store)) continue;
      at_chunk_start([&, store = store, var = var] {
        line("lt_st4(&a" + std::to_string(store->arg) + "[" + index_expr(store->index) + "], " +
             var + ", al);");
      });
    }
  };

  for (size_t s = 0; s < k_.stages.size(); ++s) {
    const Stage& st = k_.stages[s];
    const int si = static_cast<int>(s);
    const Hooks hooks;  // the per-point path reads and writes memory directly
    if (st.kind == StageKind::Reduce) {
      const std::string acc = "acc" + std::to_string(s), r = "r" + std::to_string(s);
      const char* at = ctype(st.acc_dtype);
      line("// stage " + std::to_string(s) + ": " + std::string(op_name(st.reduce_op)) +
           " over the inner space");
      line(std::string(at) + " " + acc + " = " + reduce_identity(st.reduce_op, st.acc_dtype) + ";");
      open_inner();
      std::string v = cast_expr(st.body[static_cast<size_t>(st.reduce_value)].dtype, st.acc_dtype,
                                "v" + std::to_string(st.reduce_value));
      auto point = [&](const Hooks& h) {
        emit_body(si, h);
        line(acc + " = " + reduce_combine(st.reduce_op, st.acc_dtype, acc, v) + ";");
      };
      if (vec)
        vector_stage(si, point);
      else
        point(hooks);
      close_inner();
      std::string fin = acc;
      const std::string f = reduce_functor(st.reduce_op);
      if (mode == CudaKernelMode::Block)
        fin = "lt_block_reduce(" + acc + ", " + f + ")";
      else if (mode == CudaKernelMode::Warp)
        fin = "lt_warp_reduce(" + acc + ", " + f + ")";
      else if (mode == CudaKernelMode::Tile)
        fin = "lt_tile_reduce<" + std::to_string(threads / 32) + "u>(" + acc + ", " + f + ")";
      line("const " + std::string(at) + " " + r + " = " + fin + ";");
    } else if (st.kind == StageKind::MapInner) {
      line("// stage " + std::to_string(s) + ": map over the inner space");
      open_inner();
      auto point = [&](const Hooks& h) {
        emit_body(si, h);
        emit_stores(si, h);
      };
      if (vec)
        vector_stage(si, point);
      else
        point(hooks);
      close_inner();
    } else {
      line("// stage " + std::to_string(s) + ": once per outer point");
      if (mode == CudaKernelMode::Block)
        open("if (threadIdx.x == 0)");
      else if (mode == CudaKernelMode::Warp)
        open("if (lane == 0u)");
      else if (mode == CudaKernelMode::Tile)
        open("if (active && warp == 0u)");
      else
        open("");
      emit_body(si, hooks);
      emit_stores(si, hooks);
      close();
    }
  }
  close();
  close();
}

}  // namespace lt::cudagen
