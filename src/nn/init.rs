//! Weight initialization schemes.

/// How a dense layer's weights are drawn. Biases start at zero.
///
/// Both keep the variance of activations roughly constant from layer to layer, for different
/// activations:
///
/// - [`Init::He`] (He et al. 2015), for ReLU: `W ~ N(0, 2 / fan_in)`. ReLU zeroes half its
///   inputs, so the variance is doubled to make up for it.
/// - [`Init::Xavier`] (Glorot & Bengio 2010), for sigmoid, tanh and linear layers:
///   `W ~ U(-√(6 / (fan_in + fan_out)), +√(6 / (fan_in + fan_out)))`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Init {
    /// Normal with standard deviation `√(2 / fan_in)`.
    He,
    /// Uniform on `±√(6 / (fan_in + fan_out))`.
    Xavier,
}

/// Values that can be built with freshly initialized parameters: layers and whole nets.
///
/// ```
/// use constmat::nn::{Dense, RandomInit, Relu, Identity};
/// use rand::{SeedableRng, rngs::StdRng};
///
/// type Net = constmat::net![Dense<f32, 4, 3, Relu>, Dense<f32, 3, 2, Identity>];
/// let a = Net::random(&mut StdRng::seed_from_u64(5));
/// let b = Net::random(&mut StdRng::seed_from_u64(5));
/// assert_eq!(a, b); // the same seed gives the same net
/// ```
#[cfg(feature = "rand")]
pub trait RandomInit: Sized {
    /// Parameters drawn from the caller's `rng` ([`Init`] chosen by each layer's activation).
    fn random<R: rand::Rng + ?Sized>(rng: &mut R) -> Self;
}
