/* The static library from C: classifies the MNIST test set with the four shipped nets and
 * fails unless each gets at least 97% right (they get 98.10-99.42%; a broken call, through the
 * wrong ABI or a wrong image layout, gets about 10%).
 *
 *   cargo build --release --manifest-path tests/no_std_staticlib/Cargo.toml
 *   cc -O2 tests/no_std_staticlib/classify_mnist.c \
 *       tests/no_std_staticlib/target/release/libno_std_staticlib.a -Wl,--gc-sections -o classify_mnist
 *   gzip -dc $MNIST_DIR/t10k-images-idx3-ubyte.gz > images; gzip -dc $MNIST_DIR/t10k-labels-idx1-ubyte.gz > labels
 *   ./classify_mnist images labels
 *
 * `--gc-sections` drops the unused code of Rust's prebuilt `core`, which refers to
 * `rust_eh_personality`; what is left needs only `memcpy`, `memset` and `abort` (the panic
 * handler's) from the C library. */
#include <stdint.h>
#include <stdio.h>

/* `pixels`: 784 readable bytes, never NULL (the Rust side takes `&[u8; 784]`). */
uint8_t constmat_classify_digit_cnn(const uint8_t pixels[static 784]);
uint8_t constmat_classify_digit_mlp(const uint8_t pixels[static 784]);
uint8_t constmat_classify_digit_cnn_int8(const uint8_t pixels[static 784]);
uint8_t constmat_classify_digit_mlp_int8(const uint8_t pixels[static 784]);

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s IMAGES LABELS (the IDX files of MNIST's test set, unzipped)\n", argv[0]);
        return 2;
    }
    FILE *images = fopen(argv[1], "rb"), *labels = fopen(argv[2], "rb");
    uint8_t header[16], image[784], label;
    if (!images || !labels || fread(header, 1, 16, images) != 16 || fread(header, 1, 8, labels) != 8) {
        fprintf(stderr, "cannot read %s and %s\n", argv[1], argv[2]);
        return 2;
    }
    const char *names[4] = {"cnn", "mlp", "cnn-int8", "mlp-int8"};
    long right[4] = {0}, count = 0;
    while (fread(image, 1, 784, images) == 784 && fread(&label, 1, 1, labels) == 1) {
        right[0] += constmat_classify_digit_cnn(image) == label;
        right[1] += constmat_classify_digit_mlp(image) == label;
        right[2] += constmat_classify_digit_cnn_int8(image) == label;
        right[3] += constmat_classify_digit_mlp_int8(image) == label;
        count++;
    }
    if (count != 10000) {
        fprintf(stderr, "expected 10000 test images, read %ld\n", count);
        return 1;
    }
    int failed = 0;
    for (int i = 0; i < 4; i++) {
        printf("%-8s %ld / %ld right\n", names[i], right[i], count);
        failed |= right[i] < 9700;
    }
    return failed;
}
