// Fused (flash) attention kernels of the CUDA backend (flash_attention.h says what they compute).
// Built two ways: nvcc compiles this file to cubins at build time for the common GPUs
// (CMakeLists.txt, embedded in the library); for other GPUs NVRTC compiles it at run time, one
// program per kernel: the text before the first "// @kernel" line plus that kernel's section.
// Self-contained: no includes, no preamble.

// Layout: 256 threads as 16 x 16 (ty, tx); in every 64 x 64 product a thread owns rows
// ty*4 .. ty*4+3 and columns tx*4 .. tx*4+3, so one row of a product lives in the 16 lanes of
// one half-warp and its max and sum are 4 shuffles. Products read the left operand row-major
// (a float4 along the reduced axis, the same address for the whole half-warp) and the right one
// as [reduced][column] (a float4 of 4 columns): 12 shared-memory wavefronts per 64 FMAs.
#define LT_FA_LOG2E 1.4426950408889634f
#define LT_FA_LN2 0.6931471805599453f
#define LT_FA_NEG_INF __int_as_float(0xff800000)

// Every kernel's dynamic shared memory (sizes in flash_attention.h).
extern __shared__ float4 lt_fa_smem[];

// Rows [row0, row0 + 64) of a row-major [n, 64] matrix into dst[64][64]; rows past n are 0.
__device__ __forceinline__ void lt_fa_load_rows(float* dst, const float* src, int row0, int n) {
  const int t = threadIdx.x;
#pragma unroll
  for (int m = 0; m < 4; ++m) {
    const int idx = t + 256 * m, r = idx >> 4, c = (idx & 15) << 2;
    float4 x = make_float4(0.f, 0.f, 0.f, 0.f);
    if (row0 + r < n) x = __ldg(reinterpret_cast<const float4*>(src + (size_t)(row0 + r) * 64 + c));
    *reinterpret_cast<float4*>(dst + r * 64 + c) = x;
  }
}

// The same rows transposed: dst[c][r] = src[row0 + r][c] (lanes store consecutive r: no bank
// conflicts).
__device__ __forceinline__ void lt_fa_load_cols(float* dst, const float* src, int row0, int n) {
  const int t = threadIdx.x, r = t & 63, c0 = (t >> 6) << 4;
  const bool in = row0 + r < n;
  const float* p = src + (size_t)(row0 + r) * 64 + c0;
#pragma unroll
  for (int m = 0; m < 4; ++m) {
    float4 x = make_float4(0.f, 0.f, 0.f, 0.f);
    if (in) x = __ldg(reinterpret_cast<const float4*>(p + 4 * m));
    const int c = c0 + 4 * m;
    dst[(c + 0) * 64 + r] = x.x;
    dst[(c + 1) * 64 + r] = x.y;
    dst[(c + 2) * 64 + r] = x.z;
    dst[(c + 3) * 64 + r] = x.w;
  }
}

__device__ __forceinline__ void lt_fa_zero(float (&t)[4][4]) {
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) t[i][j] = 0.f;
}

// acc[i][j] += sum_kk A[r0 + i][kk] * B[kk][c0 + j] over 64 x 64 tiles in shared memory.
__device__ __forceinline__ void lt_fa_mm(float (&acc)[4][4], const float* A, const float* B, int r0,
                                         int c0) {
#pragma unroll 2
  for (int kk = 0; kk < 64; kk += 4) {
    float4 a[4], b[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) a[i] = *reinterpret_cast<const float4*>(A + (r0 + i) * 64 + kk);
#pragma unroll
    for (int u = 0; u < 4; ++u) b[u] = *reinterpret_cast<const float4*>(B + (kk + u) * 64 + c0);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float av[4] = {a[i].x, a[i].y, a[i].z, a[i].w};
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        acc[i][0] = fmaf(av[u], b[u].x, acc[i][0]);
        acc[i][1] = fmaf(av[u], b[u].y, acc[i][1]);
        acc[i][2] = fmaf(av[u], b[u].z, acc[i][2]);
        acc[i][3] = fmaf(av[u], b[u].w, acc[i][3]);
      }
    }
  }
}

// acc[i][j] += sum_kk AT[kk][r0 + i] * B[kk][c0 + j]: the same with the left operand stored
// transposed ([reduced][row]), read as a float4 of 4 rows.
__device__ __forceinline__ void lt_fa_mm_tn(float (&acc)[4][4], const float* AT, const float* B,
                                            int r0, int c0) {
#pragma unroll 4
  for (int kk = 0; kk < 64; ++kk) {
    const float4 a = *reinterpret_cast<const float4*>(AT + kk * 64 + r0);
    const float4 b = *reinterpret_cast<const float4*>(B + kk * 64 + c0);
    const float av[4] = {a.x, a.y, a.z, a.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      acc[i][0] = fmaf(av[i], b.x, acc[i][0]);
      acc[i][1] = fmaf(av[i], b.y, acc[i][1]);
      acc[i][2] = fmaf(av[i], b.z, acc[i][2]);
      acc[i][3] = fmaf(av[i], b.w, acc[i][3]);
    }
  }
}

__device__ __forceinline__ float lt_fa_row_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 8));
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 4));
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
}
__device__ __forceinline__ float lt_fa_row_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 8);
  x += __shfl_xor_sync(0xffffffffu, x, 4);
  x += __shfl_xor_sync(0xffffffffu, x, 2);
  return x + __shfl_xor_sync(0xffffffffu, x, 1);
}

