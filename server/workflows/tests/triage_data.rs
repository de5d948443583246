//! The triage workflow's data: the customer directory and the knowledge base (shipped samples,
//! JSON Lines parsing and BM25 search).

use std::error::Error as _;

use frontdesk_workflows::triage::customers::{AccountStatus, Customer, CustomerDirectory, Plan};
use frontdesk_workflows::triage::kb::{Article, Category, KnowledgeBase};
use frontdesk_workflows::WorkflowError;

/// The error and its sources, joined, for matching on messages.
fn chain(error: &WorkflowError) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

fn article(id: &str, category: Category, title: &str, body: &str) -> Article {
    Article { article_id: id.to_owned(), category, title: title.to_owned(), body: body.to_owned() }
}

#[test]
fn shipped_customers_load() {
    let customers = CustomerDirectory::shipped();
    assert!(customers.len() >= 25, "{} customers", customers.len());
    assert!(!customers.is_empty());
    for plan in [Plan::Free, Plan::Pro, Plan::Enterprise] {
        assert!(customers.customers().iter().any(|c| c.plan == plan), "no {plan:?} customer");
    }
    for status in [AccountStatus::Active, AccountStatus::PastDue, AccountStatus::Suspended] {
        assert!(customers.customers().iter().any(|c| c.account_status == status), "no {status:?} customer");
    }
}

#[test]
fn customer_lookup_hits_and_misses() {
    let customers = CustomerDirectory::shipped();
    let ana = customers.lookup("CUST-001").expect("CUST-001 is shipped");
    assert_eq!(ana.name, "Ana Smith");
    assert_eq!(ana.plan, Plan::Enterprise);
    assert_eq!(ana.account_status, AccountStatus::Active);
    assert!(ana.tenure_months > 0 && ana.seats > 0);
    assert!(customers.lookup("CUST-999").is_none());
    assert!(customers.lookup("cust-001").is_none(), "ids are case-sensitive");
    assert!(customers.lookup("").is_none());
}

#[test]
fn customer_serde_uses_the_file_spelling() {
    let line = r#"{"customer_id":"C1","name":"Jo Rossi","plan":"pro","tenure_months":3,"seats":4,"region":"emea","account_status":"past_due","email":"jo@example.com","preferred_language":"fr"}"#;
    let directory = CustomerDirectory::parse(line, "inline").unwrap();
    let jo = directory.lookup("C1").unwrap();
    assert_eq!(jo.plan, Plan::Pro);
    assert_eq!(jo.account_status, AccountStatus::PastDue);
    let back: serde_json::Value = serde_json::to_value(jo).unwrap();
    assert_eq!(back["plan"], "pro");
    assert_eq!(back["account_status"], "past_due");
    let again: Customer = serde_json::from_value(back).unwrap();
    assert_eq!(&again, jo);
}

