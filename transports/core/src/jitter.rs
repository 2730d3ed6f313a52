//! Jitter: the randomness that spreads retries, injected so tests see exact delays.
//!
//! Why injected: a backoff that draws from the operating system in a test makes its
//! delays different on every run, and a test that asserts them either flakes or asserts
//! nothing. Every platform client and listener takes a [`Jitter`]; a transport's config
//! chooses it with [`source`] (`fixed_jitter: Some(x)` in tests, the system's otherwise).

/// A source of jitter: numbers uniformly spread over `[0, 1)`.
pub trait Jitter: Send {
    /// The next number in `[0, 1)`.
    fn unit(&mut self) -> f64;
}

/// Jitter from the operating system's random source. A failure of that source gives no
/// jitter at all (0.5), which is still a correct, if less spread, backoff.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemJitter;

impl Jitter for SystemJitter {
    fn unit(&mut self) -> f64 {
        match getrandom::u64() {
            // 53 random bits make every f64 in [0, 1) at that spacing equally likely.
            Ok(bits) => (bits >> 11) as f64 / (1u64 << 53) as f64,
            Err(_) => 0.5,
        }
    }
}

/// Fixed jitter, for tests: every draw returns the same number.
#[derive(Debug, Clone, Copy)]
pub struct FixedJitter(pub f64);

impl Jitter for FixedJitter {
    fn unit(&mut self) -> f64 {
        self.0.clamp(0.0, 1.0 - f64::EPSILON)
    }
}

/// The jitter a transport's config asks for: `Some(x)` draws `x` every time (tests),
/// `None` the system's randomness.
pub fn source(fixed: Option<f64>) -> Box<dyn Jitter> {
    match fixed {
        Some(unit) => Box::new(FixedJitter(unit)),
        None => Box::new(SystemJitter),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_jitter_stays_in_the_unit_interval() {
        let mut jitter = SystemJitter;
        for _ in 0..1_000 {
            let unit = jitter.unit();
            assert!((0.0..1.0).contains(&unit), "{unit}");
        }
    }

    #[test]
    fn a_fixed_source_draws_the_same_number_every_time() {
        let mut fixed = source(Some(0.25));
        assert_eq!([fixed.unit(), fixed.unit()], [0.25, 0.25]);
        // Out of range is clamped into [0, 1): a delay is never negative or doubled.
        assert_eq!(source(Some(-3.0)).unit(), 0.0);
        assert!(source(Some(7.0)).unit() < 1.0);
    }
}
