//! (being written)

/// Handle to the group-commit writer task.
#[derive(Clone)]
pub struct StoreWriter {}
