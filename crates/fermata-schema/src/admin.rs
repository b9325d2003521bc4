//! Who may run schema operations: a user with the `system_admin` role, and for the clear action
//! one whose password was entered within the last ten minutes (a fresh session).

use fermata_accounts::Principal;
use fermata_schema_core::{ErrorCode, SafeError};
use fermata_store::{Role, User, UserId};

/// A system administrator the caller authenticated. Only made from an authenticated principal
/// or user that has the role, so holding one is the authorization.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Administrator {
    user: UserId,
    fresh: bool,
}

impl Administrator {
    /// The principal of a request, when it is a system administrator.
    pub fn from_principal(principal: &Principal) -> Result<Self, SafeError> {
        Self::checked(&principal.user, principal.is_fresh())
    }

    /// A user the command line identified. `fresh` says whether the command line has just
    /// checked the user's password.
    pub fn from_user(user: &User, fresh: bool) -> Result<Self, SafeError> {
        Self::checked(user, fresh)
    }

    fn checked(user: &User, fresh: bool) -> Result<Self, SafeError> {
        if user.has_role(Role::SystemAdmin) {
            Ok(Administrator {
                user: user.id.clone(),
                fresh,
            })
        } else {
            Err(SafeError::new(ErrorCode::AccessDenied))
        }
    }

    /// The actor of the operations the schedule requests ([`SCHEDULE_ACTOR`]), never fresh.
    ///
    /// [`SCHEDULE_ACTOR`]: crate::schedule::SCHEDULE_ACTOR
    pub(crate) fn schedule() -> Self {
        Administrator {
            user: UserId(crate::schedule::SCHEDULE_ACTOR.to_owned()),
            fresh: false,
        }
    }

    pub fn user(&self) -> &UserId {
        &self.user
    }

    /// Refused unless the session is fresh.
    pub fn require_fresh(&self) -> Result<(), SafeError> {
        if self.fresh {
            Ok(())
        } else {
            Err(SafeError::new(ErrorCode::AccessDenied))
        }
    }
}
