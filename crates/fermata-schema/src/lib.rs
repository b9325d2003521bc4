//! Schema snapshots over a MySQL or MariaDB server: how Fermata connects to the source as the
//! snapshot account ([`source`]) and which databases that account can see ([`inventory`]).
//! Every failure leaves this crate as a [`SafeError`](fermata_store::schema::SafeError): driver
//! text, SQL, the password and the address never do.

pub mod inventory;
pub mod source;

pub use inventory::{Discovery, SYSTEM_DATABASES, discover};
pub use source::{SourceSettings, TlsMode};
