// decode_floor: how fast can a split-KV decode kernel move its K/V on this GPU?
//
// METHOD.md's "count the floor first" for decode at batch 1: kernels that only
// read each (split, kv head) block's K and V rows the way a decode split does
// (head dim 128, bf16, layout [L, KH, D]), with the attention arithmetic left
// out, and then optionally merge the splits' partial results. Timed like
// bench/decode_bench.py: a CUDA graph of 20 calls rotating over enough K/V
// copies to miss the L2, median of 10 replays. No split kernel of the same
// shape can beat the "stream" rows; the "merge" rows add what combining the
// splits costs at the least (docs/perf-log.md P28).
//
//   nvcc -O3 -arch=sm_90a -o decode_floor bench/decode_floor.cu -lcuda
//   ./decode_floor [L [KH]]          (default 8192 8: batch 1, GQA 32/8)
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <algorithm>
#include <vector>

#define CK(x)                                                                       \
    do {                                                                            \
        cudaError_t e_ = (x);                                                       \
        if (e_ != cudaSuccess) {                                                    \
            fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); \
            exit(1);                                                                \
        }                                                                           \
    } while (0)

static const int D = 128;  // head dim: a row of one head is 256 bytes
static const int ROW_BYTES = D * 2;
static const int MERGE_OUT = 4 * D;  // GQA 32/8, q_len 1: 4 query rows per kv head

struct Args {
    const char *k, *v;   // [L, KH, D] bf16, as bytes
    int L, KH, nsplit;
    int interleave;      // 1: split s takes tiles s, s + nsplit, ...; 0: one contiguous chunk
    const int *seqlens;  // read first, as a decode kernel does (null: use L)
    float *sink;
};

// The tiles of split s: first, first + step, ... (count of them).
struct SplitRange { int first, count, step, L; };

__device__ SplitRange split_range(const Args &a, int rows) {
    SplitRange r;
    r.L = a.seqlens ? min(a.L, a.seqlens[0]) : a.L;
    int ntiles = (r.L + rows - 1) / rows, s = blockIdx.x;
    if (a.interleave) {
        r.first = s;
        r.step = a.nsplit;
        r.count = s < ntiles ? (ntiles - s + r.step - 1) / r.step : 0;
    } else {
        int per = (ntiles + a.nsplit - 1) / a.nsplit;
        r.first = s * per;
        r.step = 1;
        r.count = max(0, min(ntiles, r.first + per) - r.first);
    }
    return r;
}

__device__ __forceinline__ void cp_async16(uint32_t dst, const void *src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src));
}

// Streams the block's tiles through a cp.async ring of STAGES buffers (ROWS K
// rows then ROWS V rows each); returns a sum over what arrived so that nothing
// is optimized away.
template <int ROWS, int STAGES, int THREADS>
__device__ float stream_tiles(const Args &a, char *smem) {
    SplitRange sr = split_range(a, ROWS);
    const size_t row_stride = (size_t)a.KH * ROW_BYTES;
    const char *kb = a.k + (size_t)blockIdx.y * ROW_BYTES, *vb = a.v + (size_t)blockIdx.y * ROW_BYTES;
    const int stage_bytes = 2 * ROWS * ROW_BYTES;
    uint32_t base = (uint32_t)__cvta_generic_to_shared(smem);
    auto issue = [&](int t) {
        if (t < sr.count) {
            int tile = sr.first + t * sr.step;
            uint32_t dst = base + (t % STAGES) * stage_bytes;
            for (int c = threadIdx.x; c < ROWS * 16; c += THREADS) {
                int r = c >> 4, col = (c & 15) * 16, row = tile * ROWS + r;
                if (row < sr.L) {
                    cp_async16(dst + r * ROW_BYTES + col, kb + row * row_stride + col);
                    cp_async16(dst + (ROWS + r) * ROW_BYTES + col, vb + row * row_stride + col);
                }
            }
        }
        asm volatile("cp.async.commit_group;\n");
    };
    for (int t = 0; t < STAGES - 1; t++) issue(t);
    float acc = 0.f;
    for (int t = 0; t < sr.count; t++) {
        asm volatile("cp.async.wait_group %0;\n" ::"n"(STAGES - 2));
        __syncthreads();
        const float *p = (const float *)(smem + (t % STAGES) * stage_bytes);
        for (int i = threadIdx.x; i < stage_bytes / 4; i += THREADS * 8) acc += p[i];
        __syncthreads();
        issue(t + STAGES - 1);
    }
    return acc;
}

