//! What a conductor vouches for: the attributes it signs into a node's CSR, their
//! canonical string, conductor-side signing, the attribute file formats, the
//! classification, and what makes a set of attributes one-time.

pub mod attrs;
pub mod classification;
pub mod replay_key;
pub mod template;
