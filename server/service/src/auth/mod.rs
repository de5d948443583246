//! Who is calling, and what they may do.
//!
//! The auth layer ([`AuthLayer`]) sits in front of every service. It reads the
//! `authorization: Bearer <key>` metadata, verifies the key ([`KeyVerifier`], the key table in
//! `keys`), checks the scope the method needs ([`MethodTable`]) and puts the caller's
//! [`Principal`] into the request's extensions, where handlers find their tenant
//! ([`principal`]). A call without a valid key is `UNAUTHENTICATED`, one whose key lacks the
//! scope `PERMISSION_DENIED`, both with `ErrorInfo` (`error::access_status`). With
//! `auth.mode = "none"` every call is tenant `default` with every scope.
//!
//! Scopes are `<service>:<access>`: the service is `conversation`, `triage`, `investigation`,
//! `research` or `workflow` (or `*` for all), the access `read`, `write` or `admin`, each
//! including the ones before it.

use std::{
    collections::{HashMap, HashSet},
    fmt,
    future::Future,
    pin::Pin,
    str::FromStr,
    sync::Arc,
    task::{Context, Poll},
};

use async_trait::async_trait;
use frontdesk_workflows::Tenant;
use tonic::{body::Body, Status};
use tower::{Layer, Service};

use crate::error::{access_status, AccessError};

pub mod keys;

/// What a method does to a service's data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Access {
    /// Reads: gets, lists, watches.
    Read,
    /// Starts and advances runs.
    Write,
    /// Erases data.
    Admin,
}

impl Access {
    pub fn as_str(self) -> &'static str {
        match self {
            Access::Read => "read",
            Access::Write => "write",
            Access::Admin => "admin",
        }
    }
}

/// One scope: a service (or every service) and the most it allows there.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Scope {
    /// `None` for `*`.
    pub service: Option<String>,
    pub access: Access,
}

/// The scopes an API key carries.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scopes(Vec<Scope>);

/// The services scopes name, as `ServiceAccess::scope` spells them.
pub const SCOPE_SERVICES: &[&str] = &["conversation", "triage", "investigation", "research", "workflow"];

/// A scope list that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("scope {0:?} must be <service>:<access>, the service one of conversation, triage, investigation, research, workflow or *, the access read, write or admin")]
pub struct InvalidScope(pub String);

impl FromStr for Scope {
    type Err = InvalidScope;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || InvalidScope(s.to_owned());
        let (service, access) = s.trim().split_once(':').ok_or_else(bad)?;
        let access = match access {
            "read" => Access::Read,
            "write" => Access::Write,
            "admin" => Access::Admin,
            _ => return Err(bad()),
        };
        let service = match service {
            "*" => None,
            s if SCOPE_SERVICES.contains(&s) => Some(s.to_owned()),
            _ => return Err(bad()),
        };
        Ok(Scope { service, access })
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.service.as_deref().unwrap_or("*"), self.access.as_str())
    }
}

impl FromStr for Scopes {
    type Err = InvalidScope;

    /// A comma-separated list, such as `conversation:write,triage:read`; at least one.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let scopes =
            s.split(',').filter(|p| !p.trim().is_empty()).map(Scope::from_str).collect::<Result<Vec<_>, _>>()?;
        if scopes.is_empty() {
            return Err(InvalidScope(s.to_owned()));
        }
        Ok(Scopes(scopes))
    }
}

impl fmt::Display for Scopes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, scope) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{scope}")?;
        }
        Ok(())
    }
}

impl Scopes {
    /// Every access to every service (`*:admin`): the principal of `auth.mode = "none"`.
    pub fn all() -> Self {
        Scopes(vec![Scope { service: None, access: Access::Admin }])
    }

    pub fn allows(&self, service: &str, access: Access) -> bool {
        self.0.iter().any(|s| s.service.as_deref().is_none_or(|own| own == service) && s.access >= access)
    }
}

/// The caller of a request, as the auth layer established it.
#[derive(Debug, Clone)]
pub struct Principal {
    pub tenant: Tenant,
    /// The key's public id (`None` without keys); never the key itself.
    pub key_id: Option<String>,
    pub scopes: Scopes,
}

impl Principal {
    /// The caller when keys are off: tenant `default`, every scope.
    pub fn open() -> Self {
        Principal { tenant: Tenant::default(), key_id: None, scopes: Scopes::all() }
    }
}

/// The caller's principal. Every call that reaches a handler has one (the auth layer wraps
/// every service); a handler called without the layer (a unit test) acts as [`Principal::open`].
pub fn principal<T>(request: &tonic::Request<T>) -> Principal {
    request.extensions().get::<Principal>().cloned().unwrap_or_else(Principal::open)
}

/// The caller's tenant (see [`principal`]).
pub fn tenant<T>(request: &tonic::Request<T>) -> Tenant {
    request.extensions().get::<Principal>().map_or_else(Tenant::default, |p| p.tenant.clone())
}

/// How one gRPC service's methods are scoped: declared beside the service's adapter.
#[derive(Debug)]
pub struct ServiceAccess {
    /// The fully qualified service name, such as `frontdesk.v1.TriageService`.
    pub service: &'static str,
    /// Its name in scopes, one of [`SCOPE_SERVICES`].
    pub scope: &'static str,
    /// Each method's name and the access it needs.
    pub methods: &'static [(&'static str, Access)],
}

/// Finds a presented key's principal.
#[async_trait]
pub trait KeyVerifier: Send + Sync + 'static {
    /// `presented` is the text after `Bearer `. Unknown, malformed and revoked keys are
    /// [`AccessError::InvalidKey`].
    async fn verify(&self, presented: &str) -> Result<Principal, AccessError>;
}

