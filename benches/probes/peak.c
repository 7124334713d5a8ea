/* The one-thread peak of fused multiply-adds: twelve independent chains of 512-bit FMAs
 * (enough to hide their latency), nothing else in the loop. The figure the peer harness's
 * share-of-peak table is compared with (its --peak option).
 *
 *   gcc -O3 -funroll-all-loops -mavx512f -mfma -o /tmp/peak benches/probes/peak.c && /tmp/peak
 */
#include <immintrin.h>
#include <stdio.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(void) {
    __m512 acc[12];
    const __m512 b = _mm512_set1_ps(1.0000001f), c = _mm512_set1_ps(1e-7f);
    for (int k = 0; k < 12; k++) acc[k] = _mm512_set1_ps((float)k);
    for (int rep = 0; rep < 3; rep++) {
        const long n = 200000000;
        double t0 = now();
        for (long i = 0; i < n; i++)
            for (int k = 0; k < 12; k++) acc[k] = _mm512_fmadd_ps(acc[k], b, c);
        double t = now() - t0;
        printf("%.1f GFLOP/s (512-bit FMAs, one thread)\n", n * 12.0 * 16 * 2 / t / 1e9);
    }
    /* Every chain feeds the result, so the compiler keeps all of them. */
    for (int k = 1; k < 12; k++) acc[0] = _mm512_add_ps(acc[0], acc[k]);
    float out[16];
    _mm512_storeu_ps(out, acc[0]);
    return out[0] == 0.0f;
}
