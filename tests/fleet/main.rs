//! A thousand sessions on one daemon, in a test binary of its own: cargo runs test
//! binaries one after another, so its thousand agents and worktrees do not slow the
//! integration tests that wait on deadlines.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test equipment: a failure here should stop the run
#![allow(clippy::too_many_lines)] // a scenario reads as one story, start to end

mod thousand;