// dst[0..4) += (a, b, c, d) atomically; dst 16-byte aligned. sm_90's vector reduction is one
// memory operation for the four (dQ's atomics were a quarter of the f32 dK/dV kernel's memory
// instructions); older GPUs add one float at a time.
__device__ __forceinline__ void lt_fa_atomic_add4(float* dst, float a, float b, float c, float d) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(dst), "f"(a), "f"(b), "f"(c),
               "f"(d)
               : "memory");
#else
  atomicAdd(dst, a);
  atomicAdd(dst + 1, b);
  atomicAdd(dst + 2, c);
  atomicAdd(dst + 3, d);
#endif
}

__device__ __forceinline__ void lt_fa_store_tile(float* dst, const float (&t)[4][4], int r0,
                                                 int c0) {
#pragma unroll
  for (int i = 0; i < 4; ++i)
    *reinterpret_cast<float4*>(dst + (r0 + i) * 64 + c0) =
        make_float4(t[i][0], t[i][1], t[i][2], t[i][3]);
}

// ---- 16-bit kernels (bfloat16, float16): tensor cores, mma.sync m16n8k16, sm_80 and later ----
// 128 threads, 4 warps; a block's 64-row tile gives each warp 16 rows, and every product a warp
// computes is [16 rows] x [64 columns]: 8 m16n8k16 tiles over a 64-wide reduced axis (4 k-steps),
// float32 accumulation. Fragments (PTX ISA, mma.m16n8k16; lane = 4 g + t): the accumulator's
// c0, c1 sit at row g, columns 2t, 2t + 1 of its 8-column tile, c2, c3 at row g + 8; A's four
// registers hold rows g, g + 8 at columns 2t.. and 2t + 8.. of a 16-wide k-step. So two adjacent
// accumulator tiles are, packed to 16 bits, the A operand of the next product without leaving
// registers (FlashAttention-2's P and dS). Tiles in shared memory are 64 rows of 64 elements
// padded to LT_FA16_LD (144 bytes): the 8 rows one fragment load or ldmatrix phase reads start in
// distinct bank quads, so neither conflicts. Q (forward, dQ), K and V (dK/dV) and dO (dQ) rows stay
// in registers as A fragments for the whole kernel.
#define LT_FA16_LD 72

template <bool BF>
__device__ __forceinline__ void lt_fa16_mma(float (&c)[4], const unsigned (&a)[4], unsigned b0,
                                            unsigned b1) {
  if (BF)
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  else
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// (lo, hi) rounded to nearest even, as one register of two 16-bit values (lo in the low half).
template <bool BF>
__device__ __forceinline__ unsigned lt_fa16_pack(float lo, float hi) {
  unsigned r;
  if (BF)
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  else
    asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

// 2^x with the special function unit (what exp2f becomes under fast math); 2^-inf = 0. P and dS
// are rounded to 16 bits next, far coarser than its 2 ulp.
__device__ __forceinline__ float lt_fa16_ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// A generic pointer into shared memory as the 32-bit shared-space address PTX wants.
__device__ __forceinline__ unsigned lt_fa16_smem_addr(const void* p) {
  unsigned a;
  asm("{ .reg .u64 s; cvta.to.shared.u64 s, %1; cvt.u32.u64 %0, s; }\n" : "=r"(a) : "l"(p));
  return a;
}

// Four 8 x 8 tiles of 16-bit values from shared memory (ldmatrix): lane i gives the address of
// row i % 8 of tile i / 8 and gets, of each tile, row i / 4's elements 2 (i % 4) and + 1; with
// T, the tiles transposed (ldmatrix .trans). Volatile: the same address holds new values each tile.
template <bool T>
__device__ __forceinline__ void lt_fa16_ldsm(unsigned (&r)[4], const unsigned short* p) {
  if (T)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(lt_fa16_smem_addr(p))
                 : "memory");
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(lt_fa16_smem_addr(p))
                 : "memory");
}

// Asynchronous copies (cp.async, sm_80): a tile for the next iteration streams into shared memory
// while this one computes. src_bytes below the copy's size zero-fills the rest (rows past n).
__device__ __forceinline__ void lt_fa16_cp16(void* dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(lt_fa16_smem_addr(dst)),
               "l"(src), "r"(src_bytes)
               : "memory");
}
__device__ __forceinline__ void lt_fa16_cp4(void* dst, const void* src, int src_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(lt_fa16_smem_addr(dst)),
               "l"(src), "r"(src_bytes)
               : "memory");
}
__device__ __forceinline__ void lt_fa16_cp_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
// Waits until at most `pending` of this thread's committed groups are still in flight.
template <int pending>
__device__ __forceinline__ void lt_fa16_cp_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(pending) : "memory");
}

// Rows [row0, row0 + 64) of a row-major [n, 64] matrix into dst[64][LT_FA16_LD], rows past n 0;
// asynchronous: complete after a wait for its commit group.
__device__ __forceinline__ void lt_fa16_load_tile_async(unsigned short* dst,
                                                        const unsigned short* src, int row0,
                                                        int n) {
  const int t = threadIdx.x;
#pragma unroll
  for (int m = 0; m < 4; ++m) {
    const int idx = t + 128 * m, r = idx >> 3, c = (idx & 7) << 3;
    const bool in = row0 + r < n;
    lt_fa16_cp16(dst + r * LT_FA16_LD + c, in ? src + (size_t)(row0 + r) * 64 + c : src,
                 in ? 16 : 0);
  }
}

