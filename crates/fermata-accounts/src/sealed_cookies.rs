//! Values a browser keeps for the server, sealed by the keyring so that the browser can neither
//! read nor forge them: the known-device mark a successful login leaves (which lets the account's
//! owner past a login lock), and a new secret kept until the page that shows it once is read.
//!
//! Each is bound to its row (the user, the session) as authenticated data, so a value moved to
//! another account or session does not open.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use fermata_crypto::{Aad, Purpose, SecretToken};
use fermata_store::{SessionId, User};
use zeroize::Zeroizing;

use crate::Accounts;

/// The prefix of a device ID inside its mark.
const DEVICE_PREFIX: &str = "fmtd_";

impl Accounts {
    /// A new known-device mark for `user`'s browser.
    pub fn device_mark(&self, user: &User) -> String {
        let device = SecretToken::generate(DEVICE_PREFIX);
        let sealed = self.keys.seal(
            Aad {
                purpose: Purpose::KnownDevice,
                row: &user.id.0,
            },
            device.expose().as_bytes(),
        );
        URL_SAFE_NO_PAD.encode(sealed)
    }

    /// The device ID inside `mark` when it is `user`'s.
    pub(crate) fn known_device(&self, user: &User, mark: &str) -> Option<String> {
        let sealed = URL_SAFE_NO_PAD.decode(mark).ok()?;
        let opened = self
            .keys
            .open(
                Aad {
                    purpose: Purpose::KnownDevice,
                    row: &user.id.0,
                },
                &sealed,
            )
            .ok()?;
        String::from_utf8(opened.to_vec())
            .ok()
            .filter(|device| device.starts_with(DEVICE_PREFIX))
    }

    /// `secret`, sealed for `session` alone.
    pub fn seal_shown_once(&self, session: &SessionId, secret: &str) -> String {
        URL_SAFE_NO_PAD.encode(self.keys.seal(
            Aad {
                purpose: Purpose::ShownOnce,
                row: &session.0,
            },
            secret.as_bytes(),
        ))
    }

    /// What [`Self::seal_shown_once`] sealed for `session`, or nothing.
    pub fn open_shown_once(&self, session: &SessionId, sealed: &str) -> Option<Zeroizing<String>> {
        let bytes = URL_SAFE_NO_PAD.decode(sealed).ok()?;
        let opened = self
            .keys
            .open(
                Aad {
                    purpose: Purpose::ShownOnce,
                    row: &session.0,
                },
                &bytes,
            )
            .ok()?;
        String::from_utf8(opened.to_vec()).ok().map(Zeroizing::new)
    }
}
