//! `fermata user`, `fermata token` and `fermata keys`: account administration from the command
//! line, for operators. A password the command generated is printed once; one given on standard
//! input is never printed or logged.

use std::collections::BTreeSet;
use std::io::BufRead;
use std::sync::Arc;

use fermata_accounts::{AccountError, AccountSettings, Accounts, KeyringHandle};
use fermata_crypto::SecretToken;
use fermata_store::{ApiTokenId, Role, Storage};

use crate::config::{KEYS_VAR, KeySource, StorageSettings};
use crate::failure::{Exit, Failure};
use crate::{keys, storage};

impl From<AccountError> for Failure {
    fn from(error: AccountError) -> Self {
        let exit = match error {
            AccountError::Store(_) | AccountError::Crypto(_) => Exit::Runtime,
            _ => Exit::Config,
        };
        Failure::new(error.to_string(), exit).with_source(error)
    }
}

/// Opens the database (with its schema checked and migrated) and the account service.
async fn open(settings: &StorageSettings, keyring: KeyringHandle) -> Result<Accounts, Failure> {
    let store = storage::open(settings).await?;
    storage::prepare_schema(&store, true).await?;
    let storage: Arc<dyn Storage> = Arc::new(store);
    Ok(Accounts::new(
        storage,
        Arc::new(keyring),
        AccountSettings::default(),
    ))
}

/// Account commands that never decrypt anything still need a keyring to build the service; a
/// throwaway one in memory is enough and touches no key file.
async fn open_without_keys(settings: &StorageSettings) -> Result<Accounts, Failure> {
    open(
        settings,
        KeyringHandle::new(fermata_crypto::Keyring::generate(), None),
    )
    .await
}

fn parse_roles(names: &[String]) -> Result<BTreeSet<Role>, Failure> {
    names
        .iter()
        .map(|name| {
            Role::parse(name).ok_or_else(|| {
                let known: Vec<&str> = Role::ALL.iter().map(|r| r.as_str()).collect();
                Failure::config(format!(
                    "unknown role `{name}` (known: {})",
                    known.join(", ")
                ))
            })
        })
        .collect()
}

/// Reads one line from standard input as a password.
pub(crate) fn password_from_stdin() -> Result<SecretToken, Failure> {
    let mut line = zeroize::Zeroizing::new(String::new());
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .map_err(|error| Failure::runtime(format!("cannot read standard input: {error}")))?;
    let password = line.trim_end_matches(['\r', '\n']);
    if password.is_empty() {
        return Err(Failure::config("no password on standard input"));
    }
    Ok(SecretToken::from_given(password))
}