// The A fragments of rows r and r + 8 of a row-major [n, 64] matrix over its 4 k-steps (lane's
// column pair t4); rows past n are 0.
__device__ __forceinline__ void lt_fa16_load_a(unsigned (&a)[4][4], const unsigned short* src,
                                               int r, int n, int t4) {
  const unsigned* lo = reinterpret_cast<const unsigned*>(src + (size_t)r * 64);
  const unsigned* hi = reinterpret_cast<const unsigned*>(src + (size_t)(r + 8) * 64);
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    const int w = kk * 8 + t4;  // the 32-bit word of columns 16 kk + 2 t4 and + 1
    a[kk][0] = r < n ? __ldg(lo + w) : 0u;
    a[kk][1] = r + 8 < n ? __ldg(hi + w) : 0u;
    a[kk][2] = r < n ? __ldg(lo + w + 4) : 0u;
    a[kk][3] = r + 8 < n ? __ldg(hi + w + 4) : 0u;
  }
}

__device__ __forceinline__ void lt_fa16_zero(float (&c)[8][4]) {
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) c[i][j] = 0.f;
}

// acc += A X^T: A the warp's 16 rows (fragments a), X a shared [64][LD] tile whose rows are the
// 64 output columns (S = Q K^T with X = K). B fragments come out of ldmatrix, two column tiles
// (both halves of the k-step) per instruction: tiles (nt, k lo), (nt, k hi), (nt + 1, ...).
template <bool BF>
__device__ __forceinline__ void lt_fa16_mm_nt(float (&acc)[8][4], const unsigned (&a)[4][4],
                                              const unsigned short* X, int lane) {
  const unsigned short* base =
      X + (((lane >> 4) << 3) + (lane & 7)) * LT_FA16_LD + ((lane >> 3) & 1) * 8;
#pragma unroll
  for (int kk = 0; kk < 4; ++kk)
#pragma unroll
    for (int np = 0; np < 4; ++np) {
      unsigned b[4];
      lt_fa16_ldsm<false>(b, base + np * 16 * LT_FA16_LD + kk * 16);
      lt_fa16_mma<BF>(acc[2 * np], a[kk], b[0], b[1]);
      lt_fa16_mma<BF>(acc[2 * np + 1], a[kk], b[2], b[3]);
    }
}

// acc += A X: A the warp's 16 rows over X's 64 rows (fragments a), X a shared [64][LD] tile
// (O += P V with X = V). B fragments come transposed out of ldmatrix, two column tiles at a time.
template <bool BF>
__device__ __forceinline__ void lt_fa16_mm_nn(float (&acc)[8][4], const unsigned (&a)[4][4],
                                              const unsigned short* X, int lane) {
#pragma unroll
  for (int kk = 0; kk < 4; ++kk)
#pragma unroll
    for (int np = 0; np < 4; ++np) {
      unsigned b[4];
      lt_fa16_ldsm<true>(b,
                         X + (kk * 16 + (lane & 15)) * LT_FA16_LD + np * 16 + ((lane >> 4) << 3));
      lt_fa16_mma<BF>(acc[2 * np], a[kk], b[0], b[1]);
      lt_fa16_mma<BF>(acc[2 * np + 1], a[kk], b[2], b[3]);
    }
}

// Accumulator tiles (16 x 64) as the A fragments of the next product, rounded to 16 bits.
template <bool BF>
__device__ __forceinline__ void lt_fa16_to_a(unsigned (&a)[4][4], const float (&c)[8][4]) {
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    a[kk][0] = lt_fa16_pack<BF>(c[2 * kk][0], c[2 * kk][1]);
    a[kk][1] = lt_fa16_pack<BF>(c[2 * kk][2], c[2 * kk][3]);
    a[kk][2] = lt_fa16_pack<BF>(c[2 * kk + 1][0], c[2 * kk + 1][1]);
    a[kk][3] = lt_fa16_pack<BF>(c[2 * kk + 1][2], c[2 * kk + 1][3]);
  }
}

// Row r + 8 h of an accumulator (h = 0, 1) into a row-major [.., 64] 16-bit matrix, times `mul`.
template <bool BF>
__device__ __forceinline__ void lt_fa16_store_row(unsigned short* dst, const float (&c)[8][4],
                                                  int h, int t4, float mul) {
#pragma unroll
  for (int nt = 0; nt < 8; ++nt)
    *reinterpret_cast<unsigned*>(dst + nt * 8 + 2 * t4) =
        lt_fa16_pack<BF>(c[nt][2 * h] * mul, c[nt][2 * h + 1] * mul);
}

