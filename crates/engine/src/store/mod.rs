//! The storage layer every protocol module stands on: atomic writes, `flock` with a bounded wait,
//! tolerant reading, validated ids, timestamps and safe paths.

pub mod atomic;
pub mod ids;
pub mod layout;
pub mod limits;
pub mod lock;
pub mod paths;
pub mod read;
pub mod safe;
pub mod time;
pub mod yaml;

pub use ids::*;
pub use paths::Root;
