//! Checks of the investigation store ([`frontdesk_store::investigation`]) shared by the SQLite
//! and PostgreSQL tests. [`hr_import`] expects a database without HR data and imports the
//! sample of `config/investigation/`; the other checks use ids of their own.

use std::{
    path::{Path, PathBuf},
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use frontdesk_store::{
    write_audit_csv, write_pending_actions_csv, Absence, AbsenceKind, AuditRow, Database, HrDataProblem, HrMutationRow,
    HrRole, HrUser, ImportCounts, InvestigationRow, PendingActionRow, RoleAuthorisation, StoreError, UserAuthorisation,
    CHANGE_INVESTIGATION_PENDING, PENDING_ACTION_ANSWERED,
};

use super::ns;

const FILES: [&str; 7] = [
    "users.csv",
    "roles.csv",
    "role_authorisations.csv",
    "authorisations.csv",
    "sickLeave.csv",
    "vacation.csv",
    "hr_mutations.csv",
];

/// The shipped sample.
pub fn sample_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/investigation")
}

/// A copy of the sample in a temporary directory, with `file` replaced by `contents`.
fn sample_with(file: &str, contents: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for name in FILES {
        std::fs::copy(sample_dir().join(name), dir.path().join(name)).unwrap();
    }
    std::fs::write(dir.path().join(file), contents).unwrap();
    dir
}

fn at(ms: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(ms)
}

/// The error chain on one line, as the server reports it.
fn report(error: &dyn std::error::Error) -> String {
    let mut out = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        out.push_str(": ");
        out.push_str(&cause.to_string());
        source = cause.source();
    }
    out
}

/// The sample's counts.
const SAMPLE: ImportCounts = ImportCounts {
    users: 8,
    roles: 6,
    role_authorisations: 8,
    authorisations: 3,
    sick_leave: 3,
    vacation: 3,
    mutations: 6,
};

/// Everything an import writes, to compare before and after.
async fn hr_snapshot(db: &Database) -> Vec<String> {
    let mut out = Vec::new();
    for u in db.hr_users().await.unwrap() {
        out.push(format!("{u:?}"));
        out.push(format!("{:?}", db.user_authorisations(&u.user_id).await.unwrap()));
        out.push(format!("{:?}", db.absences(AbsenceKind::SickLeave, &u.user_id).await.unwrap()));
        out.push(format!("{:?}", db.absences(AbsenceKind::Vacation, &u.user_id).await.unwrap()));
        if let Some(role) = &u.role_id {
            out.push(format!("{:?}", db.hr_role(role).await.unwrap()));
            out.push(format!("{:?}", db.role_authorisations(role).await.unwrap()));
        }
    }
    out.extend(db.hr_mutations().await.unwrap().iter().map(|m| format!("{m:?}")));
    out
}

/// Every check, in the order they need (the import first, on a database without HR data).
pub async fn run_all(db: &Database) {
    hr_import(db).await;
    hr_mutation_insert(db).await;
    investigations(db).await;
    audit_trail(db).await;
    pending_actions(db).await;
}

/// Whether a problem is the one a case expects.
type Expected = fn(&HrDataProblem) -> bool;