__device__ __forceinline__ float lt_fa16_quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float lt_fa16_quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// The forward (what lt_flash_attention_fwd_f32 computes) for 16-bit q, k, v and o; lse float32.
template <bool BF>
__device__ __forceinline__ void lt_fa16_forward(const unsigned short* q, const unsigned short* k,
                                                const unsigned short* v, unsigned short* o,
                                                float* lse, int batch, int L, int S, int causal,
                                                float scale_log2) {
  // Two buffers of (K, V) tiles: the next key tile loads while this one computes.
  unsigned short* const buf0 = reinterpret_cast<unsigned short*>(lt_fa_smem);
  const int tiles = (L + 63) / 64;
  const int bh = blockIdx.x % batch, q0 = (tiles - 1 - (int)(blockIdx.x / batch)) * 64;
  q += (size_t)bh * L * 64;
  k += (size_t)bh * S * 64;
  v += (size_t)bh * S * 64;
  const int kend = causal ? min(S, q0 + 64) : S;
  if (kend > 0) {
    lt_fa16_load_tile_async(buf0, k, 0, S);
    lt_fa16_load_tile_async(buf0 + 64 * LT_FA16_LD, v, 0, S);
  }
  lt_fa16_cp_commit();
  const int lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3;
  const int r = q0 + (threadIdx.x >> 5) * 16 + g;  // this lane's rows: r and r + 8
  unsigned qa[4][4];
  lt_fa16_load_a(qa, q, r, L, t4);
  float m[2] = {LT_FA_NEG_INF, LT_FA_NEG_INF}, l[2] = {0.f, 0.f}, acc[8][4];
  lt_fa16_zero(acc);
  for (int k0 = 0, b = 0; k0 < kend; k0 += 64, b ^= 1) {
    unsigned short* Ks = buf0 + b * 2 * 64 * LT_FA16_LD;
    unsigned short* Vs = Ks + 64 * LT_FA16_LD;
    if (k0 + 64 < kend) {  // the other buffer was last read before the previous barrier
      unsigned short* next = buf0 + (b ^ 1) * 2 * 64 * LT_FA16_LD;
      lt_fa16_load_tile_async(next, k, k0 + 64, S);
      lt_fa16_load_tile_async(next + 64 * LT_FA16_LD, v, k0 + 64, S);
    }
    lt_fa16_cp_commit();
    lt_fa16_cp_wait<1>();  // this tile's group is complete (the next one may still be in flight)
    __syncthreads();
    float s[8][4];
    lt_fa16_zero(s);
    lt_fa16_mm_nt<BF>(s, qa, Ks, lane);
    float mx[2] = {LT_FA_NEG_INF, LT_FA_NEG_INF};
    // Only a tile past the keys' end or on the causal diagonal hides keys (a uniform branch).
    const bool masked = k0 + 64 > S || (causal && k0 + 63 > q0);
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int row = r + (e >> 1) * 8, key = k0 + nt * 8 + 2 * t4 + (e & 1);
        float x = s[nt][e] * scale_log2;
        if (masked && (key >= S || (causal && key > row))) x = LT_FA_NEG_INF;
        s[nt][e] = x;
        mx[e >> 1] = fmaxf(mx[e >> 1], x);
      }
    float base[2], alpha[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float mn = fmaxf(m[h], lt_fa16_quad_max(mx[h]));
      base[h] = mn == LT_FA_NEG_INF ? 0.f : mn;  // a row with nothing visible yet stays 0
      alpha[h] = lt_fa16_ex2(m[h] - base[h]);
      m[h] = mn;
    }
    float sum[2] = {0.f, 0.f};
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float p = lt_fa16_ex2(s[nt][e] - base[e >> 1]);
        s[nt][e] = p;
        sum[e >> 1] += p;
        acc[nt][e] *= alpha[e >> 1];
      }
#pragma unroll
    for (int h = 0; h < 2; ++h) l[h] = l[h] * alpha[h] + lt_fa16_quad_sum(sum[h]);
    unsigned pa[4][4];
    lt_fa16_to_a<BF>(pa, s);
    lt_fa16_mm_nn<BF>(acc, pa, Vs, lane);
    __syncthreads();  // every warp is done with this buffer before it is refilled
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = r + 8 * h;
    if (row >= L) continue;
    if (o) lt_fa16_store_row<BF>(o + ((size_t)bh * L + row) * 64, acc, h, t4, 1.f / l[h]);
    if (lse && t4 == 0) lse[(size_t)bh * L + row] = (m[h] + log2f(l[h])) * LT_FA_LN2;
  }
}

