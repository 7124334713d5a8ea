//! From an image file to the 28x28 input of the MNIST net: decoding PGM and PNG, and the
//! normalization MNIST's digits went through.
//!
//! MNIST's digits were size-normalized to fit a 20x20 box (preserving their aspect ratio, with
//! anti-aliasing), then placed in a 28x28 field so that their center of mass is at the center
//! (pixel (14, 14), counting from 0; measured on the test set: 13.99, 14.00). They are white on
//! black. [`to_mnist`] does the same to any image:
//!
//! 1. **Polarity.** If the border of the image (its outermost rows and columns) is mostly
//!    bright, the image is dark-on-light (ink on paper) and is inverted.
//! 2. **Contrast.** The background level (the median of the border) becomes 0 and the brightest
//!    pixel 1, so that gray paper or faint ink look like MNIST's black and white. An image
//!    whose brightest pixel is barely above its background holds no digit (an error).
//! 3. **Box.** The digit is the bounding box of the pixels above 5% after step 2.
//! 4. **Size.** The box is resampled so that its longer side is 20 pixels, preserving the
//!    aspect ratio, by area averaging: each output pixel is the mean of the input area it
//!    covers, which anti-aliases when shrinking (as MNIST's normalization did).
//! 5. **Centering.** The result is placed in the 28x28 field with its center of mass at
//!    (14, 14), rounded to whole pixels (MNIST's shifts were whole pixels too).
//!
//! Decoding never panics: a missing file, an unsupported format, a truncated or malformed file
//! and an image without a digit are each an [`ImageError`].

use std::fmt;
use std::io::Cursor;
use std::path::{Path, PathBuf};

/// Images larger than this many pixels are refused rather than decoded (a 25-megapixel photo
/// fits; a corrupt header claiming billions of pixels does not allocate).
pub const MAX_PIXELS: usize = 25_000_000;
/// The most bytes of a file read: a text PGM of [`MAX_PIXELS`] 16-bit pixels, `65535 ` each.
pub const MAX_FILE_BYTES: u64 = 6 * MAX_PIXELS as u64 + 1024;

/// The side of the box a digit is scaled to fit, and of the field it is centered in.
pub const BOX: usize = 20;
/// The side of MNIST's images.
pub const SIDE: usize = 28;
/// Where MNIST puts a digit's center of mass (row and column, counting from 0).
pub const CENTER: f64 = 14.0;
/// Pixels above this (after the contrast step) belong to the digit's bounding box.
pub const INK: f32 = 0.05;
/// An image whose brightest pixel is less than this above its background holds no digit.
pub const MIN_CONTRAST: f32 = 0.1;

/// A grayscale image: `pixels[y * width + x]` in [0, 1], 0 black, 1 white.
#[derive(Debug, Clone, PartialEq)]
pub struct Gray {
    /// Columns.
    pub width: usize,
    /// Rows.
    pub height: usize,
    /// Row-major intensities in [0, 1].
    pub pixels: Vec<f32>,
    /// What the file was, for messages: `"PNG, RGBA 8-bit"`, `"PGM (P5), maxval 255"`.
    pub format: String,
}

/// Why an image could not be turned into an MNIST input.
#[derive(Debug)]
pub enum ImageError {
    /// The file could not be read.
    Io(PathBuf, std::io::Error),
    /// Neither PGM (P2, P5) nor PNG; or a PGM/PNG variant this program does not read.
    Unsupported(String),
    /// The file ends before its image does.
    Truncated(String),
    /// The file is damaged or not what its header says.
    Malformed(String),
    /// A file of more than [`MAX_FILE_BYTES`] bytes (or one that does not end).
    FileTooLarge,
    /// More than [`MAX_PIXELS`] pixels.
    TooLarge {
        /// Columns, as the header says.
        width: u64,
        /// Rows, as the header says.
        height: u64,
    },
    /// The image is uniform: no digit to classify.
    Blank,
}