/// Import of the sample, lookups, idempotent re-import, validation errors.
pub async fn hr_import(db: &Database) {
    assert!(db.hr_data_is_empty().await.unwrap(), "a new database has no HR data");
    assert_eq!(db.import_hr_data(&sample_dir()).await.unwrap(), SAMPLE);
    assert!(!db.hr_data_is_empty().await.unwrap());

    // Lookups.
    let users = db.hr_users().await.unwrap();
    let ids: Vec<&str> = users.iter().map(|u| u.user_id.as_str()).collect();
    assert_eq!(ids, ["u001", "u002", "u003", "u004", "u005", "u006", "u007", "u008"]);
    assert_eq!(
        db.hr_user("u002").await.unwrap(),
        Some(HrUser {
            user_id: "u002".into(),
            name: "Bob de Vries".into(),
            email: "bob.devries@example.com".into(),
            department: "HR".into(),
            manager_id: Some("u001".into()),
            role_id: Some("r_hr_clerk".into()),
        })
    );
    let alice = db.hr_user("u001").await.unwrap().unwrap();
    assert_eq!((alice.manager_id, alice.role_id.as_deref()), (None, Some("r_hr_admin")), "empty cells are NULL");
    assert_eq!(db.hr_user("u008").await.unwrap().unwrap().role_id, None);
    assert_eq!(db.hr_user("u999").await.unwrap(), None);
    assert_eq!(
        db.hr_role("r_payroll_admin").await.unwrap(),
        Some(HrRole {
            role_id: "r_payroll_admin".into(),
            name: "Payroll administrator".into(),
            description: "Administers payroll: salaries, bank accounts and payment runs".into(),
        }),
        "a quoted cell keeps its commas"
    );
    assert_eq!(db.hr_role("r_none").await.unwrap(), None);
    let role_auth = |system: &str, level: &str| RoleAuthorisation {
        role_id: "r_payroll_admin".into(),
        system: system.into(),
        access_level: level.into(),
    };
    assert_eq!(
        db.role_authorisations("r_payroll_admin").await.unwrap(),
        vec![role_auth("HRPortal", "Read"), role_auth("Payroll", "Admin")],
        "by system, then level"
    );
    assert!(db.role_authorisations("r_none").await.unwrap().is_empty());
    assert_eq!(
        db.user_authorisations("u003").await.unwrap(),
        vec![UserAuthorisation {
            user_id: "u003".into(),
            system: "Payroll".into(),
            access_level: "Write".into(),
            granted_on: "2025-01-01".into(),
            expires_on: Some("2025-06-30".into()),
        }]
    );
    assert_eq!(db.user_authorisations("u004").await.unwrap()[0].expires_on, None);
    assert!(db.user_authorisations("u001").await.unwrap().is_empty());
    let absence = |user: &str, start: &str, end: &str| Absence {
        user_id: user.into(),
        start_date: start.into(),
        end_date: end.into(),
    };
    assert_eq!(
        db.absences(AbsenceKind::Vacation, "u006").await.unwrap(),
        vec![absence("u006", "2025-11-03", "2025-11-14")]
    );
    assert_eq!(
        db.absences(AbsenceKind::SickLeave, "u002").await.unwrap(),
        vec![absence("u002", "2025-10-01", "2025-10-03")]
    );
    assert!(db.absences(AbsenceKind::SickLeave, "u006").await.unwrap().is_empty(), "kinds are kept apart");
    assert!(db.absences(AbsenceKind::Vacation, "u002").await.unwrap().is_empty());
    let m1002 = HrMutationRow {
        mutation_id: "1002".into(),
        changer_id: "u003".into(),
        target_user_id: "u007".into(),
        system: "Payroll".into(),
        access_level: "Admin".into(),
        change_type: "salary_change".into(),
        description: "Raised monthly salary by 4%".into(),
        changed_at: "2025-11-10T14:30:00Z".into(),
        change_investigation: CHANGE_INVESTIGATION_PENDING.into(),
    };
    assert_eq!(db.hr_mutation("1002").await.unwrap(), Some(m1002.clone()));
    assert_eq!(db.hr_mutation("9999").await.unwrap(), None);
    let mutations = db.hr_mutations().await.unwrap();
    let ids: Vec<&str> = mutations.iter().map(|m| m.mutation_id.as_str()).collect();
    assert_eq!(ids, ["1001", "1002", "1003", "1004", "1005", "1006"]);
    assert!(mutations.iter().all(|m| m.change_investigation == "Pending"));

    // Re-importing changes nothing, and keeps a status the workflow set.
    assert!(db.set_change_investigation("1002", "InProgress").await.unwrap());
    assert!(!db.set_change_investigation("9999", "InProgress").await.unwrap(), "unknown mutation");
    let before = hr_snapshot(db).await;
    assert_eq!(db.import_hr_data(&sample_dir()).await.unwrap(), SAMPLE);
    assert_eq!(hr_snapshot(db).await, before, "a re-import is idempotent");
    assert_eq!(db.hr_mutation("1002").await.unwrap().unwrap().change_investigation, "InProgress");

    // A re-import of changed rows updates them, except a known mutation's status; a new
    // mutation takes the file's status, or Pending when the cell is empty.
    let mutations_csv = std::fs::read_to_string(sample_dir().join("hr_mutations.csv")).unwrap();
    let changed = mutations_csv.replace("Raised monthly salary by 4%", "Raised monthly salary by 5%").replace(
        "2025-11-10T14:30:00Z,Pending",
        "2025-11-10T14:30:00Z,Closed",
    ) + "1007,u001,u008,HRPortal,Admin,role_change,\"Granted IT \"\"admin\"\" role, temporarily\",2025-11-24T12:00:00.250Z,\n\
           1008,u005,u004,FinanceApp,Admin,budget_change,Moved budget,2025-11-25T07:00:00Z,Closed\n";
    let dir = sample_with("hr_mutations.csv", &changed);
    let counts = db.import_hr_data(dir.path()).await.unwrap();
    assert_eq!(counts, ImportCounts { mutations: 8, ..SAMPLE });
    assert_eq!(
        db.hr_mutation("1002").await.unwrap().unwrap(),
        HrMutationRow {
            description: "Raised monthly salary by 5%".into(),
            change_investigation: "InProgress".into(),
            ..m1002.clone()
        },
        "a known mutation's columns are updated, its status is kept"
    );
    let m1007 = db.hr_mutation("1007").await.unwrap().unwrap();
    assert_eq!(m1007.description, "Granted IT \"admin\" role, temporarily");
    assert_eq!(m1007.changed_at, "2025-11-24T12:00:00.250Z");
    assert_eq!(m1007.change_investigation, CHANGE_INVESTIGATION_PENDING, "an empty status is Pending");
    assert_eq!(db.hr_mutation("1008").await.unwrap().unwrap().change_investigation, "Closed");

    // A bad file is an error naming it and the line, and nothing of the import is written.
    let users_csv = std::fs::read_to_string(sample_dir().join("users.csv")).unwrap();
    let bad_users = users_csv.replace("carla.smit@example.com", "") + "u009,Ivo Jong,ivo.jong@example.com,IT,,\n";
    let dir = sample_with("users.csv", &bad_users);
    let err = db.import_hr_data(dir.path()).await.expect_err("an empty email is refused");
    let StoreError::HrData { file, line, problem } = &err else { panic!("{err:?}") };
    assert_eq!(file, &dir.path().join("users.csv"));
    assert_eq!(*line, Some(4), "u003 is on line 4");
    assert!(matches!(problem, HrDataProblem::Empty { column: "email" }), "{problem:?}");
    let message = report(&err);
    assert!(message.contains("users.csv") && message.contains("line 4") && message.contains("email"), "{message}");
    assert_eq!(db.hr_user("u009").await.unwrap(), None, "nothing of a failed import is written");
    assert_eq!(db.hr_user("u003").await.unwrap().unwrap().email, "carla.smit@example.com");

    let cases: [(&str, &str, Option<u64>, Expected); 9] = [
        ("roles.csv", "role_id,name,description\nr_x,X\n", Some(2), |p| matches!(p, HrDataProblem::Unreadable(_))),
        (
            "vacation.csv",
            "user_id,start_date,end_date\nu001,2025-07-14,2025-07-25\nu002,2025-02-30,2025-03-02\n",
            Some(3),
            |p| matches!(p, HrDataProblem::NotADate { column: "start_date", value } if value == "2025-02-30"),
        ),
        ("sickLeave.csv", "user_id,start_date,end_date\nu002,2025-10-03,2025-10-01\n", Some(2), |p| {
            matches!(p, HrDataProblem::EndsBeforeStart { end_column: "end_date", .. })
        }),
        (
            "authorisations.csv",
            "user_id,system,access_level,granted_on,expires_on\nu004,HRPortal,Read,2025-01-01,2024-12-31\n",
            Some(2),
            |p| {
                matches!(p, HrDataProblem::EndsBeforeStart { start_column: "granted_on", end_column: "expires_on", .. })
            },
        ),
        ("hr_mutations.csv", &mutations_csv.replace("2025-11-12T11:15:00Z", "2025-11-12 11:15"), Some(4), |p| {
            matches!(p, HrDataProblem::NotATime { column: "changed_at", .. })
        }),
        (
            "role_authorisations.csv",
            "role_id,system,access_level\nr_hr_admin,HRPortal,Admin\nr_hr_admin , HRPortal , Admin\n",
            Some(3),
            |p| matches!(p, HrDataProblem::RepeatedKey { first_line: 2, .. }),
        ),
        (
            "users.csv",
            "user_id,name,email,department,manager,role_id\n",
            Some(1),
            |p| matches!(p, HrDataProblem::UnknownColumn { column } if column == "manager"),
        ),
        ("users.csv", "", Some(1), |p| matches!(p, HrDataProblem::MissingColumn { column: "user_id" })),
        ("hr_mutations.csv", &mutations_csv.replace("1004,u007,", "1004,,"), Some(5), |p| {
            matches!(p, HrDataProblem::Empty { column: "changer_id" })
        }),
    ];
    for (file, contents, expected_line, expected) in cases {
        let dir = sample_with(file, contents);
        let err = db.import_hr_data(dir.path()).await.expect_err(file);
        let StoreError::HrData { file: path, line, problem } = &err else { panic!("{file}: {err:?}") };
        assert_eq!(path, &dir.path().join(file));
        assert_eq!(*line, expected_line, "{file}: {}", report(&err));
        assert!(expected(problem), "{file}: {problem:?}");
    }
    let dir = tempfile::tempdir().unwrap();
    let err = db.import_hr_data(dir.path()).await.expect_err("no files");
    assert!(matches!(&err, StoreError::HrData { line: None, problem: HrDataProblem::Unreadable(_), .. }), "{err:?}");
    assert!(report(&err).contains("users.csv"), "{}", report(&err));
    assert_eq!(db.hr_mutations().await.unwrap().len(), 8, "failed imports wrote nothing");
}