// dK = scale * dS^T Q and dV = P^T dO for one (batch point, 64-key tile) over the query tiles that
// see it; rows are keys, so P^T and dS^T are accumulators and become A fragments in registers.
// dS = P * (dO V^T - D), P = exp(S * scale - lse), D = rowsum(dO * O). dk or dv may be null.
template <bool BF>
__device__ __forceinline__ void lt_fa16_grad_kv(const unsigned short* q, const unsigned short* k,
                                                const unsigned short* v, const unsigned short* dout,
                                                const float* lse, const float* dsum,
                                                unsigned short* dk, unsigned short* dv, int batch,
                                                int L, int S, int causal, float scale_log2,
                                                float scale) {
  // Two buffers, each a Q tile, a dO tile and the 64 queries' lse and D: the next query tile
  // loads while this one computes.
  constexpr int kBuf = 2 * 64 * LT_FA16_LD + 2 * 64 * 2;  // 16-bit elements per buffer
  unsigned short* const buf0 = reinterpret_cast<unsigned short*>(lt_fa_smem);
  const int bh = blockIdx.x % batch, k0 = (int)(blockIdx.x / batch) * 64;
  q += (size_t)bh * L * 64;
  dout += (size_t)bh * L * 64;
  k += (size_t)bh * S * 64;
  v += (size_t)bh * S * 64;
  lse += (size_t)bh * L;
  dsum += (size_t)bh * L;
  auto load = [&](unsigned short* dst, int q0) {
    lt_fa16_load_tile_async(dst, q, q0, L);
    lt_fa16_load_tile_async(dst + 64 * LT_FA16_LD, dout, q0, L);
    float* stats = reinterpret_cast<float*>(dst + 2 * 64 * LT_FA16_LD);
    const int i = threadIdx.x & 63, qi = q0 + i;
    const float* src = threadIdx.x < 64 ? lse : dsum;
    lt_fa16_cp4(stats + (threadIdx.x < 64 ? 0 : 64) + i, qi < L ? src + qi : src, qi < L ? 4 : 0);
  };
  const int qbegin = causal ? k0 : 0;
  if (qbegin < L) load(buf0, qbegin);
  lt_fa16_cp_commit();
  const int lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3;
  const int kr = k0 + (threadIdx.x >> 5) * 16 + g;  // this lane's keys: kr and kr + 8
  unsigned ka[4][4], va[4][4];
  lt_fa16_load_a(ka, k, kr, S, t4);
  lt_fa16_load_a(va, v, kr, S, t4);
  float gk[8][4], gv[8][4];
  lt_fa16_zero(gk);
  lt_fa16_zero(gv);
  for (int q0 = qbegin, b = 0; q0 < L; q0 += 64, b ^= 1) {
    unsigned short* Qs = buf0 + b * kBuf;
    unsigned short* dOs = Qs + 64 * LT_FA16_LD;
    const float* Ls = reinterpret_cast<const float*>(dOs + 64 * LT_FA16_LD);  // lse per query
    const float* Ds = Ls + 64;
    if (q0 + 64 < L) load(buf0 + (b ^ 1) * kBuf, q0 + 64);
    lt_fa16_cp_commit();
    lt_fa16_cp_wait<1>();
    __syncthreads();
    float st[8][4], dpt[8][4];
    lt_fa16_zero(st);
    lt_fa16_zero(dpt);
    lt_fa16_mm_nt<BF>(st, ka, Qs, lane);
    lt_fa16_mm_nt<BF>(dpt, va, dOs, lane);
    // Only a tile past either end or on the causal diagonal hides pairs (a uniform branch).
    const bool masked = q0 + 64 > L || k0 + 64 > S || (causal && q0 < k0 + 63);
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
      const int qc = nt * 8 + 2 * t4;  // this lane's two queries: qc and qc + 1
      const float2 l2 = *reinterpret_cast<const float2*>(Ls + qc);
      const float2 d2 = *reinterpret_cast<const float2*>(Ds + qc);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = kr + (e >> 1) * 8, qi = q0 + qc + (e & 1);
        const bool hidden = masked && (qi >= L || key >= S || (causal && key > qi));
        const float lq = (e & 1) ? l2.y : l2.x, dq = (e & 1) ? d2.y : d2.x;
        const float p = hidden ? 0.f : lt_fa16_ex2(fmaf(st[nt][e], scale_log2, -lq * LT_FA_LOG2E));
        st[nt][e] = p;
        dpt[nt][e] = p * (dpt[nt][e] - dq);
      }
    }
    unsigned pa[4][4], da[4][4];
    lt_fa16_to_a<BF>(pa, st);
    lt_fa16_to_a<BF>(da, dpt);
    lt_fa16_mm_nn<BF>(gv, pa, dOs, lane);
    lt_fa16_mm_nn<BF>(gk, da, Qs, lane);
    __syncthreads();  // every warp is done with this buffer before it is refilled
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int key = kr + 8 * h;
    if (key >= S) continue;
    const size_t at = ((size_t)bh * S + key) * 64;
    if (dk) lt_fa16_store_row<BF>(dk + at, gk, h, t4, scale);
    if (dv) lt_fa16_store_row<BF>(dv + at, gv, h, t4, 1.f);
  }
}

