// A baked net written out by hand: 8 outputs into a layer of 6 inputs is an error where the
// `static` is declared, not when it is first run.
use constmat::nn::{Chain, Dense, Identity, Inline};

static NET: Chain<Dense<f32, 2, 8, Identity, Inline>, Dense<f32, 6, 1, Identity, Inline>> =
    Chain::new(Dense::new([[0.0; 2]; 8], [0.0; 8]), Dense::new([[0.0; 6]], [0.0]));

fn main() {
    let _ = &NET;
}