/// Inserting a mutation: a new id is written whole, a known one is left alone.
pub async fn hr_mutation_insert(db: &Database) {
    let id = format!("m-{}", ns());
    let mutation = HrMutationRow {
        mutation_id: id.clone(),
        changer_id: "u001".into(),
        target_user_id: "u002".into(),
        system: "HRPortal".into(),
        access_level: "Admin".into(),
        change_type: "role_change".into(),
        description: "Made u002 an administrator".into(),
        changed_at: "2025-12-01T10:00:00Z".into(),
        change_investigation: "InProgress".into(),
    };
    assert!(db.insert_hr_mutation(&mutation).await.unwrap());
    assert_eq!(db.hr_mutation(&id).await.unwrap(), Some(mutation.clone()));
    let other = HrMutationRow { description: "something else".into(), ..mutation.clone() };
    assert!(!db.insert_hr_mutation(&other).await.unwrap(), "the id exists");
    assert_eq!(db.hr_mutation(&id).await.unwrap(), Some(mutation), "nothing was written");
    assert!(db.set_change_investigation(&id, "Closed").await.unwrap());
    assert_eq!(db.hr_mutation(&id).await.unwrap().unwrap().change_investigation, "Closed");
}

fn investigation(id: &str, status: &str, created_ms: u64) -> InvestigationRow {
    InvestigationRow {
        investigation_id: id.to_owned(),
        mutation_id: "1002".into(),
        status: status.to_owned(),
        report_json: None,
        created_at: at(created_ms),
        updated_at: at(created_ms + 10),
    }
}