// dQ = scale * dS K for one (batch point, 64-query tile) over the key tiles it sees: a pass of its
// own, deterministic (no atomics), recomputing S and dP per tile (cheap on tensor cores).
template <bool BF>
__device__ __forceinline__ void lt_fa16_grad_q(const unsigned short* q, const unsigned short* k,
                                               const unsigned short* v, const unsigned short* dout,
                                               const float* lse, const float* dsum,
                                               unsigned short* dq, int batch, int L, int S,
                                               int causal, float scale_log2, float scale) {
  // Two buffers of (K, V) tiles, as in the forward.
  unsigned short* const buf0 = reinterpret_cast<unsigned short*>(lt_fa_smem);
  const int tiles = (L + 63) / 64;
  const int bh = blockIdx.x % batch, q0 = (tiles - 1 - (int)(blockIdx.x / batch)) * 64;
  q += (size_t)bh * L * 64;
  dout += (size_t)bh * L * 64;
  k += (size_t)bh * S * 64;
  v += (size_t)bh * S * 64;
  lse += (size_t)bh * L;
  dsum += (size_t)bh * L;
  const int kend = causal ? min(S, q0 + 64) : S;
  if (kend > 0) {
    lt_fa16_load_tile_async(buf0, k, 0, S);
    lt_fa16_load_tile_async(buf0 + 64 * LT_FA16_LD, v, 0, S);
  }
  lt_fa16_cp_commit();
  const int lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3;
  const int r = q0 + (threadIdx.x >> 5) * 16 + g;
  unsigned qa[4][4], oa[4][4];
  lt_fa16_load_a(qa, q, r, L, t4);
  lt_fa16_load_a(oa, dout, r, L, t4);
  float l2[2], d[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    l2[h] = r + 8 * h < L ? lse[r + 8 * h] * LT_FA_LOG2E : 0.f;
    d[h] = r + 8 * h < L ? dsum[r + 8 * h] : 0.f;
  }
  float gq[8][4];
  lt_fa16_zero(gq);
  for (int k0 = 0, b = 0; k0 < kend; k0 += 64, b ^= 1) {
    unsigned short* Ks = buf0 + b * 2 * 64 * LT_FA16_LD;
    unsigned short* Vs = Ks + 64 * LT_FA16_LD;
    if (k0 + 64 < kend) {
      unsigned short* next = buf0 + (b ^ 1) * 2 * 64 * LT_FA16_LD;
      lt_fa16_load_tile_async(next, k, k0 + 64, S);
      lt_fa16_load_tile_async(next + 64 * LT_FA16_LD, v, k0 + 64, S);
    }
    lt_fa16_cp_commit();
    lt_fa16_cp_wait<1>();
    __syncthreads();
    float s[8][4], dp[8][4];
    lt_fa16_zero(s);
    lt_fa16_zero(dp);
    lt_fa16_mm_nt<BF>(s, qa, Ks, lane);
    lt_fa16_mm_nt<BF>(dp, oa, Vs, lane);
    // Only a tile past either end or on the causal diagonal hides pairs (a uniform branch).
    const bool masked = q0 + 64 > L || k0 + 64 > S || (causal && k0 + 63 > q0);
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int h = e >> 1, row = r + 8 * h, key = k0 + nt * 8 + 2 * t4 + (e & 1);
        const bool hidden = masked && (row >= L || key >= S || (causal && key > row));
        const float p = hidden ? 0.f : lt_fa16_ex2(fmaf(s[nt][e], scale_log2, -l2[h]));
        s[nt][e] = p * (dp[nt][e] - d[h]);
      }
    unsigned da[4][4];
    lt_fa16_to_a<BF>(da, s);
    lt_fa16_mm_nn<BF>(gq, da, Ks, lane);
    __syncthreads();  // every warp is done with this buffer before it is refilled
  }
#pragma unroll
  for (int h = 0; h < 2; ++h)
    if (r + 8 * h < L)
      lt_fa16_store_row<BF>(dq + ((size_t)bh * L + r + 8 * h) * 64, gq, h, t4, scale);
}

// The 16-bit kernels need sm_80's mma; older GPUs never get a plan that launches them (the CUDA
// backend offers 16-bit attention from compute capability 8.0), and a launch there traps.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define LT_FA16_BODY(call) __trap()
#else
#define LT_FA16_BODY(call) call
#endif

// @kernel lt_flash_attention_fwd_f32
// O = softmax(Q K^T * scale [causal: key <= query]) V and lse = the row logsumexp (natural log)
// of the scaled, masked scores; o or lse may be null. q [batch, L, 64], k and v [batch, S, 64],
// all contiguous. scale_log2 = scale * log2(e). Block b: batch point b % batch, query tile
// (tiles - 1 - b / batch): under a causal mask the longest rows start first.
extern "C" __global__ void __launch_bounds__(256)
    lt_flash_attention_fwd_f32(const float* __restrict__ q, const float* __restrict__ k,
                               const float* __restrict__ v, float* __restrict__ o,
                               float* __restrict__ lse, int batch, int L, int S, int causal,
                               float scale_log2) {
  float* Qs = reinterpret_cast<float*>(lt_fa_smem);
  float* KP = Qs + 4096;  // K^T [d][key], then P [query][key]
  float* Vs = KP + 4096;
  const int tiles = (L + 63) / 64;
  const int bh = blockIdx.x % batch, q0 = (tiles - 1 - (int)(blockIdx.x / batch)) * 64;
  q += (size_t)bh * L * 64;
  k += (size_t)bh * S * 64;
  v += (size_t)bh * S * 64;
  const int ty = threadIdx.x >> 4, tx = threadIdx.x & 15, r0 = ty * 4, c0 = tx * 4;
  lt_fa_load_rows(Qs, q, q0, L);
  float m[4], l[4], acc[4][4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    m[i] = LT_FA_NEG_INF;
    l[i] = 0.f;
#pragma unroll
    for (int j = 0; j < 4; ++j) acc[i][j] = 0.f;
  }
  const int kend = causal ? min(S, q0 + 64) : S;
  for (int k0 = 0; k0 < kend; k0 += 64) {
    __syncthreads();  // the last tile's P and V are read
    lt_fa_load_cols(KP, k, k0, S);
    lt_fa_load_rows(Vs, v, k0, S);
    __syncthreads();
    float s[4][4];
    lt_fa_zero(s);
    lt_fa_mm(s, Qs, KP, r0, c0);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int qi = q0 + r0 + i;
      float mx = LT_FA_NEG_INF;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int kj = k0 + c0 + j;
        float x = s[i][j] * scale_log2;
        if (kj >= S || (causal && kj > qi)) x = LT_FA_NEG_INF;
        s[i][j] = x;
        mx = fmaxf(mx, x);
      }
      const float mn = fmaxf(m[i], lt_fa_row_max(mx));
      const float base = mn == LT_FA_NEG_INF ? 0.f : mn;  // a row with nothing visible yet stays 0
      const float alpha = exp2f(m[i] - base);
      float sum = 0.f;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        s[i][j] = exp2f(s[i][j] - base);
        sum += s[i][j];
      }
      l[i] = l[i] * alpha + lt_fa_row_sum(sum);
      m[i] = mn;
