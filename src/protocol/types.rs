//! The data that crosses the wire: sessions, inbox messages and events (the params and
//! results of the methods are in `params.rs`). Wire types never deny unknown fields; new fields get
//! `#[serde(default)]` so older and newer peers can talk.

mod channel;
mod daemon;
mod event;
mod inbox;
mod search;
mod session;
mod switch;
mod transcript;

pub use channel::*;
pub use daemon::*;
pub use event::*;
pub use inbox::*;
pub use search::*;
pub use session::*;
pub use switch::*;
pub use transcript::*;

#[cfg(test)]
mod tests;