/// Saving, re-saving and listing investigations in pages, with and without a status.
pub async fn investigations(db: &Database) {
    let run = ns();
    let (open, closed) = (format!("open-{run}"), format!("closed-{run}"));
    // i3 and i4 are created at the same time: the id breaks the tie.
    let spec = [
        ("i1", &open, 1_000u64),
        ("i2", &closed, 2_000),
        ("i3", &open, 3_000),
        ("i4", &closed, 3_000),
        ("i5", &open, 5_000),
    ];
    for (id, status, ms) in spec {
        db.upsert_investigation(&investigation(&format!("{run}-{id}"), status, 1_700_000_000_000 + ms)).await.unwrap();
    }
    let expect = |names: &[&str]| names.iter().map(|n| format!("{run}-{n}")).collect::<Vec<_>>();
    let ids = |rows: &[InvestigationRow]| rows.iter().map(|r| r.investigation_id.clone()).collect::<Vec<_>>();
    assert_eq!(db.investigation(&format!("{run}-none")).await.unwrap(), None);

    // Re-saving keeps the first created_at and replaces the rest.
    let first = investigation(&format!("{run}-i2"), &closed, 1_700_000_002_000);
    let resaved = InvestigationRow {
        report_json: Some(r#"{"verdict":"unauthorised"}"#.into()),
        created_at: at(1_800_000_000_000),
        updated_at: at(1_800_000_000_001),
        mutation_id: "1003".into(),
        ..first.clone()
    };
    db.upsert_investigation(&resaved).await.unwrap();
    assert_eq!(
        db.investigation(&first.investigation_id).await.unwrap(),
        Some(InvestigationRow { created_at: first.created_at, ..resaved })
    );

    // Every investigation, two a page (only this run's are counted: the database is shared).
    let mut seen = Vec::new();
    let mut after = None;
    loop {
        let (page, next) = db.list_investigations(None, after.as_ref(), 2).await.unwrap();
        assert!(page.len() <= 2);
        seen.extend(ids(&page).into_iter().filter(|id| id.starts_with(&run)));
        match next {
            Some(n) => after = Some(n),
            None => break,
        }
    }
    assert_eq!(seen, expect(&["i5", "i4", "i3", "i2", "i1"]), "newest first, ties by id descending, each once");

    let (page, next) = db.list_investigations(Some(&open), None, 2).await.unwrap();
    assert_eq!(ids(&page), expect(&["i5", "i3"]));
    let next = next.expect("a third open investigation follows");
    assert_eq!(next.investigation_id, format!("{run}-i3"));
    assert_eq!(next.created_at_ms, 1_700_000_003_000);
    let (page, last) = db.list_investigations(Some(&open), Some(&next), 2).await.unwrap();
    assert_eq!(ids(&page), expect(&["i1"]));
    assert!(last.is_none());
    let (page, last) = db.list_investigations(Some(&closed), None, 10).await.unwrap();
    assert_eq!(ids(&page), expect(&["i4", "i2"]));
    assert!(last.is_none());
    let (page, last) = db.list_investigations(Some(&format!("none-{run}")), None, 10).await.unwrap();
    assert!(page.is_empty() && last.is_none());
    assert_eq!(db.list_investigations(Some(&open), None, 0).await.unwrap().0.len(), 1, "a limit of 0 means 1");
}

fn audit(investigation_id: &str, seq: u32, correlation_id: &str, at_ms: u64, kind: &str) -> AuditRow {
    AuditRow {
        investigation_id: investigation_id.to_owned(),
        seq,
        correlation_id: correlation_id.to_owned(),
        at: at(at_ms),
        actor: "check_authorisation".into(),
        kind: kind.to_owned(),
        status_from: None,
        status_to: None,
        entry_json: format!(r#"{{"seq":{seq}}}"#),
    }
}

/// An audit entry of `investigation_id`, with made-up details, for checks of failed writes.
pub fn audit_entry(investigation_id: &str, seq: u32, kind: &str) -> AuditRow {
    audit(investigation_id, seq, "corr-1", 1_000 + u64::from(seq), kind)
}

/// Audit entries are keyed by position; read back by investigation, correlation and in full.
pub async fn audit_trail(db: &Database) {
    let run = ns();
    let (a, b, c1, c2) = (format!("{run}-a"), format!("{run}-b"), format!("{run}-c1"), format!("{run}-c2"));
    db.upsert_audit_entries(&[]).await.unwrap();
    let mut status_change = audit(&a, 1, &c1, 1_000, "status");
    status_change.status_from = Some("Pending".into());
    status_change.status_to = Some("InProgress".into());
    let entries = vec![
        status_change,
        audit(&a, 2, &c1, 3_000, "node"),
        audit(&a, 3, &c2, 4_000, "node"),
        audit(&b, 1, &c1, 2_000, "node"),
        audit(&b, 2, &c1, 3_000, "node"),
    ];
    db.upsert_audit_entries(&entries).await.unwrap();
    assert_eq!(db.audit_trail(&a, None).await.unwrap(), entries[..3].to_vec());
    assert_eq!(db.audit_trail(&a, Some(1)).await.unwrap(), entries[1..3].to_vec());
    assert!(db.audit_trail(&a, Some(3)).await.unwrap().is_empty());
    assert!(db.audit_trail(&format!("{run}-none"), None).await.unwrap().is_empty());

    // A node re-run writes seq 2 again: it replaces the first, nothing is duplicated.
    let rerun = AuditRow {
        at: at(3_500),
        kind: "node-rerun".into(),
        entry_json: r#"{"rerun":true}"#.into(),
        ..entries[1].clone()
    };
    db.upsert_audit_entries(std::slice::from_ref(&rerun)).await.unwrap();
    assert_eq!(db.audit_trail(&a, None).await.unwrap(), vec![entries[0].clone(), rerun.clone(), entries[2].clone()]);

    // By correlation: in time order, then investigation, then seq.
    let by_c1 = db.audit_by_correlation(&c1).await.unwrap();
    let keys: Vec<(String, u32)> = by_c1.iter().map(|e| (e.investigation_id.clone(), e.seq)).collect();
    assert_eq!(keys, vec![(a.clone(), 1), (b.clone(), 1), (b.clone(), 2), (a.clone(), 2)]);
    assert_eq!(db.audit_by_correlation(&c2).await.unwrap(), vec![entries[2].clone()]);

    let all: Vec<AuditRow> =
        db.audit_all().await.unwrap().into_iter().filter(|e| e.investigation_id.starts_with(&run)).collect();
    assert_eq!(all, vec![entries[0].clone(), rerun, entries[2].clone(), entries[3].clone(), entries[4].clone()]);
}

fn action(id: &str, recipient: &str, status: &str, created_ms: u64) -> PendingActionRow {
    PendingActionRow {
        action_id: id.to_owned(),
        investigation_id: "inv-1".into(),
        mutation_id: "1002".into(),
        recipient_id: recipient.to_owned(),
        recipient_role: "changer".into(),
        subject: "Your change 1002".into(),
        body: "Why did you raise the salary of u007?".into(),
        status: status.to_owned(),
        reply_json: None,
        created_at: at(created_ms),
        answered_at: None,
    }
}

/// Pending actions: saved, listed by recipient and status, answered once known.
pub async fn pending_actions(db: &Database) {
    let run = ns();
    let (alice, bob, waiting) = (format!("{run}-alice"), format!("{run}-bob"), format!("waiting-{run}"));
    let a1 = action(&format!("{run}-a1"), &alice, &waiting, 1_000);
    let a2 = action(&format!("{run}-a2"), &bob, &waiting, 2_000);
    let a3 = action(&format!("{run}-a3"), &alice, &waiting, 3_000);
    // Saved out of order: listed by creation time.
    for a in [&a3, &a1, &a2] {
        db.upsert_pending_action(a).await.unwrap();
    }
    assert_eq!(db.pending_action(&a1.action_id).await.unwrap(), Some(a1.clone()));
    assert_eq!(db.pending_action(&format!("{run}-none")).await.unwrap(), None);
    assert_eq!(db.pending_actions(Some(&alice), None).await.unwrap(), vec![a1.clone(), a3.clone()]);
    assert_eq!(db.pending_actions(Some(&alice), Some(&waiting)).await.unwrap(), vec![a1.clone(), a3.clone()]);
    assert_eq!(db.pending_actions(None, Some(&waiting)).await.unwrap(), vec![a1.clone(), a2.clone(), a3.clone()]);
    let mine = |rows: Vec<PendingActionRow>| rows.into_iter().filter(|a| a.action_id.starts_with(&run)).count();
    assert_eq!(mine(db.pending_actions(None, None).await.unwrap()), 3);
    // Paged, in the same order, each page ending where the next begins.
    let mut pages = Vec::new();
    let mut after = None;
    loop {
        let (page, next) = db
            .list_pending_actions_in(
                frontdesk_store::investigation::KeyScope::All,
                None,
                Some(&waiting),
                after.as_ref(),
                2,
            )
            .await
            .unwrap();
        pages.push(page);
        match next {
            Some(cursor) => after = Some(cursor),
            None => break,
        }
    }
    assert_eq!(pages, vec![vec![a1.clone(), a2.clone()], vec![a3.clone()]]);
    let (page, next) = db
        .list_pending_actions_in(frontdesk_store::investigation::KeyScope::All, Some(&alice), Some(&waiting), None, 2)
        .await
        .unwrap();
    assert_eq!((page, next), (vec![a1.clone(), a3.clone()], None), "a full last page says no more follow");

    // Answering.
    let reply = r#"{"reason":"covering for u006 on vacation"}"#;
    assert!(db.answer_pending_action(&a1.action_id, reply, at(5_000)).await.unwrap());
    assert!(!db.answer_pending_action(&format!("{run}-none"), reply, at(5_000)).await.unwrap(), "unknown action");
    let answered = PendingActionRow {
        status: PENDING_ACTION_ANSWERED.into(),
        reply_json: Some(reply.into()),
        answered_at: Some(at(5_000)),
        ..a1.clone()
    };
    assert_eq!(db.pending_action(&a1.action_id).await.unwrap(), Some(answered.clone()));
    assert_eq!(db.pending_actions(Some(&alice), Some(&waiting)).await.unwrap(), vec![a3.clone()]);
    assert_eq!(db.pending_actions(Some(&alice), Some(PENDING_ACTION_ANSWERED)).await.unwrap(), vec![answered]);
    assert!(db.pending_actions(Some(&bob), Some(PENDING_ACTION_ANSWERED)).await.unwrap().is_empty());

    // Re-saving keeps the first created_at and replaces the rest.
    let moved = PendingActionRow {
        recipient_id: alice.clone(),
        subject: "Reminder".into(),
        created_at: at(9_000),
        ..a2.clone()
    };
    db.upsert_pending_action(&moved).await.unwrap();
    let kept = PendingActionRow { created_at: a2.created_at, ..moved };
    assert_eq!(db.pending_action(&a2.action_id).await.unwrap(), Some(kept.clone()));
    assert_eq!(db.pending_actions(Some(&alice), Some(&waiting)).await.unwrap(), vec![kept, a3]);
    assert!(db.pending_actions(Some(&bob), None).await.unwrap().is_empty());
}

/// The CSV writers: a header, then rows, quoted where needed, times in RFC 3339 UTC.
pub fn csv_exports() {
    let mut entry = audit("inv-1", 2, "corr-1", 1_762_765_200_123, "status");
    entry.status_from = Some("Pending".into());
    entry.status_to = Some("InProgress".into());
    entry.entry_json = r#"{"note":"a, b"}"#.into();
    entry.actor = "line\nbreak".into();
    let plain = audit("inv-2", 1, "corr-2", 0, "node");
    let mut out = Vec::new();
    write_audit_csv(&[entry.clone(), plain], &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert_eq!(
        text,
        "investigation_id,seq,correlation_id,at,actor,kind,status_from,status_to,entry_json\n\
         inv-1,2,corr-1,2025-11-10T09:00:00.123Z,\"line\nbreak\",status,Pending,InProgress,\
         \"{\"\"note\"\":\"\"a, b\"\"}\"\n\
         inv-2,1,corr-2,1970-01-01T00:00:00.000Z,check_authorisation,node,,,\"{\"\"seq\"\":1}\"\n"
    );
    // A CSV reader gets the values back.
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let first = reader.records().next().unwrap().unwrap();
    assert_eq!(&first[4], entry.actor);
    assert_eq!(&first[8], entry.entry_json);

    let mut a = action("act-1", "u003", "waiting", 1_762_765_200_000);
    a.subject = "Change 1002, \"salary\"".into();
    a.reply_json = Some(r#"{"ok":true}"#.into());
    a.answered_at = Some(at(1_762_765_260_000));
    let b = action("act-2", "u005", "waiting", 1_762_765_200_000);
    let mut out = Vec::new();
    write_pending_actions_csv(&[a, b], &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert_eq!(
        text,
        "action_id,investigation_id,mutation_id,recipient_id,recipient_role,subject,body,status,reply_json,\
         created_at,answered_at\n\
         act-1,inv-1,1002,u003,changer,\"Change 1002, \"\"salary\"\"\",Why did you raise the salary of u007?,waiting,\
         \"{\"\"ok\"\":true}\",2025-11-10T09:00:00.000Z,2025-11-10T09:01:00.000Z\n\
         act-2,inv-1,1002,u005,changer,Your change 1002,Why did you raise the salary of u007?,waiting,,\
         2025-11-10T09:00:00.000Z,\n"
    );
    let mut out = Vec::new();
    write_pending_actions_csv(&[], &mut out).unwrap();
    assert_eq!(out.iter().filter(|b| **b == b'\n').count(), 1, "no rows: the header alone");
}
