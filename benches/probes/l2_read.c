/* How fast one thread reads the MLP's weights (109,386 f32s, 427 KiB) from L2: the floor of a
 * batch-1 forward pass, which reads each weight once. Eight independent 512-bit accumulators.
 * An argument gives another count of f32s: the wide MLP's 669,706 (2.6 MB) are read from L3.
 *
 *   gcc -O3 -funroll-all-loops -mavx512f -o /tmp/l2_read benches/probes/l2_read.c && /tmp/l2_read
 *   /tmp/l2_read 669706
 */
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    const size_t count = argc > 1 ? strtoul(argv[1], NULL, 10) : 109386;
    const size_t n = count / 128 * 128; /* whole groups of 8 vectors */
    if (n == 0) {
        fprintf(stderr, "expected a count of at least 128 f32s, found `%s`\n", argc > 1 ? argv[1] : "");
        return 2;
    }
    float *a = aligned_alloc(64, n * sizeof(float));
    for (size_t i = 0; i < n; i++) a[i] = 1e-3f * (float)(i % 7);
    __m512 s[8];
    for (int k = 0; k < 8; k++) s[k] = _mm512_setzero_ps();
    for (int rep = 0; rep < 3; rep++) {
        const int passes = (int)(2000000000 / (n * 4)) + 1;
        double t0 = now();
        for (int p = 0; p < passes; p++)
            for (size_t i = 0; i < n; i += 128)
                for (int k = 0; k < 8; k++)
                    s[k] = _mm512_add_ps(s[k], _mm512_load_ps(a + i + 16 * k));
        double t = (now() - t0) / passes;
        printf("%zu KiB read in %.2f us (%.0f GB/s)\n", n * 4 / 1024, t * 1e6, n * 4 / t / 1e9);
    }
    for (int k = 1; k < 8; k++) s[0] = _mm512_add_ps(s[0], s[k]);
    float out[16];
    _mm512_storeu_ps(out, s[0]);
    free(a);
    return out[0] < 0.0f;
}