#pragma unroll
      for (int j = 0; j < 4; ++j) acc[i][j] *= alpha;
    }
    __syncthreads();  // every thread has read K^T
    lt_fa_store_tile(KP, s, r0, c0);
    __syncthreads();
    lt_fa_mm(acc, KP, Vs, r0, c0);
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int qi = q0 + r0 + i;
    if (qi >= L) continue;
    const float inv = 1.f / l[i];
    if (o)
      *reinterpret_cast<float4*>(o + ((size_t)bh * L + qi) * 64 + c0) =
          make_float4(acc[i][0] * inv, acc[i][1] * inv, acc[i][2] * inv, acc[i][3] * inv);
    if (lse && tx == 0) lse[(size_t)bh * L + qi] = (m[i] + log2f(l[i])) * LT_FA_LN2;
  }
}

// @kernel lt_flash_attention_zero_f32
// dst[0 .. 4 * n4) = 0: dQ, before the dK/dV kernel adds every key tile's share into it.
extern "C" __global__ void __launch_bounds__(256)
    lt_flash_attention_zero_f32(float* __restrict__ dst, unsigned long long n4) {
  for (unsigned long long i = blockIdx.x * 256ull + threadIdx.x; i < n4; i += gridDim.x * 256ull)
    reinterpret_cast<float4*>(dst)[i] = make_float4(0.f, 0.f, 0.f, 0.f);
}

// @kernel lt_flash_attention_bwd_dkdv_f32
// dV = P^T dO and dK = scale * dS^T Q for one (batch point, key tile), over the query tiles that
// see it; the products run transposed (rows are keys), so P^T and dS^T come out of registers
// as stored. dQ += scale * dS K for each of those query tiles, added atomically (dq zeroed
// first; FlashAttention-2's scheme: no second pass recomputing S and dP for dQ, but the order
// of the additions, so dQ's last bits, varies run to run). dk, dv or dq may be null. Block b:
// key tile b / batch (under a causal mask the first key tiles are seen by the most queries:
// they start first). dS = P * (dO V^T - D), P = exp(S * scale - lse), D = rowsum(dO * O).
extern "C" __global__ void __launch_bounds__(256, 2)
    lt_flash_attention_bwd_dkdv_f32(const float* __restrict__ q, const float* __restrict__ k,
                                    const float* __restrict__ v, const float* __restrict__ dout,
                                    const float* __restrict__ lse, const float* __restrict__ dsum,
                                    float* __restrict__ dk, float* __restrict__ dv,
                                    float* __restrict__ dq, int batch, int L, int S, int causal,
                                    float scale_log2, float scale) {
  float* Ks = reinterpret_cast<float*>(lt_fa_smem);
  float* Vs = Ks + 4096;
  float* QT = Vs + 4096;   // Q^T [d][query], then P^T [key][query]
  float* dOT = QT + 4096;  // dO^T [e][query], then dS^T [key][query]
  float* Qs = dOT + 4096;
  float* dOs = Qs + 4096;
  const int bh = blockIdx.x % batch, k0 = (int)(blockIdx.x / batch) * 64;
  q += (size_t)bh * L * 64;
  dout += (size_t)bh * L * 64;
  k += (size_t)bh * S * 64;
  v += (size_t)bh * S * 64;
  lse += (size_t)bh * L;
  dsum += (size_t)bh * L;
  const int ty = threadIdx.x >> 4, tx = threadIdx.x & 15, r0 = ty * 4, c0 = tx * 4;
  lt_fa_load_rows(Ks, k, k0, S);
  lt_fa_load_rows(Vs, v, k0, S);
  float gk[4][4], gv[4][4];
  lt_fa_zero(gk);
  lt_fa_zero(gv);
  for (int q0 = causal ? k0 : 0; q0 < L; q0 += 64) {
    __syncthreads();
    lt_fa_load_cols(QT, q, q0, L);
    lt_fa_load_cols(dOT, dout, q0, L);
    lt_fa_load_rows(Qs, q, q0, L);
    lt_fa_load_rows(dOs, dout, q0, L);
    __syncthreads();
    float st[4][4], dpt[4][4];
    lt_fa_zero(st);
    lt_fa_zero(dpt);
    lt_fa_mm(st, Ks, QT, r0, c0);
    lt_fa_mm(dpt, Vs, dOT, r0, c0);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int qj = q0 + c0 + j;
      const float l2 = qj < L ? lse[qj] * LT_FA_LOG2E : 0.f;
      const float d = qj < L ? dsum[qj] : 0.f;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int ki = k0 + r0 + i;
        const bool hidden = qj >= L || ki >= S || (causal && ki > qj);
        const float p = hidden ? 0.f : exp2f(st[i][j] * scale_log2 - l2);
        st[i][j] = p;
        dpt[i][j] = p * (dpt[i][j] - d);
      }
    }
    __syncthreads();  // every thread has read Q^T and dO^T
    lt_fa_store_tile(QT, st, r0, c0);
    lt_fa_store_tile(dOT, dpt, r0, c0);
    __syncthreads();
    lt_fa_mm(gv, QT, dOs, r0, c0);
    lt_fa_mm(gk, dOT, Qs, r0, c0);
    if (dq) {
      // dQ's share of this key tile: rows are queries here, the left operand dS^T as stored.
      float gq[4][4];
      lt_fa_zero(gq);
      lt_fa_mm_tn(gq, dOT, Ks, r0, c0);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int qi = q0 + r0 + i;
        if (qi >= L) continue;
        lt_fa_atomic_add4(dq + ((size_t)bh * L + qi) * 64 + c0, gq[i][0] * scale, gq[i][1] * scale,
                          gq[i][2] * scale, gq[i][3] * scale);
      }
    }
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int ki = k0 + r0 + i;
    if (ki >= S) continue;
    const size_t at = ((size_t)bh * S + ki) * 64 + c0;
    if (dk)
      *reinterpret_cast<float4*>(dk + at) =
          make_float4(gk[i][0] * scale, gk[i][1] * scale, gk[i][2] * scale, gk[i][3] * scale);
    if (dv)
      *reinterpret_cast<float4*>(dv + at) = make_float4(gv[i][0], gv[i][1], gv[i][2], gv[i][3]);
  }
}

