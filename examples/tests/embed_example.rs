//! The `embed` example's image pipeline and command line (`examples/embed/preprocess.rs` and
//! `examples/embed/cli.rs`, included by path): decoding PGM and PNG, MNIST's normalization, the
//! errors of bad files, the arguments in any order, and MNIST's test digits read back through
//! the pipeline by the baked shipped model. A test of the examples' package, which has the `png`
//! crate the pipeline needs; the baking itself is tested in the root package's `tests/embed.rs`.
#![cfg(feature = "std")]

use std::path::Path;

#[cfg(feature = "data")]
use constmat::nn::Predict;

/// The shipped model, baked in as `examples/embed/main.rs` bakes it.
#[cfg(feature = "data")]
mod baked {
    use constmat::embed::Baked;
    use constmat::nn::{Dense, Relu};

    pub type Mnist = constmat::net![
        Dense<f32, 784, 128, Relu>,
        Dense<f32, 128, 64, Relu>,
        Dense<f32, 64, 10>,
    ];
    pub static MNIST: Baked<Mnist> =
        constmat::include_net!("../../models/mnist-784-128-64-10.safetensors");
}

/// The MNIST test split, from the directory in `MNIST_DIR` (skipped with a notice when it is
/// unset).
#[cfg(feature = "data")]
fn mnist_test_split() -> Option<constmat::data::mnist::Split> {
    use constmat::data::{idx, mnist};

    let Some(dir) = std::env::var_os("MNIST_DIR").filter(|d| !d.is_empty()) else {
        println!("skipping: MNIST_DIR is not set");
        return None;
    };
    let [_, _, images, labels] = mnist::Mnist::locate(&dir).unwrap();
    let images = idx::read_images_from_path(images).unwrap();
    let labels = idx::read_labels_from_path(labels).unwrap();
    Some(mnist::Split::new(images, labels).unwrap())
}

// ---------------------------------------------------------------------------------------------
// The image pipeline of `examples/embed` (decoding PGM and PNG, MNIST's normalization).
// ---------------------------------------------------------------------------------------------

#[allow(dead_code)] // the example uses all of it; these tests only some
#[path = "../embed/preprocess.rs"]
mod preprocess;

// The command line of `examples/embed`.
#[allow(dead_code)] // the example prints `USAGE`; these tests check the parser
#[path = "../embed/cli.rs"]
mod cli;

#[test]
fn the_embed_example_reads_its_command_line_in_any_order() {
    use cli::{Which, parse_args};
    use std::path::PathBuf;
    let parse = |args: &[&str]| parse_args(&args.iter().map(|a| a.to_string()).collect::<Vec<_>>());
    let image = PathBuf::from("seven.png");

    assert_eq!(parse(&["seven.png"]), Ok(Some((Which::Mlp, image.clone()))));
    assert_eq!(
        parse(&["--net", "cnn", "seven.png"]),
        Ok(Some((Which::Cnn, image.clone())))
    );
    assert_eq!(
        parse(&["seven.png", "--net", "cnn-int8"]),
        Ok(Some((Which::CnnInt8, image.clone())))
    );
    assert_eq!(
        parse(&["--net=mlp-int8", "seven.png"]),
        Ok(Some((Which::MlpInt8, image.clone())))
    );
    assert_eq!(
        parse(&["seven.png", "--net=mlp"]),
        Ok(Some((Which::Mlp, image)))
    );
    assert_eq!(parse(&["--help"]), Ok(None));
    assert_eq!(parse(&["seven.png", "-h"]), Ok(None));

    // Each mistake named.
    let error = |args: &[&str]| parse(args).unwrap_err();
    assert_eq!(error(&[]), "expected an image file");
    assert_eq!(error(&["--net", "cnn"]), "expected an image file");
    assert_eq!(
        error(&["seven.png", "--net"]),
        "--net needs a value: mlp, cnn, mlp-int8 or cnn-int8"
    );
    assert_eq!(
        error(&["--net", "lenet", "seven.png"]),
        "--net: expected mlp, cnn, mlp-int8 or cnn-int8, found `lenet`"
    );
    assert_eq!(
        error(&["--net=", "seven.png"]),
        "--net: expected mlp, cnn, mlp-int8 or cnn-int8, found ``"
    );
    assert_eq!(
        error(&["--net", "cnn", "seven.png", "--net", "mlp"]),
        "--net given twice"
    );
    assert_eq!(error(&["-n", "cnn", "seven.png"]), "unknown option `-n`");
    assert_eq!(
        error(&["seven.png", "one.png"]),
        "expected one image file, found `seven.png` and `one.png`"
    );
}

