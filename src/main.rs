//! `cru`, the program: everything it does is the library's; what is here is only what the
//! binary itself must define.

use std::process::ExitCode;

fn main() -> ExitCode {
    crucible::cli::main()
}

/// The database's geometry code calls `hypot`, and glibc 2.35 gave `hypot` a new symbol
/// version: linked against it, that one call would make `cru` refuse to start on glibc
/// 2.34 (RHEL 9). Defined here, in the program itself, those calls bind to this copy and
/// the binary needs no newer glibc than its other symbols do. Scaled by the larger side,
/// so it neither overflows nor underflows where the true result does not.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[unsafe(no_mangle)]
pub extern "C" fn hypot(x: f64, y: f64) -> f64 {
    let (x, y) = (x.abs(), y.abs());
    if x.is_infinite() || y.is_infinite() {
        return f64::INFINITY;
    }
    let (big, small) = if x >= y { (x, y) } else { (y, x) };
    // Both zero, or a NaN: the sum is the answer (0, or NaN).
    if big == 0.0 || small.is_nan() || big.is_nan() {
        return big + small;
    }
    let ratio = small / big;
    big * ratio.mul_add(ratio, 1.0).sqrt()
}