impl fmt::Display for ImageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Io(path, e) => write!(f, "cannot read {}: {e}", path.display()),
            Self::Unsupported(what) => write!(f, "unsupported image: {what}"),
            Self::Truncated(what) => write!(f, "truncated image: {what}"),
            Self::Malformed(what) => write!(f, "malformed image: {what}"),
            Self::FileTooLarge => write!(
                f,
                "the file is larger than {MAX_FILE_BYTES} bytes, more than an image of at most \
                 {MAX_PIXELS} pixels takes"
            ),
            Self::TooLarge { width, height } => write!(
                f,
                "the image is {width}x{height} pixels; at most {MAX_PIXELS} pixels are read"
            ),
            Self::Blank => write!(
                f,
                "the image is blank: no pixel stands out from the background, so there is no \
                 digit to classify"
            ),
        }
    }
}

impl std::error::Error for ImageError {}

/// Reads the image at `path` (PGM or PNG, told apart by their first bytes).
///
/// # Errors
///
/// [`ImageError::Io`] when the file cannot be read, else as [`decode`].
pub fn load(path: &Path) -> Result<Gray, ImageError> {
    use std::io::Read as _;
    let io = |e| ImageError::Io(path.to_owned(), e);
    // At most one byte past the bound: a device such as /dev/zero never ends.
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes))
        .map_err(io)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(ImageError::FileTooLarge);
    }
    decode(&bytes)
}

/// Decodes a PGM (`P2` or `P5`) or PNG image.
///
/// # Errors
///
/// An [`ImageError`] saying what is wrong with the bytes.
pub fn decode(bytes: &[u8]) -> Result<Gray, ImageError> {
    if bytes.starts_with(b"\x89PNG") {
        decode_png(bytes)
    } else if bytes.starts_with(b"P2") || bytes.starts_with(b"P5") {
        decode_pgm(bytes)
    } else if bytes.len() >= 2 && bytes[0] == b'P' && (b'1'..=b'7').contains(&bytes[1]) {
        Err(ImageError::Unsupported(format!(
            "a Netpbm P{} file; only grayscale PGM (P2 or P5) is read",
            char::from(bytes[1])
        )))
    } else if bytes.is_empty() {
        Err(ImageError::Truncated("the file is empty".into()))
    } else {
        Err(ImageError::Unsupported(
            "not a PGM (P2 or P5) or PNG file".into(),
        ))
    }
}

/// Checks that a `width x height` image is not empty and not larger than [`MAX_PIXELS`].
fn check_size(width: u64, height: u64) -> Result<usize, ImageError> {
    if width == 0 || height == 0 {
        return Err(ImageError::Malformed(format!(
            "the image is {width}x{height} pixels"
        )));
    }
    match width.checked_mul(height) {
        Some(n) if n <= MAX_PIXELS as u64 => Ok(n as usize),
        _ => Err(ImageError::TooLarge { width, height }),
    }
}

/// A Netpbm header reader: tokens separated by whitespace, `#` comments to the end of a line.
struct Tokens<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Tokens<'a> {
    /// Skips whitespace and comments.
    fn skip(&mut self) {
        while let Some(&b) = self.bytes.get(self.at) {
            if b == b'#' {
                while self.bytes.get(self.at).is_some_and(|&b| b != b'\n') {
                    self.at += 1;
                }
            } else if b.is_ascii_whitespace() {
                self.at += 1;
            } else {
                break;
            }
        }
    }

    /// The next unsigned decimal number; `what` names it in messages.
    fn number(&mut self, what: &str) -> Result<u64, ImageError> {
        self.skip();
        let start = self.at;
        while self.bytes.get(self.at).is_some_and(u8::is_ascii_digit) {
            self.at += 1;
        }
        if start == self.at {
            return Err(match self.bytes.get(self.at) {
                None => ImageError::Truncated(format!("the PGM file ends before its {what}")),
                Some(&b) => ImageError::Malformed(format!(
                    "expected the PGM {what}, found {:?}",
                    char::from(b)
                )),
            });
        }
        std::str::from_utf8(&self.bytes[start..self.at])
            .expect("ASCII digits")
            .parse()
            .map_err(|_| ImageError::Malformed(format!("the PGM {what} is too large")))
    }
}

