//! The tools, one file per engine area. Each is a thin call into the engine (see the server).

mod board;
mod bus;
mod conductor;
