//! What the benchmarks share: a temp kiln with a git history, the figures they print and
//! check, the shipping build they measure, a pseudo-terminal, `/proc` helpers, and the
//! budget accounting they time.

pub mod accounting;
pub mod figures;
pub mod kiln;
pub mod process;
pub mod pty;
pub mod ship;