/// Decodes a PGM image: `P2` (ASCII samples) or `P5` (binary, one byte per sample when the
/// maximum value is below 256, else two, big-endian).
///
/// # Errors
///
/// [`ImageError::Truncated`] when samples are missing, [`ImageError::Malformed`] for a bad
/// header or a sample above the maximum value.
pub fn decode_pgm(bytes: &[u8]) -> Result<Gray, ImageError> {
    let binary = bytes.starts_with(b"P5");
    let mut tokens = Tokens { bytes, at: 2 };
    let width = tokens.number("width")?;
    let height = tokens.number("height")?;
    let maxval = tokens.number("maximum value")?;
    if !(1..=65535).contains(&maxval) {
        return Err(ImageError::Malformed(format!(
            "the PGM maximum value is {maxval}; it must be 1 to 65535"
        )));
    }
    let count = check_size(width, height)?;
    let scale = 1.0 / maxval as f32;
    let mut pixels = Vec::with_capacity(count);
    if binary {
        // Exactly one whitespace byte separates the header from the samples.
        match bytes.get(tokens.at) {
            Some(b) if b.is_ascii_whitespace() => {}
            Some(&b) => {
                return Err(ImageError::Malformed(format!(
                    "the PGM header must end with one whitespace byte, found byte {b:#04x}"
                )));
            }
            None => {
                return Err(ImageError::Truncated(
                    "the PGM file ends after its header".into(),
                ));
            }
        }
        let raster = &bytes[tokens.at + 1..];
        let sample_size = if maxval < 256 { 1 } else { 2 };
        if raster.len() < count * sample_size {
            return Err(ImageError::Truncated(format!(
                "{width}x{height} samples of {sample_size} byte(s) need {} bytes, the file has {}",
                count * sample_size,
                raster.len()
            )));
        }
        for sample in raster.chunks_exact(sample_size).take(count) {
            let v = if sample_size == 1 {
                u64::from(sample[0])
            } else {
                u64::from(u16::from_be_bytes([sample[0], sample[1]]))
            };
            if v > maxval {
                return Err(ImageError::Malformed(format!(
                    "a sample is {v}, above the maximum value {maxval}"
                )));
            }
            pixels.push(v as f32 * scale);
        }
    } else {
        for k in 0..count {
            let v = tokens.number("samples").map_err(|e| match e {
                ImageError::Truncated(_) => ImageError::Truncated(format!(
                    "{width}x{height} samples expected, the file ends after {k}"
                )),
                other => other,
            })?;
            if v > maxval {
                return Err(ImageError::Malformed(format!(
                    "sample {k} is {v}, above the maximum value {maxval}"
                )));
            }
            pixels.push(v as f32 * scale);
        }
    }
    Ok(Gray {
        width: width as usize,
        height: height as usize,
        pixels,
        format: format!(
            "PGM (P{}), maximum value {maxval}",
            if binary { 5 } else { 2 }
        ),
    })
}