__global__ void empty_kernel(Args a) {
    if (a.seqlens && threadIdx.x == 0 && a.seqlens[0] < 0) a.sink[0] = 1.f;
}

template <int ROWS, int STAGES, int THREADS>
__global__ void __launch_bounds__(THREADS) stream_cp_async(Args a) {
    extern __shared__ __align__(1024) char smem[];
    float acc = stream_tiles<ROWS, STAGES, THREADS>(a, smem);
    if (acc == 12345.f) a.sink[0] = acc;
}

// Plain 16-byte loads into registers, UNROLL in flight per thread, no shared memory.
template <int THREADS, int UNROLL>
__global__ void __launch_bounds__(THREADS) stream_ldg(Args a) {
    SplitRange sr = split_range(a, 1);  // rows, contiguous
    const size_t row_stride = (size_t)a.KH * ROW_BYTES;
    float acc = 0.f;
    int nchunks = sr.count * 16 * 2;  // 16-byte chunks of K and V rows
    for (int c0 = threadIdx.x; c0 < nchunks; c0 += THREADS * UNROLL) {
        uint4 r[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            int c = c0 + u * THREADS;
            r[u] = make_uint4(0, 0, 0, 0);
            if (c < nchunks) {
                int rc = c >> 1, row = sr.first + (rc >> 4), col = (rc & 15) * 16;
                const char *m = (c & 1 ? a.v : a.k) + (size_t)blockIdx.y * ROW_BYTES;
                r[u] = __ldcs((const uint4 *)(m + row * row_stride + col));
            }
        }
#pragma unroll
        for (int u = 0; u < UNROLL; u++) acc += __uint_as_float(r[u].x ^ r[u].w);
    }
    if (acc == 12345.f) a.sink[0] = acc;
}

// TMA: a 2D tensor map over [L rows, KH*D columns], one ROWS x 128 box per
// matrix and tile, completion on an mbarrier; thread 0 issues.
template <int ROWS, int STAGES>
__global__ void __launch_bounds__(128) stream_tma(const __grid_constant__ CUtensorMap kmap,
                                                  const __grid_constant__ CUtensorMap vmap, Args a) {
    extern __shared__ __align__(1024) char smem[];
    __shared__ __align__(8) uint64_t bars[STAGES];
    SplitRange sr = split_range(a, ROWS);
    const int stage_bytes = 2 * ROWS * ROW_BYTES;
    uint32_t base = (uint32_t)__cvta_generic_to_shared(smem);
    uint32_t bar0 = (uint32_t)__cvta_generic_to_shared(bars);
    if (threadIdx.x == 0) {
        for (int i = 0; i < STAGES; i++) asm volatile("mbarrier.init.shared.b64 [%0], 1;\n" ::"r"(bar0 + 8 * i));
        asm volatile("fence.mbarrier_init.release.cluster;\n");
    }
    __syncthreads();
    auto issue = [&](int t) {
        if (threadIdx.x != 0 || t >= sr.count) return;
        uint32_t bar = bar0 + 8 * (t % STAGES), dst = base + (t % STAGES) * stage_bytes;
        int x = blockIdx.y * D, y = (sr.first + t * sr.step) * ROWS;
        asm volatile("mbarrier.arrive.expect_tx.shared.b64 _, [%0], %1;\n" ::"r"(bar), "r"(stage_bytes));
        asm volatile(
            "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
            ::"r"(dst), "l"(&kmap), "r"(x), "r"(y), "r"(bar) : "memory");
        asm volatile(
            "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
            ::"r"(dst + ROWS * ROW_BYTES), "l"(&vmap), "r"(x), "r"(y), "r"(bar) : "memory");
    };
    for (int t = 0; t < STAGES - 1; t++) issue(t);
    float acc = 0.f;
    for (int t = 0; t < sr.count; t++) {
        uint32_t bar = bar0 + 8 * (t % STAGES), phase = (t / STAGES) & 1, done = 0;
        while (!done)
            asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }\n"
                         : "=r"(done) : "r"(bar), "r"(phase));
        const float *p = (const float *)(smem + (t % STAGES) * stage_bytes);
        for (int i = threadIdx.x; i < stage_bytes / 4; i += 128 * 8) acc += p[i];
        __syncthreads();
        issue(t + STAGES - 1);
    }
    if (acc == 12345.f) a.sink[0] = acc;
}