mod images {
    //! Writing test images.

    /// A synthetic digit "0": an elliptic ring, `ink` on `paper`, in a `w x h` canvas, with
    /// its center off-center so that centering has work to do.
    pub fn ring(w: usize, h: usize, ink: f32, paper: f32) -> Vec<f32> {
        let (cx, cy) = (w as f32 * 0.4, h as f32 * 0.55);
        let (rx, ry) = (w as f32 * 0.2, h as f32 * 0.3);
        (0..w * h)
            .map(|i| {
                let (x, y) = ((i % w) as f32 + 0.5, (i / w) as f32 + 0.5);
                let r = ((x - cx) / rx).powi(2) + ((y - cy) / ry).powi(2);
                if (0.55..=1.0).contains(&r) {
                    ink
                } else {
                    paper
                }
            })
            .collect()
    }

    fn byte(v: f32) -> u8 {
        (v * 255.0).round() as u8
    }

    pub fn pgm_p5(w: usize, h: usize, pixels: &[f32]) -> Vec<u8> {
        let mut bytes = format!("P5\n# a comment\n{w} {h}\n255\n").into_bytes();
        bytes.extend(pixels.iter().map(|&v| byte(v)));
        bytes
    }

    pub fn pgm_p5_16(w: usize, h: usize, pixels: &[f32]) -> Vec<u8> {
        let mut bytes = format!("P5 {w} {h} 65535\n").into_bytes();
        for &v in pixels {
            bytes.extend(((v * 65535.0).round() as u16).to_be_bytes());
        }
        bytes
    }

    pub fn pgm_p2(w: usize, h: usize, pixels: &[f32]) -> Vec<u8> {
        let mut text = format!("P2\n{w} {h} # width height\n255\n");
        for row in pixels.chunks(w) {
            let row: Vec<String> = row.iter().map(|&v| byte(v).to_string()).collect();
            text += &row.join(" ");
            text += "\n";
        }
        text.into_bytes()
    }

    /// A PNG of `color` (8-bit unless `sixteen`), each pixel's gray `v` spread over the
    /// channels; with alpha, the ink is opaque black and the paper transparent.
    pub fn png(
        w: usize,
        h: usize,
        pixels: &[f32],
        color: png::ColorType,
        sixteen: bool,
    ) -> Vec<u8> {
        let mut data = Vec::new();
        for &v in pixels {
            let ink = v < 0.5;
            let samples: Vec<f32> = match color {
                png::ColorType::Grayscale => vec![v],
                png::ColorType::Rgb => vec![v, v, v],
                png::ColorType::GrayscaleAlpha => vec![0.0, if ink { 1.0 } else { 0.0 }],
                png::ColorType::Rgba => vec![v, v, v, 1.0],
                png::ColorType::Indexed => unreachable!(),
            };
            for s in samples {
                if sixteen {
                    data.extend(((s * 65535.0).round() as u16).to_be_bytes());
                } else {
                    data.push(byte(s));
                }
            }
        }
        let mut out = Vec::new();
        let mut encoder = png::Encoder::new(&mut out, w as u32, h as u32);
        encoder.set_color(color);
        encoder.set_depth(if sixteen {
            png::BitDepth::Sixteen
        } else {
            png::BitDepth::Eight
        });
        let mut writer = encoder.write_header().unwrap();
        writer.write_image_data(&data).unwrap();
        writer.finish().unwrap();
        out
    }
}

/// The center of mass (x, y) and the extent (columns, rows) of the pixels above 0.
fn mass_and_extent(pixels: &[f32; 784]) -> ((f64, f64), (usize, usize)) {
    let (mut m, mut mx, mut my) = (0.0, 0.0, 0.0);
    let (mut x0, mut y0, mut x1, mut y1) = (28, 28, 0, 0);
    for (i, &v) in pixels.iter().enumerate() {
        let (x, y) = (i % 28, i / 28);
        let v = f64::from(v);
        (m, mx, my) = (m + v, mx + v * x as f64, my + v * y as f64);
        if v > 0.0 {
            (x0, y0, x1, y1) = (x0.min(x), y0.min(y), x1.max(x + 1), y1.max(y + 1));
        }
    }
    ((mx / m, my / m), (x1 - x0, y1 - y0))
}