/// Decodes a PNG image of any color type and bit depth (palettes and low bit depths expanded,
/// 16-bit reduced to 8), converted to gray: color by luma (`0.299 R + 0.587 G + 0.114 B`),
/// transparency by compositing over white (as a viewer shows it).
///
/// # Errors
///
/// [`ImageError::Truncated`] when the data ends early, [`ImageError::Malformed`] for anything
/// else the decoder rejects, [`ImageError::TooLarge`] above [`MAX_PIXELS`].
pub fn decode_png(bytes: &[u8]) -> Result<Gray, ImageError> {
    let png_error = |e: png::DecodingError| match e {
        png::DecodingError::IoError(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
            ImageError::Truncated("the PNG data ends early".into())
        }
        png::DecodingError::LimitsExceeded => {
            ImageError::Malformed("the PNG needs more memory than allowed".into())
        }
        other => ImageError::Malformed(format!("PNG: {other}")),
    };
    let mut decoder = png::Decoder::new(Cursor::new(bytes));
    decoder.set_transformations(png::Transformations::EXPAND | png::Transformations::STRIP_16);
    let mut reader = decoder.read_info().map_err(png_error)?;
    let (width, height) = {
        let info = reader.info();
        (u64::from(info.width), u64::from(info.height))
    };
    let count = check_size(width, height)?;
    let size = reader
        .output_buffer_size()
        .ok_or(ImageError::TooLarge { width, height })?;
    let mut buffer = vec![0; size];
    let frame = reader.next_frame(&mut buffer).map_err(png_error)?;
    if frame.bit_depth != png::BitDepth::Eight {
        return Err(ImageError::Unsupported(format!(
            "a PNG with {:?}-bit samples after expansion",
            frame.bit_depth
        )));
    }
    let channels = frame.color_type.samples();
    let mut pixels = Vec::with_capacity(count);
    for row in buffer
        .chunks_exact(frame.line_size)
        .take(frame.height as usize)
    {
        for px in row[..frame.width as usize * channels].chunks_exact(channels) {
            let v = |i: usize| f32::from(px[i]) / 255.0;
            let (luma, alpha) = match frame.color_type {
                png::ColorType::Grayscale => (v(0), 1.0),
                png::ColorType::GrayscaleAlpha => (v(0), v(1)),
                png::ColorType::Rgb => (0.299 * v(0) + 0.587 * v(1) + 0.114 * v(2), 1.0),
                png::ColorType::Rgba => (0.299 * v(0) + 0.587 * v(1) + 0.114 * v(2), v(3)),
                png::ColorType::Indexed => {
                    return Err(ImageError::Unsupported(
                        "a palette PNG that was not expanded".into(),
                    ));
                }
            };
            // Over a white background.
            pixels.push(luma * alpha + (1.0 - alpha));
        }
    }
    Ok(Gray {
        width: frame.width as usize,
        height: frame.height as usize,
        pixels,
        format: format!("PNG, {:?} 8-bit", frame.color_type),
    })
}

/// An image made into an MNIST input, with what was done to it.
#[derive(Debug, Clone, PartialEq)]
pub struct Prepared {
    /// 28x28, row-major, white digit on black, in [0, 1]: the net's input.
    pub pixels: [f32; SIDE * SIDE],
    /// Whether the image was inverted (it was dark on light).
    pub inverted: bool,
    /// The digit's bounding box in the original image: `(x, y, width, height)`.
    pub bounding_box: (usize, usize, usize, usize),
    /// The factor the box was scaled by.
    pub scale: f64,
}

/// Normalizes an image the way MNIST's digits were (see the module documentation).
///
/// # Errors
///
/// [`ImageError::Blank`] when no pixel stands out from the background.
pub fn to_mnist(image: &Gray) -> Result<Prepared, ImageError> {
    let (w, h) = (image.width, image.height);
    // 1. Polarity, from the border: MNIST is white on black.
    let mut border: Vec<f32> = (0..w * h)
        .filter(|i| {
            let (x, y) = (i % w, i / w);
            x == 0 || y == 0 || x == w - 1 || y == h - 1
        })
        .map(|i| image.pixels[i])
        .collect();
    let inverted = border.iter().sum::<f32>() / border.len() as f32 > 0.5;
    let polarity = |v: f32| if inverted { 1.0 - v } else { v };

    // 2. Contrast: background (the median of the border) to 0, the brightest pixel to 1.
    border.iter_mut().for_each(|v| *v = polarity(*v));
    border.sort_by(f32::total_cmp);
    let background = border[border.len() / 2];
    let brightest = image
        .pixels
        .iter()
        .map(|&v| polarity(v))
        .fold(0.0, f32::max);
    if brightest - background < MIN_CONTRAST {
        return Err(ImageError::Blank);
    }
    let span = brightest - background;
    let ink: Vec<f32> = image
        .pixels
        .iter()
        .map(|&v| ((polarity(v) - background) / span).clamp(0.0, 1.0))
        .collect();

    // 3. The digit's bounding box.
    let (mut x0, mut y0, mut x1, mut y1) = (w, h, 0, 0);
    for (i, _) in ink.iter().enumerate().filter(|&(_, &v)| v > INK) {
        let (x, y) = (i % w, i / w);
        (x0, y0, x1, y1) = (x0.min(x), y0.min(y), x1.max(x + 1), y1.max(y + 1));
    }
    let (bw, bh) = (x1 - x0, y1 - y0);

    // 4. Longer side to 20 pixels, aspect ratio kept, by area averaging.
    let scale = BOX as f64 / bw.max(bh) as f64;
    let out_w = ((bw as f64 * scale).round() as usize).clamp(1, BOX);
    let out_h = ((bh as f64 * scale).round() as usize).clamp(1, BOX);
    let boxed = resample(&ink, w, (x0, y0, bw, bh), (out_w, out_h));

    // 5. Center of mass to (14, 14) in the 28x28 field, in whole pixels.
    let mass: f64 = boxed.iter().map(|&v| f64::from(v)).sum();
    let moment = |coordinate: fn(usize, usize) -> usize| {
        boxed
            .iter()
            .enumerate()
            .map(|(i, &v)| coordinate(i % out_w, i / out_w) as f64 * f64::from(v))
            .sum::<f64>()
            / mass
    };
    let (cx, cy) = (moment(|x, _| x), moment(|_, y| y));
    let dx = (CENTER - cx).round() as isize;
    let dy = (CENTER - cy).round() as isize;
    let mut pixels = [0.0; SIDE * SIDE];
    for (i, &v) in boxed.iter().enumerate() {
        let x = (i % out_w) as isize + dx;
        let y = (i / out_w) as isize + dy;
        // A digit whose mass is far from its box's center can be pushed past the field's
        // edge; what falls outside is lost, as it was for MNIST.
        if (0..SIDE as isize).contains(&x) && (0..SIDE as isize).contains(&y) {
            pixels[y as usize * SIDE + x as usize] = v;
        }
    }
    Ok(Prepared {
        pixels,
        inverted,
        bounding_box: (x0, y0, bw, bh),
        scale,
    })
}

