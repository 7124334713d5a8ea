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

#[cfg(feature = "rand")]
impl Init {
    /// Fills `weights` with values drawn for a layer with `fan_in` inputs and `fan_out` outputs
    /// per weight (for a dense layer, its input and output widths; for a convolution, times the
    /// kernel's area), in order, from `rng`.
    ///
    /// ```
    /// use constmat::nn::Init;
    /// use rand::{SeedableRng, rngs::StdRng};
    ///
    /// let mut w = [0.0_f64; 1000];
    /// Init::Xavier.fill(&mut w, 30, 20, &mut StdRng::seed_from_u64(1));
    /// let limit = (6.0_f64 / 50.0).sqrt();
    /// assert!(w.iter().all(|x| x.abs() <= limit) && w.iter().any(|x| x.abs() > limit / 2.0));
    /// ```
    pub fn fill<T: num_traits::Float, R: rand::Rng + ?Sized>(
        self,
        weights: &mut [T],
        fan_in: usize,
        fan_out: usize,
        rng: &mut R,
    ) {
        use num_traits::Float;
        use rand::distr::{Distribution, Uniform};
        let to_t =
            |x: f64| T::from(x).expect("every float type holds an f64 weight, perhaps rounded");
        let (fan_in, fan_out) = (fan_in as f64, fan_out as f64);
        match self {
            Init::He => {
                let normal = rand_distr::Normal::new(0.0, Float::sqrt(2.0 / fan_in))
                    .expect("a finite, positive standard deviation");
                weights
                    .iter_mut()
                    .for_each(|w| *w = to_t(normal.sample(rng)));
            }
            Init::Xavier => {
                let limit = Float::sqrt(6.0 / (fan_in + fan_out));
                let uniform = Uniform::new_inclusive(-limit, limit).expect("a finite range");
                weights
                    .iter_mut()
                    .for_each(|w| *w = to_t(uniform.sample(rng)));
            }
        }
    }
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