fn roles_text(roles: &BTreeSet<Role>) -> String {
    if roles.is_empty() {
        "no roles".to_owned()
    } else {
        roles
            .iter()
            .map(|r| r.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

pub(crate) async fn user_add(
    settings: &StorageSettings,
    name: &str,
    roles: &[String],
    password_stdin: bool,
) -> Result<String, Failure> {
    let roles = parse_roles(roles)?;
    let password = password_stdin.then(password_from_stdin).transpose()?;
    let accounts = open_without_keys(settings).await?;
    let (user, generated) = accounts.add_user(name, password, roles).await?;
    let mut out = format!("created user {} ({})\n", user.name, roles_text(&user.roles));
    if let Some(password) = generated {
        out.push_str(&format!("password (shown once): {}\n", password.expose()));
    }
    Ok(out)
}

pub(crate) async fn user_passwd(
    settings: &StorageSettings,
    name: &str,
    password_stdin: bool,
) -> Result<String, Failure> {
    let given = password_stdin.then(password_from_stdin).transpose()?;
    let accounts = open_without_keys(settings).await?;
    let (password, generated) = match given {
        Some(password) => (password, false),
        None => (SecretToken::generate(""), true),
    };
    let user = accounts.set_password(name, password.clone()).await?;
    let mut out = format!(
        "changed the password of {}; their browser sessions have ended\n",
        user.name
    );
    if generated {
        out.push_str(&format!("password (shown once): {}\n", password.expose()));
    }
    Ok(out)
}

pub(crate) async fn user_role(
    settings: &StorageSettings,
    name: &str,
    add: &[String],
    remove: &[String],
) -> Result<String, Failure> {
    let add: Vec<Role> = parse_roles(add)?.into_iter().collect();
    let remove: Vec<Role> = parse_roles(remove)?.into_iter().collect();
    if add.is_empty() && remove.is_empty() {
        return Err(Failure::config("give --add ROLE or --remove ROLE"));
    }
    let accounts = open_without_keys(settings).await?;
    let user = accounts.change_roles(name, &add, &remove).await?;
    Ok(format!("{}: {}\n", user.name, roles_text(&user.roles)))
}

pub(crate) async fn user_list(settings: &StorageSettings) -> Result<String, Failure> {
    let accounts = open_without_keys(settings).await?;
    let mut out = String::new();
    for user in accounts.users().await? {
        out.push_str(&format!(
            "{}\t{}\tcreated {}\n",
            user.name,
            roles_text(&user.roles),
            user.created_at
        ));
    }
    Ok(out)
}

/// Creates an API token; `issuing` gives it the `tokens` scope.
pub(crate) async fn token_create(
    settings: &StorageSettings,
    user: &str,
    label: &str,
    issuing: bool,
) -> Result<String, Failure> {
    let accounts = open_without_keys(settings).await?;
    let user = accounts.user_named(user).await?;
    let scope = if issuing {
        fermata_accounts::TokenScope::Issuing
    } else {
        fermata_accounts::TokenScope::Standard
    };
    let (token, secret) = accounts
        .create_scoped_api_token(&user, label, scope)
        .await?;
    eprintln!(
        "created API token {} for {} ({}); it is shown once, below; send it as `Authorization: Bearer TOKEN`",
        token.id, user.name, token.label
    );
    Ok(format!("{}\n", secret.expose()))
}

pub(crate) async fn token_list(settings: &StorageSettings, user: &str) -> Result<String, Failure> {
    let accounts = open_without_keys(settings).await?;
    let user = accounts.user_named(user).await?;
    let mut out = String::new();
    for token in accounts.api_tokens(&user.id).await? {
        let state = match (token.revoked_at, token.last_used_at) {
            (Some(at), _) => format!("revoked {at}"),
            (None, Some(at)) => format!("last used {at}"),
            (None, None) => "never used".to_owned(),
        };
        out.push_str(&format!(
            "{}\t{}\tcreated {}\t{state}\n",
            token.id, token.label, token.created_at
        ));
    }
    Ok(out)
}

pub(crate) async fn token_revoke(settings: &StorageSettings, id: &str) -> Result<String, Failure> {
    let accounts = open_without_keys(settings).await?;
    accounts
        .revoke_api_token(None, &ApiTokenId(id.to_owned()))
        .await?;
    Ok(format!("revoked API token {id}\n"))
}

/// Adds a key version to the key file, then re-seals every stored credential under it.
pub(crate) async fn keys_rotate(
    settings: &StorageSettings,
    source: &KeySource,
) -> Result<String, Failure> {
    let KeySource::File { path, .. } = source else {
        return Err(Failure::config(format!(
            "the keys come from {KEYS_VAR}: add a new VERSION:KEY entry there (32 random bytes in \
             base64), restart the server, then run `fermata keys reencrypt`"
        )));
    };
    let mut keyring = keys::load(source)?;
    let version = keyring.rotate();
    keys::save(path, &keyring)?;
    let accounts = open(settings, KeyringHandle::new(keyring, None)).await?;
    let report = accounts.reencrypt_all().await?;
    Ok(format!(
        "added key version {version} to {}\nre-encrypted {} session and {} machine credentials \
         ({} already current, {} could not be decrypted and were left as they are)\n\
         running servers seal with the new version once they read the file again (they do on \
         their next credential write); keep the old versions in the file until then\n",
        path.display(),
        report.sessions,
        report.machines,
        report.current,
        report.undecryptable
    ))
}

/// Re-seals every stored credential under the current key version.
pub(crate) async fn keys_reencrypt(
    settings: &StorageSettings,
    source: &KeySource,
) -> Result<String, Failure> {
    let keyring = keys::handle(source)?;
    let version = keyring.keyring().current_version();
    let accounts = open(settings, keyring).await?;
    let report = accounts.reencrypt_all().await?;
    Ok(format!(
        "re-encrypted {} session and {} machine credentials under key version {version} \
         ({} already current, {} could not be decrypted and were left as they are)\n",
        report.sessions, report.machines, report.current, report.undecryptable
    ))
}