/// Resamples the `(x, y, width, height)` region of a `stride`-wide image to `size`, each output
/// pixel the mean of the area of the region it covers (exact, separable: rows, then columns).
fn resample(
    pixels: &[f32],
    stride: usize,
    (x0, y0, w, h): (usize, usize, usize, usize),
    (out_w, out_h): (usize, usize),
) -> Vec<f32> {
    // The weights of 1-D area averaging from `n` cells onto `m`: output cell j covers
    // [j * n / m, (j + 1) * n / m) of the input.
    let weights = |n: usize, m: usize| -> Vec<Vec<(usize, f64)>> {
        let step = n as f64 / m as f64;
        (0..m)
            .map(|j| {
                let (a, b) = (j as f64 * step, (j + 1) as f64 * step);
                (a.floor() as usize..(b.ceil() as usize).min(n))
                    .map(|i| {
                        let overlap = (b.min(i as f64 + 1.0) - a.max(i as f64)).max(0.0);
                        (i, overlap / step)
                    })
                    .filter(|&(_, weight)| weight > 0.0)
                    .collect()
            })
            .collect()
    };
    let (wx, wy) = (weights(w, out_w), weights(h, out_h));
    // Rows first: h rows of out_w.
    let mut rows = vec![0.0_f64; h * out_w];
    for y in 0..h {
        let source = &pixels[(y0 + y) * stride + x0..][..w];
        for (j, taps) in wx.iter().enumerate() {
            rows[y * out_w + j] = taps.iter().map(|&(i, t)| f64::from(source[i]) * t).sum();
        }
    }
    // Then columns.
    let mut out = vec![0.0_f32; out_h * out_w];
    for (j, taps) in wy.iter().enumerate() {
        for x in 0..out_w {
            let v: f64 = taps.iter().map(|&(i, t)| rows[i * out_w + x] * t).sum();
            out[j * out_w + x] = v as f32;
        }
    }
    out
}

/// The 28x28 input as terminal art, two characters per pixel (about square in a terminal).
pub fn terminal_art(pixels: &[f32; SIDE * SIDE]) -> String {
    const RAMP: &[u8] = b" .:-=+*#%@";
    let mut art = String::with_capacity(SIDE * (2 * SIDE + 3));
    for row in pixels.chunks_exact(SIDE) {
        art.push('|');
        for &v in row {
            let level = (v.clamp(0.0, 1.0) * (RAMP.len() - 1) as f32).round() as usize;
            let c = char::from(RAMP[level]);
            art.push(c);
            art.push(c);
        }
        art.push_str("|\n");
    }
    art
}