// The stream (128-row tiles), then the merge a decode kernel needs: 4 rows x
// 128 columns of f32 partial O and 4 LSEs per block, combined per kv head.
//   MERGE 0: none (each block writes its own rows).
//   MERGE 1: through global memory as flashc's fused merge does (partials, a
//            barrier, thread 0's atom.acq_rel on the kv head's counter, the
//            last block loads every partial in one round and merges).
//   MERGE 2: through distributed shared memory, the kv head's splits launched
//            as one cluster; each block merges 512 / nsplit outputs.
struct Merge { float *part, *lse; unsigned *counter; __nv_bfloat16 *out; };

template <int STAGES, int MERGE, int THREADS>
__global__ void __launch_bounds__(THREADS) stream_merge(Args a, Merge g) {
    extern __shared__ __align__(1024) char smem[];
    const int s = blockIdx.x, h = blockIdx.y, tid = threadIdx.x, ns = a.nsplit;
    float acc = stream_tiles<128, STAGES, THREADS>(a, smem);
    if (tid >= 128) return;
    float4 mine = make_float4(acc, acc * 0.5f, acc * 0.25f, acc * 0.125f);
    float lse = (float)s * 0.01f;
    if (MERGE == 0) {
        __nv_bfloat16 *o = g.out + ((size_t)h * ns + s) * MERGE_OUT + tid * 4;
        o[0] = __float2bfloat16(mine.x), o[1] = __float2bfloat16(mine.y);
        o[2] = __float2bfloat16(mine.z), o[3] = __float2bfloat16(mine.w);
        return;
    }
    if (MERGE == 1) {
        ((float4 *)(g.part + ((size_t)h * ns + s) * MERGE_OUT))[tid] = mine;
        if (tid < 4) g.lse[((size_t)h * ns + s) * 4 + tid] = lse;
        __syncthreads();
        int last = 0;
        if (tid == 0) {
            unsigned old;
            asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;\n" : "=r"(old) : "l"(g.counter + h) : "memory");
            last = old == (unsigned)ns - 1;
            if (last) g.counter[h] = 0;
        }
        if (!__syncthreads_or(last)) return;
        int row = tid / 32;
        float lj[16];
        float4 pj[16];
        for (int j = 0; j < ns && j < 16; j++) {  // one round: every load before any use
            lj[j] = *(volatile float *)&g.lse[((size_t)h * ns + j) * 4 + row];
            volatile float *p = g.part + ((size_t)h * ns + j) * MERGE_OUT + tid * 4;
            pj[j] = make_float4(p[0], p[1], p[2], p[3]);
        }
        float m = -INFINITY, l = 0.f;
        float4 o = make_float4(0, 0, 0, 0);
        for (int j = 0; j < ns && j < 16; j++) m = fmaxf(m, lj[j]);
        for (int j = 0; j < ns && j < 16; j++) {
            float w = __expf(lj[j] - m);
            l += w, o.x += w * pj[j].x, o.y += w * pj[j].y, o.z += w * pj[j].z, o.w += w * pj[j].w;
        }
        __nv_bfloat16 *out = g.out + (size_t)h * MERGE_OUT + tid * 4;
        out[0] = __float2bfloat16(o.x / l), out[1] = __float2bfloat16(o.y / l);
        out[2] = __float2bfloat16(o.z / l), out[3] = __float2bfloat16(o.w / l);
        return;
    }
    __syncthreads();  // the ring is free: the partials go to its start
    float *part = (float *)smem;
    ((float4 *)part)[tid] = mine;
    if (tid < 4) part[MERGE_OUT + tid] = lse;
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
    if (tid < MERGE_OUT / ns) {
        int idx = s * (MERGE_OUT / ns) + tid, row = idx / D;
        uint32_t local = (uint32_t)__cvta_generic_to_shared(part);
        float m = -INFINITY, l = 0.f, o = 0.f, lj[16], pj[16];
        for (int j = 0; j < ns && j < 16; j++) {
            uint32_t remote;
            asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(local), "r"(j));
            asm volatile("ld.shared::cluster.f32 %0, [%1];\n" : "=f"(lj[j]) : "r"(remote + 4 * (MERGE_OUT + row)));
            asm volatile("ld.shared::cluster.f32 %0, [%1];\n" : "=f"(pj[j]) : "r"(remote + 4 * idx));
        }
        for (int j = 0; j < ns && j < 16; j++) m = fmaxf(m, lj[j]);
        for (int j = 0; j < ns && j < 16; j++) {
            float w = __expf(lj[j] - m);
            l += w, o += w * pj[j];
        }
        g.out[(size_t)h * MERGE_OUT + idx] = __float2bfloat16(o / l);
    }
    // No block may leave while another still reads its shared memory.
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}

// ------------------------------------------------------------------ host side

struct Bufs {
    int L, KH, copies;
    double bytes;  // K + V of one call
    std::vector<char *> k, v;
    int *seqlens;
    float *sink;
    Merge merge;
};