#[test]
fn customers_load_from_a_file() {
    let dir = std::env::temp_dir().join(format!("frontdesk-triage-data-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("customers.jsonl");
    std::fs::write(&path, frontdesk_workflows::triage::customers::SHIPPED).unwrap();
    let loaded = CustomerDirectory::load(&path).unwrap();
    assert_eq!(loaded, CustomerDirectory::shipped());
    std::fs::remove_dir_all(&dir).unwrap();

    let missing = CustomerDirectory::load(&dir.join("nope.jsonl")).unwrap_err();
    assert!(matches!(missing, WorkflowError::Config { .. }), "{missing:?}");
}

#[test]
fn a_bad_customer_line_reports_its_line_number() {
    let good = r#"{"customer_id":"C1","name":"A","plan":"free","tenure_months":1,"seats":1,"region":"emea","account_status":"active","email":"a@x","preferred_language":"en"}"#;
    let bad_plan = good.replace("C1", "C2").replace("\"free\"", "\"platinum\"");
    let text = format!("{good}\n\n{bad_plan}\n");
    let error = CustomerDirectory::parse(&text, "customers.jsonl").unwrap_err();
    let WorkflowError::Config { path, .. } = &error else { panic!("{error:?}") };
    assert_eq!(path, "customers.jsonl");
    assert!(chain(&error).contains("line 3"), "{}", chain(&error));

    let truncated = format!("{good}\n{{\"customer_id\": \"C2\", \"name\"");
    let error = CustomerDirectory::parse(&truncated, "customers.jsonl").unwrap_err();
    assert!(chain(&error).contains("line 2"), "{}", chain(&error));

    let error = CustomerDirectory::parse("", "customers.jsonl").unwrap_err();
    assert!(chain(&error).contains("no customers"), "{}", chain(&error));
}

#[test]
fn duplicate_customer_ids_are_rejected() {
    let line = r#"{"customer_id":"C1","name":"A","plan":"free","tenure_months":1,"seats":1,"region":"emea","account_status":"active","email":"a@x","preferred_language":"en"}"#;
    let error = CustomerDirectory::parse(&format!("{line}\n{line}\n"), "customers.jsonl").unwrap_err();
    let text = chain(&error);
    assert!(text.contains("line 2") && text.contains("\"C1\""), "{text}");
}

#[test]
fn shipped_knowledge_base_loads() {
    let kb = KnowledgeBase::shipped();
    assert!(kb.len() >= 40, "{} articles", kb.len());
    for category in Category::ALL {
        let count = kb.articles().iter().filter(|a| a.category == category).count();
        assert!(count >= 10, "{count} {category} articles");
    }
    let first = kb.article("kb_001").expect("kb_001 is shipped");
    assert_eq!(first.category, Category::Billing);
    assert!(kb.article("kb_999").is_none());
    for a in kb.articles() {
        assert!(!a.title.is_empty() && a.body.len() > 80, "{} is too thin", a.article_id);
    }
}

#[test]
fn charged_twice_finds_the_double_charge_article() {
    let kb = KnowledgeBase::shipped();
    let hits = kb.search("I was charged twice on my invoice", Some(Category::Billing), 3);
    assert!(!hits.is_empty());
    let top = kb.article(&hits[0].article_id).unwrap();
    assert_eq!(top.category, Category::Billing);
    assert!(top.title.to_lowercase().contains("double charge"), "top hit {:?}", top.title);
    assert!(hits.len() <= 3);
    assert!(hits.windows(2).all(|w| w[0].score >= w[1].score), "{hits:?}");
    assert!(hits.iter().all(|h| h.score > 0.0));
}

#[test]
fn specialists_find_their_topics() {
    let kb = KnowledgeBase::shipped();
    let cases = [
        ("My payment method was declined", Category::Billing, "declined"),
        ("I need a refund for the annual subscription", Category::Billing, "refund"),
        ("the tax receipt shows the wrong billing address", Category::Billing, "address"),
        ("the api returns a timeout error", Category::Technical, "timeout"),
        ("webhook delivery fails with status 500", Category::Technical, "webhook"),
        ("I get a login error after the update", Category::Technical, "login"),
        ("We keep hitting HTTP 429 rate limits", Category::Technical, "rate limit"),
        ("How do I set up SSO with Okta?", Category::Technical, "sso"),
        ("how do I send team invitations", Category::General, "invitation"),
        ("where can I change notification emails", Category::General, "notification"),
        ("what is your data privacy policy", Category::General, "privacy"),
    ];
    for (query, category, expected) in cases {
        let hits = kb.search(query, Some(category), 3);
        let top = hits.first().unwrap_or_else(|| panic!("nothing for {query:?}"));
        assert!(top.title.to_lowercase().contains(expected), "{query:?} → {:?}", top.title);
    }
}

#[test]
fn the_category_filter_excludes_other_categories() {
    let kb = KnowledgeBase::shipped();
    // Mentions billing, technical and general topics at once.
    let query = "invoice refund api timeout login error team invitations notification emails";
    for category in Category::ALL {
        let hits = kb.search(query, Some(category), 50);
        assert!(!hits.is_empty(), "nothing in {category}");
        for hit in &hits {
            assert_eq!(kb.article(&hit.article_id).unwrap().category, category, "{hit:?}");
        }
    }
    let all = kb.search(query, None, 50);
    for category in Category::ALL {
        assert!(all.iter().any(|h| kb.article(&h.article_id).unwrap().category == category), "no {category}");
    }
}

#[test]
fn a_category_search_scores_like_the_unfiltered_one_and_unknown_words_change_nothing() {
    let kb = KnowledgeBase::shipped();
    let query = "refund for the invoice after the api timeout and a login error";
    let all = kb.search(query, None, 50);
    for category in Category::ALL {
        let expected: Vec<_> =
            all.iter().filter(|h| kb.article(&h.article_id).unwrap().category == category).cloned().collect();
        assert_eq!(kb.search(query, Some(category), 50), expected, "{category}");
    }
    // Words no article contains (nor any stem of them) leave every score as it was.
    let padded = format!("{query} zyxwvut qqqxxq plmokn");
    assert_eq!(kb.search(&padded, None, 50), all);
    assert!(kb.search("zyxwvut qqqxxq", None, 50).is_empty());
}

#[test]
fn free_text_queries_never_fail() {
    let kb = KnowledgeBase::shipped();
    let queries = [
        "",
        "   ",
        "?!?",
        "\"",
        "\"unterminated quote",
        "title:invoice AND (body:refund OR",
        "+refund -invoice ~2 ^3 * [a TO z] {} <>",
        "the and or not",
        "🙂 ça ne marche pas, je n'arrive pas à me connecter",
        "\\ / : ; , . ' ` | & ^ % $ # @",
    ];
    for query in queries {
        for category in [None, Some(Category::Technical)] {
            let _ = kb.search(query, category, 5);
        }
    }
    assert!(kb.search("", None, 5).is_empty());
    assert!(kb.search("  ?! \"\" ", Some(Category::Billing), 5).is_empty());
    assert!(kb.search("the and or not", None, 5).is_empty(), "stop words alone match nothing");
    assert!(kb.search("refund", Some(Category::Billing), 0).is_empty());
    // Query syntax is text: the quoted, prefixed word still matches.
    let hits = kb.search("title:\"refund\"", Some(Category::Billing), 1);
    assert!(hits[0].title.contains("Refund"), "{hits:?}");
    // A very long message is fine too.
    let long = "my invoice is wrong ".repeat(5_000);
    assert!(!kb.search(&long, None, 3).is_empty());
}

#[test]
fn results_are_deterministic() {
    let a = KnowledgeBase::shipped();
    let b = KnowledgeBase::shipped();
    for query in ["I was charged twice", "api error", "how do I change my settings", "help"] {
        for category in [None, Some(Category::Billing), Some(Category::Technical), Some(Category::General)] {
            let first = a.search(query, category, 10);
            assert_eq!(first, b.search(query, category, 10), "{query:?} {category:?}");
            assert_eq!(first, a.search(query, category, 10), "{query:?} {category:?}");
        }
    }
}

#[test]
fn ties_are_broken_by_article_id() {
    let body = "Nothing relevant here.";
    let kb = KnowledgeBase::from_articles(vec![
        article("kb_c", Category::General, "Refund", body),
        article("kb_a", Category::General, "Refund", body),
        article("kb_b", Category::General, "Refund", body),
        article("kb_d", Category::Billing, "Other", body),
    ])
    .unwrap();
    let hits = kb.search("refund", None, 10);
    let ids: Vec<&str> = hits.iter().map(|h| h.article_id.as_str()).collect();
    assert_eq!(ids, ["kb_a", "kb_b", "kb_c"]);
    assert_eq!(kb.search("refund", None, 2).len(), 2);
}

#[test]
fn titles_count_more_than_bodies() {
    let kb = KnowledgeBase::from_articles(vec![
        article("kb_1", Category::Technical, "Exporting data", "How to get a copy of your projects as CSV files."),
        article("kb_2", Category::Technical, "Getting a copy of projects", "How to export data as CSV files."),
    ])
    .unwrap();
    let hits = kb.search("export", Some(Category::Technical), 2);
    assert_eq!(hits.len(), 2);
    assert_eq!(hits[0].article_id, "kb_1", "{hits:?}");
    assert!(hits[0].score > hits[1].score);
}

#[test]
fn articles_are_validated() {
    let duplicate = KnowledgeBase::from_articles(vec![
        article("kb_1", Category::Billing, "A", "a"),
        article("kb_1", Category::General, "B", "b"),
    ])
    .unwrap_err();
    assert!(chain(&duplicate).contains("kb_1"), "{}", chain(&duplicate));

    let line = r#"{"article_id":"kb_1","category":"billing","title":"A","body":"a"}"#;
    let error = KnowledgeBase::parse(&format!("{line}\n{line}"), "articles.jsonl").unwrap_err();
    assert!(chain(&error).contains("line 2"), "{}", chain(&error));

    let unknown = r#"{"article_id":"kb_2","category":"sales","title":"B","body":"b"}"#;
    let error = KnowledgeBase::parse(&format!("{line}\n{unknown}"), "articles.jsonl").unwrap_err();
    assert!(chain(&error).contains("line 2"), "{}", chain(&error));

    let empty = KnowledgeBase::from_articles(Vec::new()).unwrap();
    assert!(empty.is_empty());
    assert!(empty.search("refund", None, 3).is_empty());
}

#[test]
fn the_data_is_shareable_across_tasks() {
    fn shareable<T: Send + Sync + 'static>() {}
    shareable::<KnowledgeBase>();
    shareable::<CustomerDirectory>();

    let kb = std::sync::Arc::new(KnowledgeBase::shipped());
    let expected = kb.search("api timeout", Some(Category::Technical), 3);
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let kb = kb.clone();
            std::thread::spawn(move || kb.search("api timeout", Some(Category::Technical), 3))
        })
        .collect();
    for thread in threads {
        assert_eq!(thread.join().unwrap(), expected);
    }
}
