//! Varied training images: an image shifted by a few pixels, as the examples train on.

use constmat::data::mnist::{COLS, ROWS};
use rand::RngExt;
use rand::rngs::StdRng;

/// `image` (`ROWS x COLS` pixels) shifted by up to `max_shift` pixels in each direction
/// (uniformly), each pixel through `pixel`, and `pixel(0)` shifted in: the net sees each
/// object in many places, and learns shapes rather than positions.
#[allow(dead_code)] // mnist_static and the tests include this module too
pub fn shifted(
    image: &[u8],
    max_shift: i32,
    rng: &mut StdRng,
    pixel: impl Fn(u8) -> f32,
    out: &mut [[f32; COLS]; ROWS],
) {
    let range = -max_shift..=max_shift;
    let (dy, dx) = (
        rng.random_range(range.clone()) as isize,
        rng.random_range(range) as isize,
    );
    let background = pixel(0);
    for (r, row) in out.iter_mut().enumerate() {
        for (c, v) in row.iter_mut().enumerate() {
            let (sr, sc) = (r as isize - dy, c as isize - dx);
            *v = if (0..ROWS as isize).contains(&sr) && (0..COLS as isize).contains(&sc) {
                pixel(image[sr as usize * COLS + sc as usize])
            } else {
                background
            };
        }
    }
}