// Median microseconds per call: `launch(stream, copy)` captured 20 times into
// a graph (rotating over the copies), 10 timed replays after 3 warm-ups.
template <typename Launch>
static double graph_us(Launch launch, int copies) {
    cudaStream_t st;
    CK(cudaStreamCreate(&st));
    for (int i = 0; i < 3; i++) launch(st, i % copies);
    CK(cudaStreamSynchronize(st));
    CK(cudaGetLastError());
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
    for (int i = 0; i < 20; i++) launch(st, i % copies);
    CK(cudaStreamEndCapture(st, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    std::vector<float> ts;
    for (int i = 0; i < 13; i++) {
        CK(cudaEventRecord(e0, st));
        CK(cudaGraphLaunch(ge, st));
        CK(cudaEventRecord(e1, st));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        if (i >= 3) ts.push_back(ms * 1000.f / 20);
    }
    std::sort(ts.begin(), ts.end());
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    CK(cudaGraphExecDestroy(ge));
    CK(cudaGraphDestroy(g));
    CK(cudaStreamDestroy(st));
    return ts[ts.size() / 2];
}

static Args args_for(const Bufs &b, int c, int nsplit, int interleave) {
    return Args{b.k[c], b.v[c], b.L, b.KH, nsplit, interleave, b.seqlens, b.sink};
}

static void report(const char *what, int rows, int stages, int threads, int nsplit, const char *order, double us,
                   const Bufs &b) {
    printf("%-20s rows %3d stages %d threads %3d splits %3d %-11s %7.2f us %5.2f TB/s\n", what, rows, stages, threads,
           nsplit, order, us, b.bytes / us / 1e6);
}

template <int ROWS, int STAGES, int THREADS>
static void run_cp_async(const Bufs &b, int nsplit, int interleave) {
    auto kern = stream_cp_async<ROWS, STAGES, THREADS>;
    int smem = STAGES * 2 * ROWS * ROW_BYTES;
    CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    double us = graph_us([&](cudaStream_t st, int c) {
        kern<<<dim3(nsplit, b.KH), THREADS, smem, st>>>(args_for(b, c, nsplit, interleave));
    }, b.copies);
    report("stream cp.async", ROWS, STAGES, THREADS, nsplit, interleave ? "interleaved" : "contiguous", us, b);
}

static void run_ldg(const Bufs &b, int nsplit) {
    double us = graph_us([&](cudaStream_t st, int c) {
        stream_ldg<256, 8><<<dim3(nsplit, b.KH), 256, 0, st>>>(args_for(b, c, nsplit, 0));
    }, b.copies);
    report("stream ld.global", 1, 0, 256, nsplit, "contiguous", us, b);
}

static CUtensorMap make_map(const void *p, const Bufs &b, int rows) {
    CUtensorMap m;
    cuuint64_t dims[2] = {(cuuint64_t)b.KH * D, (cuuint64_t)b.L};
    cuuint64_t strides[1] = {(cuuint64_t)b.KH * ROW_BYTES};
    cuuint32_t box[2] = {D, (cuuint32_t)rows}, estr[2] = {1, 1};
    CUresult r = cuTensorMapEncodeTiled(&m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, (void *)p, dims, strides, box, estr,
                                        CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                                        CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) {
        fprintf(stderr, "cuTensorMapEncodeTiled failed (%d)\n", (int)r);
        exit(1);
    }
    return m;
}

template <int ROWS, int STAGES>
static void run_tma(const Bufs &b, int nsplit, int interleave) {
    std::vector<CUtensorMap> km, vm;
    for (int i = 0; i < b.copies; i++) km.push_back(make_map(b.k[i], b, ROWS)), vm.push_back(make_map(b.v[i], b, ROWS));
    auto kern = stream_tma<ROWS, STAGES>;
    int smem = STAGES * 2 * ROWS * ROW_BYTES;
    CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    double us = graph_us([&](cudaStream_t st, int c) {
        kern<<<dim3(nsplit, b.KH), 128, smem, st>>>(km[c], vm[c], args_for(b, c, nsplit, interleave));
    }, b.copies);
    report("stream TMA 2D", ROWS, STAGES, 128, nsplit, interleave ? "interleaved" : "contiguous", us, b);
}

template <int STAGES, int MERGE, int THREADS>
static void run_merge(const Bufs &b, int nsplit) {
    static const char *names[] = {"stream, no merge", "+ global merge", "+ cluster merge"};
    auto kern = stream_merge<STAGES, MERGE, THREADS>;
    int smem = STAGES * 2 * 128 * ROW_BYTES;
    CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[1];
    cfg.gridDim = dim3(nsplit, b.KH);
    cfg.blockDim = dim3(THREADS);
    cfg.dynamicSmemBytes = smem;
    if (MERGE == 2) {
        CK(cudaFuncSetAttribute(kern, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
        attr[0].id = cudaLaunchAttributeClusterDimension;
        attr[0].val.clusterDim.x = nsplit, attr[0].val.clusterDim.y = 1, attr[0].val.clusterDim.z = 1;
        cfg.attrs = attr, cfg.numAttrs = 1;
        int nclusters = 0;
        CK(cudaOccupancyMaxActiveClusters(&nclusters, kern, &cfg));
        printf("  (clusters of %d blocks of %d KB: %d fit at once, %d launched)\n", nsplit, smem >> 10, nclusters,
               b.KH);
    }
    double us = graph_us([&](cudaStream_t st, int c) {
        cfg.stream = st;
        CK(cudaLaunchKernelEx(&cfg, kern, args_for(b, c, nsplit, 0), b.merge));
    }, b.copies);
    report(names[MERGE], 128, STAGES, THREADS, nsplit, "contiguous", us, b);
}

int main(int argc, char **argv) {
    Bufs b;
    b.L = argc > 1 ? atoi(argv[1]) : 8192;
    b.KH = argc > 2 ? atoi(argv[2]) : 8;
    size_t mat = (size_t)b.L * b.KH * ROW_BYTES;
    b.bytes = 2.0 * mat;
    b.copies = (int)std::min<size_t>(8, (4 * ((size_t)50 << 20) + 2 * mat - 1) / (2 * mat));
    std::vector<uint16_t> host(mat / 2);
    srand(1);
    for (auto &x : host) x = (uint16_t)(0x3c00 + (rand() & 0x3ff));  // positive bf16 values, no zeros
    for (int i = 0; i < b.copies; i++) {
        char *k, *v;
        CK(cudaMalloc(&k, mat));
        CK(cudaMalloc(&v, mat));
        CK(cudaMemcpy(k, host.data(), mat, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(v, host.data(), mat, cudaMemcpyHostToDevice));
        b.k.push_back(k), b.v.push_back(v);
    }
    CK(cudaMalloc(&b.seqlens, sizeof(int)));
    CK(cudaMemcpy(b.seqlens, &b.L, sizeof(int), cudaMemcpyHostToDevice));
    CK(cudaMalloc(&b.sink, sizeof(float)));
    size_t units = (size_t)b.KH * 64;
    CK(cudaMalloc(&b.merge.part, units * MERGE_OUT * 4));
    CK(cudaMalloc(&b.merge.lse, units * 4 * 4));
    CK(cudaMalloc(&b.merge.counter, b.KH * 4));
    CK(cudaMemset(b.merge.counter, 0, b.KH * 4));
    CK(cudaMalloc(&b.merge.out, units * MERGE_OUT * 2));
    int sms;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    printf("decode_floor: L %d, KH %d, D %d, bf16: %.1f MB of K+V a call, %d copies, %d SMs\n", b.L, b.KH, D,
           b.bytes / 1e6, b.copies, sms);
    double us = graph_us([&](cudaStream_t st, int c) {
        empty_kernel<<<dim3(16, b.KH), 128, 0, st>>>(args_for(b, c, 16, 0));
    }, b.copies);
    printf("%-20s %7.2f us\n", "empty kernel", us);
    // One block per SM (16 splits x 8 kv heads at GQA 32/8), the shapes flashc runs.
    run_cp_async<128, 2, 128>(b, 16, 0);
    run_cp_async<128, 2, 128>(b, 16, 1);
    run_cp_async<128, 3, 128>(b, 16, 0);
    run_cp_async<64, 2, 128>(b, 16, 0);
    run_cp_async<64, 3, 128>(b, 16, 0);
    run_cp_async<64, 3, 128>(b, 32, 0);
    run_ldg(b, 32);
    run_tma<128, 2>(b, 16, 0);
    run_tma<128, 3>(b, 16, 0);
    run_tma<64, 3>(b, 32, 0);
    // What merging the splits adds; the cluster needs a kv head's splits in one GPC.
    run_merge<3, 0, 128>(b, 16);
    run_merge<3, 1, 128>(b, 16);
    run_merge<3, 2, 128>(b, 16);
    run_merge<3, 0, 256>(b, 8);
    run_merge<3, 1, 256>(b, 8);
    run_merge<3, 2, 256>(b, 8);
    return 0;
}
