//! The params and results of the methods (the table in `methods.rs` says which goes with
//! which), one file per noun. Like every wire type, they never deny unknown fields.

mod channel;
mod connection;
mod inbox;
mod moving;
mod rules;
mod search;
mod session;

pub use channel::*;
pub use connection::*;
pub use inbox::*;
pub use moving::*;
pub use rules::*;
pub use search::*;
pub use session::*;
