//! What the benchmarks share: a temp kiln with a git history, the figures they print and
//! check, the shipping build they measure and what it is made of, a pseudo-terminal, `/proc` helpers, and the
//! budget accounting they time.

pub mod accounting;
pub mod figures;
pub mod kiln;
pub mod parts;
pub mod process;
pub mod pty;
pub mod ship;
