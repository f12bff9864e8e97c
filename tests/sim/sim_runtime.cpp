// Runs tilejit's generated LLVM IR (NVPTX flavour) on the CPU under lli (tests/sim_lli.h): compiled to an
// object that lli loads beside the kernel's module (--extra-object). C-style code, extern "C":
// one pthread per GPU thread of a CTA, CTAs one after another. The NVVM intrinsics the lowering emits are
// renamed to sim_nvvm_* by the harness (tests/sim_lli.h) and defined here: special registers,
// bar.sync and warp shuffles as CTA-wide pthread barriers (so control flow around them must be uniform,
// as the lowering keeps it), and the approximate math as libm. Why: codegen's register-level arithmetic
// (layouts, reductions, index splits) can then be checked for values in CI, which has no GPU.
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern "C" {

#define MAX_THREADS 1024
static pthread_key_t tid_key;
static pthread_barrier_t cta_barrier;
static int nthreads;
static int ctaid[3], nctaid[3];
static uint32_t exchange[MAX_THREADS];

int sim_nvvm_read_ptx_sreg_tid_x(void) { return (int)(intptr_t)pthread_getspecific(tid_key); }
int sim_nvvm_read_ptx_sreg_tid_y(void) { return 0; }
int sim_nvvm_read_ptx_sreg_tid_z(void) { return 0; }
int sim_nvvm_read_ptx_sreg_ntid_x(void) { return nthreads; }
int sim_nvvm_read_ptx_sreg_ctaid_x(void) { return ctaid[0]; }
int sim_nvvm_read_ptx_sreg_ctaid_y(void) { return ctaid[1]; }
int sim_nvvm_read_ptx_sreg_ctaid_z(void) { return ctaid[2]; }
int sim_nvvm_read_ptx_sreg_nctaid_x(void) { return nctaid[0]; }
int sim_nvvm_read_ptx_sreg_nctaid_y(void) { return nctaid[1]; }
int sim_nvvm_read_ptx_sreg_nctaid_z(void) { return nctaid[2]; }
int sim_nvvm_read_ptx_sreg_laneid(void) { return sim_nvvm_read_ptx_sreg_tid_x() & 31; }
int sim_nvvm_read_ptx_sreg_warpid(void) { return sim_nvvm_read_ptx_sreg_tid_x() >> 5; }
void sim_nvvm_barrier0(void) { pthread_barrier_wait(&cta_barrier); }
void sim_nvvm_membar_gl(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
void sim_nvvm_barrier_cta_sync_aligned_all(int id) { (void)id; pthread_barrier_wait(&cta_barrier); }
void sim_nvvm_bar_sync(int id) { (void)id; pthread_barrier_wait(&cta_barrier); }
void sim_nvvm_barrier_sync(int id) { (void)id; pthread_barrier_wait(&cta_barrier); }

// A butterfly (lane ^ mask) or indexed (lane = idx) exchange among the lanes of each warp.
static uint32_t shuffle(uint32_t v, int arg, int bfly) {
  int t = sim_nvvm_read_ptx_sreg_tid_x();
  exchange[t] = v;
  pthread_barrier_wait(&cta_barrier);
  int lane = t & 31, src = bfly ? (lane ^ arg) : (arg & 31);
  uint32_t r = exchange[(t & ~31) | (src & 31)];
  pthread_barrier_wait(&cta_barrier);
  return r;
}
static float as_float(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static uint32_t as_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
int sim_nvvm_shfl_sync_bfly_i32(int m, int v, int b, int c) { (void)m; (void)c; return (int)shuffle((uint32_t)v, b, 1); }
float sim_nvvm_shfl_sync_bfly_f32(int m, float v, int b, int c) { (void)m; (void)c; return as_float(shuffle(as_bits(v), b, 1)); }
int sim_nvvm_shfl_sync_idx_i32(int m, int v, int b, int c) { (void)m; (void)c; return (int)shuffle((uint32_t)v, b, 0); }
float sim_nvvm_shfl_sync_idx_f32(int m, float v, int b, int c) { (void)m; (void)c; return as_float(shuffle(as_bits(v), b, 0)); }
// The x86 backend converts f32 to bf16 with this compiler-runtime call, which libgcc has only from GCC 13 on:
// defined here so that lli finds it whatever the host's libgcc (this module's definition comes first). Round
// to nearest even, NaNs kept quiet; the result goes back in xmm0's low 16 bits, as a bf16 return value does.
float __truncsfbf2(float x) {
  uint32_t u = as_bits(x);
  uint32_t h = (x != x) ? ((u >> 16) | 0x40u) : ((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  return as_float(h);
}
float sim_nvvm_i2f_rn(int x) { return (float)x; }
float sim_nvvm_ll2f_rn(long long x) { return (float)x; }
float sim_nvvm_ex2_approx_ftz_f(float x) { return exp2f(x); }
float sim_nvvm_ex2_approx_f(float x) { return exp2f(x); }
float sim_nvvm_lg2_approx_ftz_f(float x) { return log2f(x); }
float sim_nvvm_lg2_approx_f(float x) { return log2f(x); }
float sim_nvvm_tanh_approx_f32(float x) { return tanhf(x); }
float sim_nvvm_rcp_approx_ftz_f(float x) { return 1.0f / x; }
float sim_nvvm_sqrt_approx_f(float x) { return sqrtf(x); }
float sim_nvvm_rsqrt_approx_f(float x) { return 1.0f / sqrtf(x); }
float sim_nvvm_sin_approx_f(float x) { return sinf(x); }
float sim_nvvm_cos_approx_f(float x) { return cosf(x); }
float sim_nvvm_fmax_f(float x, float y) { return fmaxf(x, y); }
float sim_nvvm_fmin_f(float x, float y) { return fminf(x, y); }

typedef void (*kernel_fn)(uint64_t *args);
static kernel_fn kernel;
static uint64_t *kernel_args;
static void *thread_main(void *tid) {
  pthread_setspecific(tid_key, tid);
  kernel(kernel_args);
  return NULL;
}

// Job file (argv[1]): i32 threads, grid x, y, z, argument count; then per argument an i32 kind (0 buffer,
// 1 scalar) and a u64 (a buffer's byte size, or a scalar's bits), followed by a buffer's bytes. Afterwards
// every buffer's bytes go to argv[2], in order. Returns 0, or 2 for a malformed job.
int tj_sim_main(int argc, char **argv, kernel_fn k) {
  if (argc < 3) return 2;
  FILE *f = fopen(argv[1], "rb");
  if (!f) return 2;
  int hdr[5];
  if (fread(hdr, 4, 5, f) != 5 || hdr[0] < 1 || hdr[0] > MAX_THREADS || hdr[4] < 0 || hdr[4] > 64) return 2;
  nthreads = hdr[0];
  nctaid[0] = hdr[1], nctaid[1] = hdr[2], nctaid[2] = hdr[3];
  int nargs = hdr[4], kinds[64];
  uint64_t args[64], sizes[64];
  for (int i = 0; i < nargs; ++i) {
    uint64_t v;
    if (fread(&kinds[i], 4, 1, f) != 1 || fread(&v, 8, 1, f) != 1) return 2;
    sizes[i] = v;
    if (kinds[i] == 0) {
      char *buf = static_cast<char *>(malloc(v + 64));
      if (!buf || (v && fread(buf, 1, v, f) != v)) return 2;
      args[i] = (uint64_t)(uintptr_t)buf;
    } else {
      args[i] = v;
    }
  }
  fclose(f);
  kernel = k;
  kernel_args = args;
  pthread_key_create(&tid_key, NULL);
  pthread_barrier_init(&cta_barrier, NULL, (unsigned)nthreads);
  static pthread_t threads[MAX_THREADS];
  for (int z = 0; z < nctaid[2]; ++z)
    for (int y = 0; y < nctaid[1]; ++y)
      for (int x = 0; x < nctaid[0]; ++x) {
        ctaid[0] = x, ctaid[1] = y, ctaid[2] = z;
        for (int t = 0; t < nthreads; ++t) pthread_create(&threads[t], NULL, thread_main, (void *)(intptr_t)t);
        for (int t = 0; t < nthreads; ++t) pthread_join(threads[t], NULL);
      }
  FILE *o = fopen(argv[2], "wb");
  if (!o) return 2;
  for (int i = 0; i < nargs; ++i)
    if (kinds[i] == 0) fwrite((void *)(uintptr_t)args[i], 1, sizes[i], o);
  fclose(o);
  return 0;
}

}  // extern "C"