/// Every method's scope, by request path (`/frontdesk.v1.TriageService/TriageTicket`).
#[derive(Debug, Default)]
pub struct MethodTable {
    methods: HashMap<String, (&'static str, Access)>,
}

impl MethodTable {
    pub fn new<'a>(services: impl IntoIterator<Item = &'a ServiceAccess>) -> Self {
        let mut methods = HashMap::new();
        for service in services {
            for (method, access) in service.methods {
                methods.insert(format!("/{}/{}", service.service, method), (service.scope, *access));
            }
        }
        MethodTable { methods }
    }

    /// The scope `path` needs; `None` for a path no service declared (reflection, or a method
    /// that does not exist, which then fails as UNIMPLEMENTED for any valid key).
    pub fn scope_of(&self, path: &str) -> Option<(&'static str, Access)> {
        self.methods.get(path).copied()
    }

    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.methods.keys().map(String::as_str)
    }
}

/// What the auth layer enforces.
pub struct AuthPolicy {
    /// `None`: keys are off and every call is [`Principal::open`].
    pub verifier: Option<Arc<dyn KeyVerifier>>,
    /// Services callable without a key (`auth.open_services`), by fully qualified name.
    pub open_services: HashSet<String>,
    pub methods: MethodTable,
}

impl AuthPolicy {
    /// The principal of a request to `path` with `authorization` metadata `header`.
    pub async fn admit(&self, path: &str, header: Option<&[u8]>) -> Result<Principal, AccessError> {
        let Some(verifier) = &self.verifier else { return Ok(Principal::open()) };
        let service = path.trim_start_matches('/').split('/').next().unwrap_or_default();
        let presented = header.and_then(|h| std::str::from_utf8(h).ok()).and_then(bearer);
        // An open service is served as with keys off, to whoever calls it without a valid key.
        let open = self.open_services.contains(service);
        let Some(presented) = presented else {
            return if open { Ok(Principal::open()) } else { Err(AccessError::MissingKey) };
        };
        let principal = match verifier.verify(presented).await {
            Err(_) if open => Principal::open(),
            other => other?,
        };
        if let Some((scope, access)) = self.methods.scope_of(path) {
            if !principal.scopes.allows(scope, access) {
                return Err(AccessError::ScopeMissing { scope: format!("{scope}:{}", access.as_str()) });
            }
        }
        Ok(principal)
    }
}

/// The key in an `authorization` value: `Bearer <key>` (the scheme in any case).
fn bearer(value: &str) -> Option<&str> {
    let (scheme, key) = value.trim().split_once(' ')?;
    let key = key.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !key.is_empty()).then_some(key)
}

/// The tower layer that admits every request through an [`AuthPolicy`].
#[derive(Clone)]
pub struct AuthLayer {
    policy: Arc<AuthPolicy>,
}

impl AuthLayer {
    pub fn new(policy: Arc<AuthPolicy>) -> Self {
        Self { policy }
    }
}

impl<S> Layer<S> for AuthLayer {
    type Service = Auth<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Auth { inner, policy: self.policy.clone() }
    }
}

#[derive(Clone)]
pub struct Auth<S> {
    inner: S,
    policy: Arc<AuthPolicy>,
}

impl<S, B> Service<http::Request<B>> for Auth<S>
where
    S: Service<http::Request<B>, Response = http::Response<Body>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    B: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: http::Request<B>) -> Self::Future {
        // The clone is not known to be ready; the one that was polled ready serves this call.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let policy = self.policy.clone();
        Box::pin(async move {
            let header = request.headers().get(http::header::AUTHORIZATION).map(|v| v.as_bytes().to_vec());
            match policy.admit(request.uri().path(), header.as_deref()).await {
                Ok(principal) => {
                    request.extensions_mut().insert(principal);
                    inner.call(request).await
                }
                Err(error) => Ok(refuse(access_status(error))),
            }
        })
    }
}

/// A refusal as a trailers-only gRPC response.
pub(crate) fn refuse(status: Status) -> http::Response<Body> {
    status.into_http()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_parse_print_and_include_lesser_access() {
        let scopes: Scopes = "conversation:write, triage:read".parse().unwrap();
        assert_eq!(scopes.to_string(), "conversation:write,triage:read");
        assert!(scopes.allows("conversation", Access::Read));
        assert!(scopes.allows("conversation", Access::Write));
        assert!(!scopes.allows("conversation", Access::Admin));
        assert!(scopes.allows("triage", Access::Read));
        assert!(!scopes.allows("triage", Access::Write));
        assert!(!scopes.allows("research", Access::Read));
        let all: Scopes = "*:admin".parse().unwrap();
        assert_eq!(all, Scopes::all());
        assert!(all.allows("workflow", Access::Admin));
        for bad in ["", "conversation", "conversation:delete", "tickets:read", "conversation:read,,x:y"] {
            assert!(bad.parse::<Scopes>().is_err(), "{bad}");
        }
    }

    #[test]
    fn bearer_takes_the_key_in_any_case_of_the_scheme() {
        assert_eq!(bearer("Bearer fdk_abc"), Some("fdk_abc"));
        assert_eq!(bearer("bearer  fdk_abc "), Some("fdk_abc"));
        assert_eq!(bearer("Basic abc"), None);
        assert_eq!(bearer("Bearer"), None);
        assert_eq!(bearer("Bearer "), None);
    }
}
