//! Who is asking and what a list shows them, after `buildACLSearchParameters`:
//!
//! - `projectid=<id>`: that project's resources (the caller must be an admin or a member);
//! - `projectid=-1`: every project's the caller may use;
//! - neither, with `id`: any resource the caller may see (admins: all);
//! - neither, without `id`: resources of accounts, not projects: the caller's own, or with
//!   `listall=true` and an admin caller, every account's.

use super::error::CsError;
use super::model::{Owner, Role, World};
use super::params::Params;

/// The account a request was signed for.
#[derive(Debug, Clone)]
pub struct Caller {
    pub account_id: String,
    pub user_id: String,
    pub name: String,
    pub admin: bool,
}

impl Caller {
    pub fn of(world: &World, account_id: &str) -> Option<Caller> {
        let a = world.account(account_id)?;
        Some(Caller {
            account_id: a.id.clone(),
            user_id: a.user_id.clone(),
            name: a.name.clone(),
            admin: a.role == Role::Admin,
        })
    }

    /// Whether the caller may use `owner`'s resources at all.
    pub fn may_use(&self, world: &World, owner: &Owner) -> bool {
        match owner {
            Owner::Account(a) => self.admin || *a == self.account_id,
            Owner::Project(p) => self.admin || member(world, p, &self.account_id),
        }
    }

    /// The owner a new resource gets: the project of `projectid`, else the caller's account.
    pub fn new_owner(&self, world: &World, params: &Params) -> Result<Owner, CsError> {
        match params.get("projectid") {
            Some(p) => {
                let project = world
                    .project(p)
                    .ok_or_else(|| params.unknown_id("projectid", p))?;
                if !self.may_use(world, &Owner::Project(project.id.clone())) {
                    return Err(self.no_project_access(p));
                }
                Ok(Owner::Project(project.id.clone()))
            }
            None => Ok(Owner::Account(self.account_id.clone())),
        }
    }

    fn no_project_access(&self, project: &str) -> CsError {
        CsError::denied(format!(
            "Account {} does not have permission to access project id={project}",
            self.name
        ))
    }
}

fn member(world: &World, project: &str, account: &str) -> bool {
    world
        .project(project)
        .is_some_and(|p| p.members.iter().any(|m| m == account))
}

/// Which owners a list call covers (see the module comment).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    Project(String),
    AllProjects,
    ById,
    OwnAccount,
    AllAccounts,
}

impl Scope {
    pub fn of(world: &World, caller: &Caller, params: &Params) -> Result<Scope, CsError> {
        if let Some(p) = params.get("projectid") {
            if p == "-1" {
                return Ok(Scope::AllProjects);
            }
            let project = world
                .project(p)
                .ok_or_else(|| params.unknown_id("projectid", p))?;
            if !caller.may_use(world, &Owner::Project(project.id.clone())) {
                return Err(caller.no_project_access(p));
            }
            return Ok(Scope::Project(project.id.clone()));
        }
        if params.get("id").is_some() {
            return Ok(Scope::ById);
        }
        if caller.admin && params.flag("listall") == Some(true) {
            Ok(Scope::AllAccounts)
        } else {
            Ok(Scope::OwnAccount)
        }
    }

    /// Whether a resource of `owner` is in this scope for `caller`.
    pub fn covers(&self, world: &World, caller: &Caller, owner: &Owner) -> bool {
        match (self, owner) {
            (Scope::Project(p), Owner::Project(q)) => p == q,
            (Scope::AllProjects, Owner::Project(_)) => caller.may_use(world, owner),
            (Scope::ById, _) => caller.may_use(world, owner),
            (Scope::OwnAccount, Owner::Account(a)) => *a == caller.account_id,
            (Scope::AllAccounts, Owner::Account(_)) => true,
            _ => false,
        }
    }
}