// @kernel lt_flash_attention_fwd_bf16
// lt_flash_attention_fwd_f32's computation for bfloat16 q, k, v and o (lse float32), 128 threads.
extern "C" __global__ void __launch_bounds__(128)
    lt_flash_attention_fwd_bf16(const unsigned short* __restrict__ q,
                                const unsigned short* __restrict__ k,
                                const unsigned short* __restrict__ v,
                                unsigned short* __restrict__ o, float* __restrict__ lse, int batch,
                                int L, int S, int causal, float scale_log2) {
  LT_FA16_BODY(lt_fa16_forward<true>(q, k, v, o, lse, batch, L, S, causal, scale_log2));
}

// @kernel lt_flash_attention_bwd_dkdv_bf16
// dK and dV (bfloat16) of one key tile per block (lt_fa16_grad_kv), 128 threads.
extern "C" __global__ void __launch_bounds__(128) lt_flash_attention_bwd_dkdv_bf16(
    const unsigned short* __restrict__ q, const unsigned short* __restrict__ k,
    const unsigned short* __restrict__ v, const unsigned short* __restrict__ dout,
    const float* __restrict__ lse, const float* __restrict__ dsum, unsigned short* __restrict__ dk,
    unsigned short* __restrict__ dv, int batch, int L, int S, int causal, float scale_log2,
    float scale) {
  LT_FA16_BODY(lt_fa16_grad_kv<true>(q, k, v, dout, lse, dsum, dk, dv, batch, L, S, causal,
                                     scale_log2, scale));
}

// @kernel lt_flash_attention_bwd_dq_bf16
// dQ (bfloat16) of one query tile per block (lt_fa16_grad_q), 128 threads.
extern "C" __global__ void __launch_bounds__(128) lt_flash_attention_bwd_dq_bf16(
    const unsigned short* __restrict__ q, const unsigned short* __restrict__ k,
    const unsigned short* __restrict__ v, const unsigned short* __restrict__ dout,
    const float* __restrict__ lse, const float* __restrict__ dsum, unsigned short* __restrict__ dq,
    int batch, int L, int S, int causal, float scale_log2, float scale) {
  LT_FA16_BODY(
      lt_fa16_grad_q<true>(q, k, v, dout, lse, dsum, dq, batch, L, S, causal, scale_log2, scale));
}

// @kernel lt_flash_attention_fwd_f16
// The same three for float16.
extern "C" __global__ void __launch_bounds__(128)
    lt_flash_attention_fwd_f16(const unsigned short* __restrict__ q,
                               const unsigned short* __restrict__ k,
                               const unsigned short* __restrict__ v, unsigned short* __restrict__ o,
                               float* __restrict__ lse, int batch, int L, int S, int causal,
                               float scale_log2) {
  LT_FA16_BODY(lt_fa16_forward<false>(q, k, v, o, lse, batch, L, S, causal, scale_log2));
}

// @kernel lt_flash_attention_bwd_dkdv_f16
extern "C" __global__ void __launch_bounds__(128) lt_flash_attention_bwd_dkdv_f16(
    const unsigned short* __restrict__ q, const unsigned short* __restrict__ k,
    const unsigned short* __restrict__ v, const unsigned short* __restrict__ dout,
    const float* __restrict__ lse, const float* __restrict__ dsum, unsigned short* __restrict__ dk,
    unsigned short* __restrict__ dv, int batch, int L, int S, int causal, float scale_log2,
    float scale) {
  LT_FA16_BODY(lt_fa16_grad_kv<false>(q, k, v, dout, lse, dsum, dk, dv, batch, L, S, causal,
                                      scale_log2, scale));
}

// @kernel lt_flash_attention_bwd_dq_f16
extern "C" __global__ void __launch_bounds__(128) lt_flash_attention_bwd_dq_f16(
    const unsigned short* __restrict__ q, const unsigned short* __restrict__ k,
    const unsigned short* __restrict__ v, const unsigned short* __restrict__ dout,
    const float* __restrict__ lse, const float* __restrict__ dsum, unsigned short* __restrict__ dq,
    int batch, int L, int S, int causal, float scale_log2, float scale) {
  LT_FA16_BODY(
      lt_fa16_grad_q<false>(q, k, v, dout, lse, dsum, dq, batch, L, S, causal, scale_log2, scale));
}
