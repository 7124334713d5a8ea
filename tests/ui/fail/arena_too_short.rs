// An arena of 1,024 bytes for a net whose memory plan keeps a 784-value image (3,136 bytes)
// beside its first layer's 128 outputs: `Arena::<{ Net::ARENA_BYTES }>` is the size to write.
use constmat::nn::{Arena, Dense, Parameters, Relu};

type Net = constmat::net![Dense<f32, 784, 128, Relu>, Dense<f32, 128, 10>];

fn main() {
    let net = Net::zeros();
    let mut arena = Arena::<1_024>::new();
    *arena.input(&net) = [0.5; 784];
    let _ = arena.run(&net);
}
