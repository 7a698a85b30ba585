//! The daemon's answers to the methods of the table ([`methods`]), by noun: each row of
//! the table is answered by an `impl Answer<Row> for Call` in the file of its noun, and
//! the table's dispatch needs every one of them (a row without its answer does not
//! compile). What decides whether a call is answered at all (access, a handle's scope,
//! which daemon answers in team mode) is in `dispatch`.

mod context;
mod cron;
mod daemon;
mod inbox;
mod land;
mod rules;
mod session;
mod web;

use super::call::{Call, agent_door, forbidden};
use crate::protocol::check::Check;
use crate::protocol::methods::{self as m, Answer, *};
use crate::protocol::*;
