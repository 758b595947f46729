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

__device__ __forceinline__ void lt_fa_store_tile(float* dst, const float (&t)[4][4], int r0,
                                                 int c0) {
#pragma unroll
  for (int i = 0; i < 4; ++i)
    *reinterpret_cast<float4*>(dst + (r0 + i) * 64 + c0) =
        make_float4(t[i][0], t[i][1], t[i][2], t[i][3]);
}

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
  extern __shared__ float4 lt_fa_smem[];
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
  extern __shared__ float4 lt_fa_smem[];
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
        float* row = dq + ((size_t)bh * L + qi) * 64 + c0;
#pragma unroll
        for (int j = 0; j < 4; ++j) atomicAdd(row + j, gq[i][j] * scale);
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
