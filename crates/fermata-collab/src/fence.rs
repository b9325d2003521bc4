//! The writer fence this process holds, shared by every part that writes documents. It lives in
//! the storage port, which gates every write on it; see [`fermata_store::writer_fence`].

pub use fermata_store::WriterFence;