#[test]
fn every_format_of_one_digit_gives_the_same_mnist_input() {
    let (w, h) = (60, 90);
    // Dark ink on light gray paper, as a scan or a drawing would be.
    let paper = images::ring(w, h, 0.1, 0.85);
    let dir = std::env::temp_dir().join(format!("constmat-embed-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let files: Vec<(&str, Vec<u8>)> = vec![
        ("p5.pgm", images::pgm_p5(w, h, &paper)),
        ("p5-16.pgm", images::pgm_p5_16(w, h, &paper)),
        ("p2.pgm", images::pgm_p2(w, h, &paper)),
        (
            "gray.png",
            images::png(w, h, &paper, png::ColorType::Grayscale, false),
        ),
        (
            "gray16.png",
            images::png(w, h, &paper, png::ColorType::Grayscale, true),
        ),
        (
            "rgb.png",
            images::png(w, h, &paper, png::ColorType::Rgb, false),
        ),
        (
            "rgba.png",
            images::png(w, h, &paper, png::ColorType::Rgba, false),
        ),
        (
            "gray-alpha.png",
            images::png(w, h, &paper, png::ColorType::GrayscaleAlpha, false),
        ),
    ];
    let mut reference: Option<[f32; 784]> = None;
    for (name, bytes) in &files {
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        let image = preprocess::load(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!((image.width, image.height), (w, h), "{name}");
        let prepared = preprocess::to_mnist(&image).unwrap();
        assert!(prepared.inverted, "{name}: dark on light is inverted");

        // MNIST's normalization: white on black, longer side 20 (the ring is taller than
        // wide), center of mass at (14, 14) to within the half pixel of a whole-pixel shift.
        let p = &prepared.pixels;
        let ((cx, cy), (ew, eh)) = mass_and_extent(p);
        assert_eq!(eh, 20, "{name}: height of the digit");
        assert!(ew < 20, "{name}: aspect ratio kept, width {ew}");
        assert!(
            (cx - 14.0).abs() <= 0.5 && (cy - 14.0).abs() <= 0.5,
            "{name}: ({cx}, {cy})"
        );
        assert_eq!(p[0], 0.0, "{name}: black background");
        assert!(
            p.iter().copied().fold(0.0, f32::max) > 0.9,
            "{name}: white ink"
        );

        // The same digit whatever the container: up to rounding to 8 bits (and the
        // gray+alpha file, which holds only ink or no ink, anti-aliased alike).
        match &reference {
            None => reference = Some(*p),
            Some(r) => {
                let worst = r
                    .iter()
                    .zip(p)
                    .map(|(a, b)| (a - b).abs())
                    .fold(0.0, f32::max);
                assert!(worst < 0.02, "{name} differs from p5.pgm by up to {worst}");
            }
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();

    // White on black is not inverted, and gives the same input.
    let light = images::ring(w, h, 0.9, 0.05);
    let image = preprocess::decode(&images::pgm_p5(w, h, &light)).unwrap();
    let prepared = preprocess::to_mnist(&image).unwrap();
    assert!(!prepared.inverted);
    let worst = (reference.unwrap().iter().zip(&prepared.pixels))
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f32::max);
    assert!(worst < 0.02, "white on black differs by up to {worst}");
}

#[test]
fn bad_images_are_errors_not_panics() {
    use preprocess::{ImageError, decode};

    // A file that never ends is read up to a bound, not until memory runs out.
    #[cfg(target_os = "linux")]
    {
        let endless = preprocess::load(Path::new("/dev/zero")).unwrap_err();
        assert!(matches!(endless, ImageError::FileTooLarge), "{endless}");
    }
    let missing = preprocess::load(Path::new("/no/such/digit.png")).unwrap_err();
    assert!(matches!(missing, ImageError::Io(..)), "{missing}");
    assert!(
        missing
            .to_string()
            .starts_with("cannot read /no/such/digit.png: ")
    );

    let cases: &[(&[u8], &str)] = &[
        (b"", "truncated image: the file is empty"),
        (
            b"hello",
            "unsupported image: not a PGM (P2 or P5) or PNG file",
        ),
        (
            b"P6\n2 2\n255\n",
            "unsupported image: a Netpbm P6 file; only grayscale PGM (P2 or P5) is read",
        ),
        (
            b"P5\n2 2\n255\n\x01\x02\x03",
            "truncated image: 2x2 samples of 1 byte(s) need 4 bytes, the file has 3",
        ),
        (
            b"P5\n2 2",
            "truncated image: the PGM file ends before its maximum value",
        ),
        (
            b"P5\n2 2\n255",
            "truncated image: the PGM file ends after its header",
        ),
        (
            b"P2\n2 2\n255\n1 2 3",
            "truncated image: 2x2 samples expected, the file ends after 3",
        ),
        (
            b"P2\n2 1\n7\n1 8",
            "malformed image: sample 1 is 8, above the maximum value 7",
        ),
        (
            b"P2\n2 x\n7\n",
            "malformed image: expected the PGM height, found 'x'",
        ),
        (b"P5 0 3 255\n", "malformed image: the image is 0x3 pixels"),
        (
            b"P5 4 4 0\n",
            "malformed image: the PGM maximum value is 0; it must be 1 to 65535",
        ),
        (
            b"P5 100000 100000 255\n",
            "the image is 100000x100000 pixels; at most 25000000 pixels are read",
        ),
        (
            b"P5 99999999999999999999999 1 255\n",
            "malformed image: the PGM width is too large",
        ),
    ];
    for (bytes, message) in cases {
        let err = decode(bytes).unwrap_err();
        assert_eq!(
            err.to_string(),
            *message,
            "{:?}",
            String::from_utf8_lossy(bytes)
        );
    }

    let uniform = decode(b"P5 3 3 255\n\x80\x80\x80\x80\x80\x80\x80\x80\x80").unwrap();
    assert!(matches!(
        preprocess::to_mnist(&uniform),
        Err(ImageError::Blank)
    ));

    // Every prefix of a PNG and of PGMs: never a panic, and an error unless all the pixels
    // are there (a PNG missing only its end marker reads fine). The exception is a cut inside
    // the last number of an ASCII PGM, which reads as a smaller number: that format has no
    // end marker to tell.
    let ring = images::ring(20, 30, 0.0, 1.0);
    let files = [
        images::png(20, 30, &ring, png::ColorType::Rgb, false),
        images::pgm_p5(20, 30, &ring),
        images::pgm_p2(20, 30, &ring),
    ];
    for file in files {
        let full = decode(&file).unwrap().pixels;
        let last_number = file.len() - 4; // "255\n"
        for len in 0..file.len() {
            let cut = file[..len].to_vec();
            match std::panic::catch_unwind(move || decode(&cut)) {
                Ok(Err(_)) => {}
                Ok(Ok(image)) => assert!(
                    image.pixels == full || (file.starts_with(b"P2") && len > last_number),
                    "a file cut to {len} of {} bytes was read as another image",
                    file.len()
                ),
                Err(_) => panic!("decoding a file cut to {len} bytes panicked"),
            }
        }
    }
}

/// MNIST test digits, enlarged 3x and printed dark on light as PNG files, go through the
/// example's pipeline and come out as MNIST inputs again: the baked net reads them about as
/// well as the originals.
#[cfg(feature = "data")]
#[test]
fn mnist_digits_survive_the_image_pipeline() {
    let Some(test) = mnist_test_split() else {
        return;
    };
    const N: usize = 500;
    let (mut correct, mut correct_originals) = (0, 0);
    for index in 0..N {
        let image = test.image(index);
        let original: [f32; 784] = std::array::from_fn(|i| f32::from(image[i]) / 255.0);
        let label = usize::from(test.label(index));
        correct_originals += usize::from(baked::MNIST.predict(&original) == label);
        let big: Vec<f32> = (0..84 * 84)
            .map(|i| 1.0 - f32::from(image[(i / 84 / 3) * 28 + (i % 84) / 3]) / 255.0)
            .collect();
        let png = images::png(84, 84, &big, png::ColorType::Grayscale, false);
        let prepared = preprocess::to_mnist(&preprocess::decode(&png).unwrap()).unwrap();
        let class = baked::MNIST.predict(&prepared.pixels);
        correct += usize::from(class == label);
    }
    // Normalizing again moves strokes by fractions of a pixel, which may cost a little (when
    // this was written: 492 right, as for the originals).
    assert!(
        correct + N / 50 >= correct_originals,
        "{correct} of {N} right after the pipeline, {correct_originals} before"
    );
}
